"""The roofline cost of one forward pass, per op class, per tensor-parallel shard.

For sequences i = 1..B with n_i new tokens and c_i cached tokens (T = sum n_i), the cost
depends on the batch only through five sums (`PassShape`, simulator/pass_shape.py): sequences,
tokens, sum c_i, query-key pairs sum n_i (c_i + (n_i + 1) / 2) (`causal_pairs`), and positions
that need logits. Each op
class has FLOPs and bytes; its time is the soft roofline

    t = (t_compute^p + t_memory^p)^(1/p),  t_compute = FLOPs / (peak * eff_compute),
                                           t_memory  = bytes / (bandwidth * eff_memory)

(p = roofline_sharpness; p -> inf is max()), plus the all-reduce (alpha-beta ring model)
and per-kernel launch overheads. docs/cost_model.md states every term; simulator/op_cost.py holds
the per-op report (`PassCost`) and the soft roofline.

Two kernel regimes stream the weights. A pass that holds exactly one token multiplies every
weight matrix by a vector: BLAS libraries dispatch a matrix-vector kernel (cuBLAS/MKL GEMV) that
reads each weight once in a plain stream. From two tokens on they dispatch a matrix-matrix kernel
(GEMM), which tiles (on a CPU: packs) the weight for reuse across rows; its streaming rate
differs (on a CPU it is several times lower, and flat up to the compute roof; on an A100 the two
are within 2 %, docs/calibration.md). So the weight-streaming memory time of the op classes
that are a matrix-vector product at one token uses its own achieved fraction:

    t_memory = weight bytes / (bandwidth * eff_memory_gemv)   linear, routed experts: T == 1;
                                                              LM head: one logit in the pass
    t_memory = weight bytes / (bandwidth * eff_memory)        otherwise, and every other op class

(efficiency.memory_gemv; absent = efficiency.memory, the single-rate roofline, bit for bit).
Attention streams the KV cache with its own kernels (each query reads its own sequence's cache):
its memory time uses efficiency.memory_attention (absent = efficiency.memory, bit for bit).

Attention by layer type (simulator/layer_types.py): the full layers read the whole cache, the
sliding layers at most their window per sequence (a second roof in pass_time.pass_time_s, from
the constants of a pass over num_seqs sequences), the linear layers a constant state per position
that needs logits (an op class of the terms, `_linear_attention`); DeepSeek Sparse Attention as its
indexer on the full group and its top-k MLA on the windowed one (`_price_sparse_attention`, no new
constant). Weights in per-part formats
(simulator/weight_formats.py: MXFP4 experts, NVFP4, INT4) stream at their bytes per weight and
multiply at the rate of the dtype their products run in.

`CostModel.time_s` takes floats or numpy arrays (broadcast), so the simulator costs an
iteration in a few microseconds and analytic sweeps cost 10^4 points in one call. It computes
(and caches) the terms that depend only on tokens and logits, and adds them with the attention
roof in simulator/pass_time.py's `pass_time_s`, the one function the compiled decode rounds
(simulator/decode_kernel.py) run too, from `CostModel.constants`.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import SpecsightInputError, require_int
from .hardware import DTYPE_BYTES, Efficiency, HardwareProfile, require_sm_count
from .model_spec import ModelSpec
from .moe_parallel import (
    FP8_DISPATCH_BYTES,
    all_to_all_bytes,
    all_to_all_s_per_byte,
    check_layout,
    collective_latency_s,
    experts_touched,
    ring_link,
)
from .op_cost import OpCost, OpPieces, PassCost, soft_roofline
from .pass_shape import PassShape
from .pass_time import PassConstants, attention_time_s, constants_row, pass_time_s, steps_time_s, timing_constants
from .weight_formats import weight_costs

__all__ = ["CostModel", "PassShape", "PassCost", "OpCost", "soft_roofline"]

# Named constants of the physics (each is a count, not a tuned fudge factor).
ACTIVATION_BYTES = 2            # bf16/fp16 activations (fp8 weights compute in bf16 too)
FP32_ACTIVATION_BYTES = 4       # an fp32 model's activations (the CPU calibration runs in fp32)
LOGIT_BYTES = 4                 # float32 logits / probabilities
SAMPLING_PASSES = 3             # logits written by the LM head, read+written by softmax, read by the sampler
ELEMENTWISE_D_PASSES = 10       # per layer per token, in units of hidden_size: 2 RMSNorms (r+w), 2 residual adds
                                # (2r+w), rotary
ELEMENTWISE_I_PASSES = 3        # SwiGLU activation: read gate and up, write the product (intermediate width)
KERNELS_PER_LAYER = 9           # norm, qkv, rope, attention, o_proj, add+norm, gate_up, act, down
KERNELS_PER_LAYER_TP = 2        # the two all-reduces
KERNELS_FIXED = 4               # embedding, final norm, LM head, sampling
PREFILL_QUERY_TILE = 64         # query rows per attention block (CostModel.attention_rows)
# time_s's cache of the terms that depend only on (tokens, logits): Python numbers only (bool is
# an int subclass the simulator's logit counts can be); cleared when it reaches TERMS_CACHE_MAX.
PY_NUMBERS = frozenset((int, float, bool))
TERMS_CACHE_MAX = 1 << 16
OP_CLASSES = ("linear", "moe_experts", "attention", "lm_head", "sampling", "elementwise", "allreduce", "all_to_all",
              "overhead")


class CostModel:
    """Forward-pass time of `model` on one replica of tp `hw` GPUs: tensor-parallel, or with its
    routed experts expert-parallel over ep groups and, with dp_attention, attention data-parallel
    over every GPU (simulator/moe_parallel.py)."""

    def __init__(self, model: ModelSpec, hw: HardwareProfile, tp: int = 1, dtype: str = "bf16",
                 kv_dtype: str | None = None, efficiency: Efficiency | None = None, ep: int = 1,
                 dp_attention: bool = False):
        tp = require_int("tp", tp, lo=1)
        self.layout = check_layout(model, tp, ep, dp_attention, hw.interconnect.gpus_per_node)
        atp, adp = self.layout.attention_tp, self.layout.attention_dp   # tp, 1 without dp_attention
        if dtype not in DTYPE_BYTES:
            raise SpecsightInputError("dtype", dtype, f"one of {', '.join(DTYPE_BYTES)}")
        if model.num_heads % atp:
            raise SpecsightInputError("tp", tp, f"must divide the {model.name} attention heads ({model.num_heads})")
        if not model.is_mla and model.num_kv_heads % atp and atp % model.num_kv_heads:
            raise SpecsightInputError("tp", tp, f"must divide, or be a multiple of, the {model.name} KV heads "
                                                f"({model.num_kv_heads})")
        self.model, self.hw, self.tp, self.dtype = model, hw, tp, dtype
        self.kv_dtype = kv_dtype or ("bf16" if dtype == "fp8" else dtype)
        self.activation_bytes = FP32_ACTIVATION_BYTES if dtype == "fp32" else ACTIVATION_BYTES
        eff = efficiency or hw.efficiency
        self.p = eff.roofline_sharpness
        self.peak_flops_s = hw.peak_flops(dtype) * eff.compute
        self.bw_bytes_s = hw.memory_bandwidth_bytes_s * eff.memory
        self.bw_gemv_bytes_s = hw.memory_bandwidth_bytes_s * eff.memory_one_token   # one-token (GEMV) weight streaming
        self.bw_kv_bytes_s = hw.memory_bandwidth_bytes_s * eff.memory_kv              # attention's KV-cache reads
        bpw = DTYPE_BYTES[dtype]
        m = model
        L = m.num_layers
        # Linear layers every token multiplies (attention projections, dense MLP, shared experts, router,
        # head projections).
        lin_params = m.layer_params_dense_part + m.extra_linear_params
        self.linear_bytes = lin_params * bpw / atp        # dp_attention: replicated on every GPU
        self.linear_flops_per_token = 2.0 * lin_params / tp
        # Routed experts: distinct experts touched per layer E (1 - (1 - k/E)^T) under uniform routing.
        self.n_moe_layers = m.num_moe_layers
        self.num_experts = m.num_experts
        # (with ep: E / ep experts per rank, each over tp / ep GPUs: the same 1 / tp of the touched bytes)
        self.expert_keep = (1.0 - m.experts_per_token / m.num_experts) if m.is_moe else 1.0
        self.expert_bytes = m.expert_params * bpw / tp
        self.moe_flops_per_token = 2.0 * m.num_moe_layers * m.experts_per_token * m.expert_params / tp
        self.weight_bytes_per_gpu = (m.params_total * bpw) / tp
        if adp > 1:     # dp_attention: the non-expert weights replicated, the routed experts split tp ways
            routed = m.num_moe_layers * m.num_experts * m.expert_params
            self.weight_bytes_per_gpu = (m.params_total - routed) * bpw + routed * bpw / tp
        self.lm_head_bytes = m.lm_head_params * bpw / atp
        self.lm_head_flops_per_logit = 2.0 * m.lm_head_params / tp
        # FLOPs at the dtype's rate x these = the FLOPs an op class reports (1.0 unless parts run at other rates)
        self._linear_flops_shown = self._moe_flops_shown = self._head_flops_shown = 1.0
        if m.weight_formats:        # per-part formats (simulator/weight_formats.py): their bytes and rates
            w = weight_costs(m, hw, tp, dtype)
            self.linear_bytes, self.linear_flops_per_token = w.linear_bytes, w.linear_flops_per_token
            self.expert_bytes, self.moe_flops_per_token = w.expert_bytes, self.moe_flops_per_token * w.experts_slow
            self.lm_head_bytes = w.lm_head_bytes
            self.lm_head_flops_per_logit = self.lm_head_flops_per_logit * w.head_slow
            self.weight_bytes_per_gpu = w.weight_bytes
            self._linear_flops_shown = w.linear_flops_shown
            self._moe_flops_shown, self._head_flops_shown = 1.0 / w.experts_slow, 1.0 / w.head_slow
        if m.sparse is not None:    # DSA's indexer is replicated on every GPU (_add_replicated_indexer)
            self._add_replicated_indexer(bpw, atp, adp)
        # Attention: KV sharded over heads (replicated when tp exceeds the KV heads; MLA's latent is replicated);
        # dp_attention: each GPU holds its own requests' whole KV, 1 / tp of the replica's tokens.
        kv_shards = adp if adp > 1 else 1 if m.is_mla else min(tp, m.num_kv_heads)
        kv_b = DTYPE_BYTES[self.kv_dtype]
        # KV bytes per cached token of the softmax layers (full and sliding), of the full layers (read
        # over the whole context; the block pool's, simulator/kv_cache.py) and of the sliding layers
        # (read and held up to the window); full layers with their own shape (ModelSpec.full_attention)
        # split their own KV heads
        fs = m.full_attention
        full_shards = kv_shards if fs is None or adp > 1 else min(tp, fs.num_kv_heads)
        self.kv_bytes_per_token = m.num_softmax_layers * m.kv_elems_per_token() * kv_b / kv_shards
        self.full_kv_bytes_per_token = m.num_full_layers * m.full_kv_elems_per_token() * kv_b / full_shards
        self.window = m.window
        self.win_kv_bytes_per_token = m.num_sliding_layers * m.kv_elems_per_token() * kv_b / kv_shards
        if fs is not None:
            self.kv_bytes_per_token = self.full_kv_bytes_per_token + self.win_kv_bytes_per_token
        # Linear-attention layers: one state per sequence per layer (recurrent + convolution), sharded
        # over heads; the recurrence's FLOPs per token (simulator/layer_types.py)
        self.n_linear_layers = m.num_linear_layers
        lin = m.linear
        self.linear_state_bytes = m.num_linear_layers * lin.state_bytes(kv_b) / tp if lin else 0.0
        self.linear_attn_flops_per_token = m.num_linear_layers * lin.flops_per_token / tp if lin else 0.0
        # Attention kernels with one thread block per (sequence, KV head) run in waves over the
        # multiprocessors (Efficiency.attention_blocks; kv_wave_factor). MLA: eager attention
        # expands the latent into per-head keys and values, one block per query head.
        self._waves = eff.attention_blocks == "per_sequence_head"
        self.kv_heads_per_gpu = (max(1, m.num_heads // atp) if m.is_mla
                                 else max(1, m.num_kv_heads // min(atp, m.num_kv_heads)))
        self.query_group = 1 if m.is_mla else max(1, m.num_heads // m.num_kv_heads)   # query heads per KV head
        require_sm_count(hw.name, eff, hw.sm_count)        # (an efficiency override may ask for waves)
        self.sm_count = hw.sm_count
        self.attn_flops_per_pair = m.num_full_layers * m.full_attn_flops_per_pair() / tp
        self.win_flops_per_pair = m.num_sliding_layers * m.attn_flops_per_pair() / tp
        self.window_caps_memory = self.window > 0      # sliding layers hold at most their window
        if m.sparse is not None:    # DSA: the indexer as the full group, the MLA over the top-k as the windowed one
            self._price_sparse_attention(kv_shards, adp)
        # Sampling (on the gathered logits; the LM head is vocabulary-parallel).
        self.sampling_bytes_per_logit = m.num_lm_heads * m.lm_head_vocab * LOGIT_BYTES * SAMPLING_PASSES / adp
        # Measured host sampling time per logit row (overheads.sampling_row_us; absent: none).
        self.sampling_host_s_per_logit = (hw.overheads.sampling_row_us or 0.0) * 1e-6
        # Elementwise (norms, residuals, rotary, activation): memory-bound.
        act_width = (m.num_dense_layers * m.intermediate_size
                     + m.num_moe_layers * (m.experts_per_token + m.num_shared_experts) * m.moe_intermediate_size)
        self.elementwise_bytes_per_token = self.activation_bytes * (L * ELEMENTWISE_D_PASSES * m.hidden_size / adp
                                                               + ELEMENTWISE_I_PASSES * act_width / tp)
        # Tensor-parallel all-reduce: two per layer of T * d activations, ring alpha-beta model.
        # Past one NVLink domain (gpus_per_node) the ring runs at the inter-node link's rate and latency.
        self.allreduce_count = 2 * L if atp > 1 else 0
        self.allreduce_bytes_per_token = m.hidden_size * self.activation_bytes
        self.ring_factor = 2.0 * (atp - 1) / atp
        self.link_bytes_s, self.ring_latency_s = ring_link(atp, hw.interconnect)   # small-message time, per collective
        # Expert parallelism under dp_attention: each MoE layer's all-to-all dispatch (FP8 with FP8
        # weights, as DeepEP) and combine of each GPU's T / tp tokens (moe_parallel.all_to_all_bytes).
        self.all_to_all_count = 2 * m.num_moe_layers if adp > 1 and self.layout.ep > 1 else 0
        self.all_to_all_bytes_per_token = 0.0
        if self.all_to_all_count:
            dispatch = FP8_DISPATCH_BYTES if dtype == "fp8" else self.activation_bytes
            self.all_to_all_bytes_per_token = m.num_moe_layers * all_to_all_bytes(
                1.0 / adp, m.experts_per_token, m.hidden_size, dispatch + self.activation_bytes, self.layout.ep)
        n_kernels = (L * (KERNELS_PER_LAYER + (KERNELS_PER_LAYER_TP if atp > 1 else 0)) + KERNELS_FIXED
                     + self.all_to_all_count)
        self.launch_overhead_s = n_kernels * hw.overheads.kernel_launch_us * 1e-6
        self.iteration_overhead_s = hw.overheads.iteration_us * 1e-6
        # a speculative round's verification step, once per round with K > 0 (absent: 0)
        self.verify_overhead_s = (hw.overheads.verify_round_us or 0.0) * 1e-6
        # Constants of the hot path.
        self._sharp = math.isinf(self.p)
        self._inv_p = 0.0 if self._sharp else 1.0 / self.p
        # The weight-memory terms as the hot path adds them (t_m for max(), t_m^p for the soft
        # roofline), for many tokens and for one. The one-token selection runs only when the two
        # rates differ: a single-rate profile does the same arithmetic as before, bit for bit.
        self._gemv = self.bw_gemv_bytes_s != self.bw_bytes_s

        def weight_term(nbytes: float, bytes_s: float) -> float:
            t_m = nbytes / bytes_s
            return t_m if self._sharp else t_m ** self.p
        self._lin_term, self._head_term = (weight_term(self.linear_bytes, self.bw_bytes_s),
                                           weight_term(self.lm_head_bytes, self.bw_bytes_s))
        self._lin_term_gemv, self._head_term_gemv = (weight_term(self.linear_bytes, self.bw_gemv_bytes_s),
                                                     weight_term(self.lm_head_bytes, self.bw_gemv_bytes_s))
        self._moe_bytes_per_expert = self.n_moe_layers * self.expert_bytes
        self._ar_per_token_s = (self.allreduce_count * self.ring_factor * self.allreduce_bytes_per_token
                                / self.link_bytes_s) if self.allreduce_count else 0.0
        self._ar_fixed_s = self.allreduce_count * self.ring_latency_s
        if self.all_to_all_count:   # priced with the all-reduce: per-token seconds plus a fixed part per collective
            self._a2a_per_token_s = self.all_to_all_bytes_per_token * all_to_all_s_per_byte(self.layout.ep,
                                                                                              hw.interconnect)
            self._a2a_fixed_s = self.all_to_all_count * collective_latency_s(self.layout.ep, hw.interconnect)
            self._ar_per_token_s += self._a2a_per_token_s
            self._ar_fixed_s += self._a2a_fixed_s
        # (num_tokens, num_logits) -> the terms of time_s that depend on nothing else, for the
        # scalar calls the simulator makes (`_pass_terms`).
        self._terms: dict = {}
        # and the parts of them that depend on one of the two (`_pass_terms`): T -> the weights'
        # seconds, num_logits -> the LM head's (cleared with _terms; the other scalar callers of
        # _pass_terms, the compiled rounds' terms_row, add only the shapes of passes they run)
        self._weights_by_tokens: dict = {}
        self._head_by_logits: dict = {}
        # the constants of pass_time.pass_time_s (the compiled decode rounds take them as a row)
        self.constants = PassConstants(self.p, self._inv_p, self.peak_flops_s, self.bw_kv_bytes_s,
                                       self.attn_flops_per_pair, self.full_kv_bytes_per_token, self.launch_overhead_s,
                                       self.allreduce_count + self.all_to_all_count, self._ar_fixed_s, self._sharp,
                                       self.win_flops_per_pair,
                                       self.win_kv_bytes_per_token, float(self.window), 0.0)
        # the constants depend on the pass's sequences: attention in waves, or sliding layers (seqs)
        self._per_seq = self._waves or self.window > 0
        # the hot path's copies, plain tuples (CPython unpacks an exact tuple several times faster
        # than a NamedTuple); num_seqs -> those of pass_constants(num_seqs), for Python numbers
        self._constants = timing_constants(self.constants)
        self._wave_constants: dict = {}

    def _add_replicated_indexer(self, bpw: float, atp: int, adp: int) -> None:
        """DSA's lightning-indexer weights (counted in the model's attention weights, which TP
        shards) are replicated on every GPU (vLLM's and SGLang's DeepSeek-V3.2 Indexer: wq_b, wk and
        weights_proj are ReplicatedLinear): each GPU reads all of them and multiplies its tokens
        (T / adp) by them. Adds the part the sharded count leaves out."""
        m = self.model
        idx = m.num_layers * m.indexer_params
        self.linear_bytes += idx * bpw * (1.0 - 1.0 / atp)
        self.linear_flops_per_token += 2.0 * idx * (1.0 / adp - 1.0 / self.tp)
        if adp == 1:        # (dp_attention already replicates every non-expert weight)
            self.weight_bytes_per_gpu += idx * bpw * (1.0 - 1.0 / self.tp)

    def _price_sparse_attention(self, kv_shards: int, adp: int) -> None:
        """DeepSeek Sparse Attention on the two attention groups of pass_time.pass_time_s, with no
        new constant: the lightning indexer reads every cached token's index key and scores every
        (query, key) pair, as a full layer does (attn_flops_per_pair, full_kv_bytes_per_token); the
        MLA attends to each query's top index_topk keys, as a window of W = index_topk does (pairs
        min(P, T W); cached keys min(sum c, B (W - 1)) + 2 T). Memory holds every token of both
        (window_caps_memory false). The index keys are one per token, kept like MLA's latent (over
        kv_shards: 1, or the attention data-parallel groups); the indexer's heads are not
        split over TP (each GPU scores its own sequences' pairs with all of them)."""
        m, sp = self.model, self.model.sparse
        L = m.num_full_layers
        index_kv = L * sp.key_bytes / kv_shards
        self.window = sp.index_topk
        self.win_flops_per_pair, self.win_kv_bytes_per_token = self.attn_flops_per_pair, self.full_kv_bytes_per_token
        self.attn_flops_per_pair = L * sp.flops_per_pair / adp
        self.full_kv_bytes_per_token = index_kv
        self.kv_bytes_per_token = self.kv_bytes_per_token + index_kv
        self.window_caps_memory = False

    def kv_wave_factor(self, num_seqs: float | np.ndarray | None) -> float | np.ndarray:
        """How much longer the KV reads take than bytes / bandwidth: 1 for split-KV attention;
        for one thread block per (sequence, KV head), the B H_kv blocks run in
        ceil(B H_kv / S) waves over S = sm_count multiprocessors, each block's keys streamed at
        1 / S of the bandwidth, so the reads take ceil(B H_kv / S) S / (B H_kv) times as long
        (S / (B H_kv) when the blocks fit in one wave; 1 when they fill whole waves). The wave
        time is set by the batch's mean context (ragged contexts: the longest sets it, which
        this does not model). Floats or numpy arrays."""
        if not self._waves:
            return 1.0
        if num_seqs is None:
            raise ValueError("num_seqs is needed: this profile's attention runs one block per (sequence, KV head)")
        S = self.sm_count
        if self.layout.attention_dp > 1:     # each GPU's own sequences
            num_seqs = num_seqs / self.layout.attention_dp
        blocks = (np.maximum(num_seqs, 1) if isinstance(num_seqs, np.ndarray)
                  else max(num_seqs, 1)) * self.kv_heads_per_gpu
        return -(-blocks // S) * S / blocks

    def pass_constants(self, num_seqs: float | np.ndarray | None) -> PassConstants:
        """The constants of a pass over num_seqs sequences: `constants` with the KV bandwidth
        divided by kv_wave_factor(num_seqs) where attention runs in waves, and seqs = num_seqs where
        sliding layers cap each sequence's keys (else `constants`)."""
        if not self._per_seq:
            return self.constants
        c = self.constants
        if self._waves:
            c = c._replace(kv_bytes_s=c.kv_bytes_s / self.kv_wave_factor(num_seqs))
        if self.window:
            if num_seqs is None:
                raise ValueError(f"num_seqs is needed: {self.model.name} has sliding-window or sparse (DSA) "
                                 "layers, whose keys are capped per sequence")
            c = c._replace(seqs=num_seqs)
        return c

    def _pass_constants(self, num_seqs: float | np.ndarray | None) -> tuple:
        """pass_constants(num_seqs) as pass_time_s takes them (pass_time.timing_constants), cached for
        Python numbers (the hot path's)."""
        if not self._per_seq:
            return self._constants
        c = self._wave_constants.get(num_seqs) if num_seqs.__class__ in PY_NUMBERS else None
        if c is None:
            c = timing_constants(self.pass_constants(num_seqs))
            if num_seqs.__class__ in PY_NUMBERS:
                if len(self._wave_constants) >= TERMS_CACHE_MAX:
                    self._wave_constants.clear()
                self._wave_constants[num_seqs] = c
        return c

    def kernel_constants(self, num_seqs: float | np.ndarray | None) -> np.ndarray:
        """pass_constants(num_seqs) as the compiled decode rounds take them: a float64 row
        (pass_time.constants_row)."""
        return constants_row(self.pass_constants(num_seqs))

    def terms_row(self, num_tokens: float, num_logits: float) -> np.ndarray:
        """time_s's terms that depend only on (tokens, logits), (weights, head, rest, all-reduce),
        as a float64 row (every term is a float): how simulator/decode_kernel.py takes them (`terms`)."""
        return np.array(self._pass_terms(num_tokens, num_logits))

    def attention_rows(self, decode_seqs: int, prefill_tokens: int = 0) -> int:
        """The num_seqs a pass passes to time_s: its decode sequences, plus, for the prefill chunks,
        the blocks per KV head their queries fill (a chunk of L tokens runs ceil(L g / 64) query
        tiles of 64 rows, g query heads per KV head; the sum is taken over all chunks at once). With
        the batch's KV reads spread over these, a long prefill chunk fills the device whatever the
        decode batch (kv_wave_factor). Python ints."""
        return decode_seqs + -(-(int(prefill_tokens) * self.query_group) // PREFILL_QUERY_TILE)

    def round_overhead_s(self, k: int) -> float:
        """Fixed seconds an engine iteration adds to its passes: the host overhead, plus the
        verification step's fixed time when the round speculates (k > 0)."""
        return self.iteration_overhead_s + self.verify_overhead_s if k > 0 else self.iteration_overhead_s

    # ---- the fast path -------------------------------------------------------------------
    def time_s(self, num_tokens: float | np.ndarray, sum_context: float | np.ndarray,
               sum_attn_pairs: float | np.ndarray, num_logits: float | np.ndarray,
               num_seqs: float | np.ndarray | None = None) -> float | np.ndarray:
        """Seconds for one forward pass (without the per-iteration host overhead).

        Arguments are the PassShape sums; floats or numpy arrays (broadcast). num_seqs (the
        sequences in the pass) matters only to a profile whose attention runs one block per
        (sequence, KV head) (kv_wave_factor), which requires it. This is the
        simulator's hot path (same physics as `breakdown`): the terms that depend only on
        (tokens, logits) are cached for Python numbers (`_pass_terms`), and
        pass_time.pass_time_s adds them to the attention roof."""
        if num_tokens.__class__ in PY_NUMBERS and num_logits.__class__ in PY_NUMBERS:
            terms = self._terms.get((num_tokens, num_logits))
            if terms is None:
                terms = self._terms[num_tokens, num_logits] = self._pass_terms(num_tokens, num_logits)
        else:
            terms = self._pass_terms(num_tokens, num_logits)
        return pass_time_s(self._pass_constants(num_seqs) if self._per_seq else self._constants, terms,
                           num_tokens, sum_context, sum_attn_pairs)

    def steps_time_s(self, first: float | np.ndarray, sum_context: float | np.ndarray, num_seqs: float | np.ndarray,
                     k: int, n: float | np.ndarray) -> float | np.ndarray:
        """Seconds for k sequential passes over num_seqs = B sequences (a drafter proposing k
        tokens): step 0 takes `first` tokens and computes B logits, step j >= 1 takes n tokens and
        computes n logits; step j reads sum_context + B j cached tokens, each token attending to
        its sequence's cache plus the causal part, pairs = n c / B + n (n / B + 1) / 2.
        The sum is 0.0 + step 0 + step 1 + ..., each step time_s's seconds for that pass
        (pass_time.steps_time_s, which the compiled decode rounds run too). Floats or numpy
        arrays; k >= 1."""
        if first.__class__ in PY_NUMBERS and num_seqs.__class__ in PY_NUMBERS and n.__class__ in PY_NUMBERS:
            cache = self._terms
            first_terms = cache.get((first, num_seqs))
            if first_terms is None:
                first_terms = cache[first, num_seqs] = self._pass_terms(first, num_seqs)
            later_terms = cache.get((n, n))
            if later_terms is None:
                later_terms = cache[n, n] = self._pass_terms(n, n)
        else:
            first_terms, later_terms = self._pass_terms(first, num_seqs), self._pass_terms(n, n)
        return steps_time_s(self._pass_constants(num_seqs) if self._per_seq else self._constants, first_terms,
                            later_terms, first, sum_context, num_seqs, k, n)

    def _pass_terms(self, T: float | np.ndarray, num_logits: float | np.ndarray, per_op: bool = False) -> tuple:
        """time_s's terms that depend only on (T, num_logits), in the order time_s adds them
        around attention: the weight-streaming ops before it (linear, then routed experts, summed),
        then the LM head, sampling + elementwise, and the all-reduce's per-token part. per_op: the
        per-op pieces they are made of instead (`OpPieces`, which `breakdown` reports). For Python
        numbers the weights' seconds are kept by T and the head's by num_logits (a pass shape new
        to time_s's cache mostly repeats one of them)."""
        p, F, W, ip = self.p, self.peak_flops_s, self.bw_bytes_s, self._inv_p
        scalars = T.__class__ in PY_NUMBERS and num_logits.__class__ in PY_NUMBERS   # the simulator's
        kept = scalars and not per_op
        if kept and len(self._terms) >= TERMS_CACHE_MAX:      # (time_s's cache misses come here)
            self._terms.clear()
            self._weights_by_tokens.clear()
            self._head_by_logits.clear()
        t = self._weights_by_tokens.get(T) if kept else None
        if t is None:
            lin, Wx = self._lin_term, W
            if self._gemv:      # one token: matrix-vector kernels (see the module docstring)
                if scalars:
                    if T == 1.0:
                        lin, Wx = self._lin_term_gemv, self.bw_gemv_bytes_s
                else:                                                     # arrays (and numpy scalars)
                    one = np.equal(T, 1)
                    lin, Wx = np.where(one, self._lin_term_gemv, lin), np.where(one, self.bw_gemv_bytes_s, W)
            lin_flops = self.linear_flops_per_token * T
            moe_s = moe_flops = moe_bytes = None
            if self.n_moe_layers:
                moe_flops = self.moe_flops_per_token * T
                moe_bytes = self._moe_bytes_per_expert * experts_touched(self.num_experts, self.expert_keep, T)
            if self._sharp:     # lin: the weight memory time
                lin_s = np.maximum(lin_flops / F, lin)
                if moe_bytes is not None:
                    moe_s = np.maximum(moe_flops / F, moe_bytes / Wx)
            else:               # lin: the weight memory time to the power p
                lin_s = ((lin_flops / F) ** p + lin) ** ip
                if moe_bytes is not None:
                    moe_s = ((moe_flops / F) ** p + (moe_bytes / Wx) ** p) ** ip
            t = lin_s if moe_s is None else lin_s + moe_s
            if kept:
                self._weights_by_tokens[T] = t
        h = self._head_by_logits.get(num_logits) if kept else None
        if h is None:
            head = self._head_term
            if self._gemv:      # one logit: a matrix-vector kernel
                if scalars:
                    if num_logits == 1.0:
                        head = self._head_term_gemv
                else:
                    head = np.where(np.equal(num_logits, 1), self._head_term_gemv, head)
            head_flops = self.lm_head_flops_per_logit * num_logits
            h = np.maximum(head_flops / F, head) if self._sharp else ((head_flops / F) ** p + head) ** ip
            if kept:
                self._head_by_logits[num_logits] = h
        sampling_bytes = self.sampling_bytes_per_logit * num_logits
        elementwise_bytes = self.elementwise_bytes_per_token * T
        la = self._linear_attention(T, num_logits) if self.n_linear_layers else None
        if per_op:
            return OpPieces(lin_flops, lin_s, moe_flops, moe_bytes, moe_s, Wx, head_flops, h, sampling_bytes,
                            elementwise_bytes, *(la or (None, None, None)))
        if la is not None:
            t = t + la[2]
        rest = (sampling_bytes + elementwise_bytes) / W
        if self.sampling_host_s_per_logit:
            rest = rest + self.sampling_host_s_per_logit * num_logits
        return t, h, rest, self._ar_per_token_s * T

    def _linear_attention(self, T: float | np.ndarray, num_logits: float | np.ndarray) -> tuple:
        """The linear-attention layers of a pass: (FLOPs, bytes, seconds). FLOPs: the recurrence for
        every token; bytes: a state read and one written per position that needs logits (plain
        decode exactly; a verify of K + 1 positions 2 (K + 1) per sequence, between vLLM's K + 2
        and SGLang's K + 4: docs/cost_model.md, "Attention by layer type"), at the KV bandwidth."""
        flops = self.linear_attn_flops_per_token * T
        nbytes = 2.0 * self.linear_state_bytes * num_logits
        t_c, t_m = flops / self.peak_flops_s, nbytes / self.bw_kv_bytes_s
        return flops, nbytes, soft_roofline(t_c, t_m, self.p)

    def kv_bytes_held(self, num_seqs: float, tokens_per_seq: float, spec_tokens: int = 0) -> float:
        """KV memory per GPU of num_seqs sequences holding tokens_per_seq tokens each: full layers
        every token, sliding layers at most the window, linear layers a constant state, kept in
        1 + spec_tokens slots while speculating (vLLM: num_speculative_tokens extra state slots
        per request, MambaSpec.num_speculative_blocks)."""
        if not (self.window_caps_memory or self.n_linear_layers):
            return num_seqs * tokens_per_seq * self.kv_bytes_per_token
        per_seq = (self.full_kv_bytes_per_token * tokens_per_seq
                   + self.win_kv_bytes_per_token * min(tokens_per_seq, self.window)
                   + self.linear_state_bytes * (1 + spec_tokens))
        return num_seqs * per_seq

    def shape_time_s(self, shape: PassShape) -> float | np.ndarray:
        return self.time_s(shape.num_tokens, shape.sum_context, shape.sum_attn_pairs, shape.num_logits, shape.num_seqs)

    # ---- the explained path --------------------------------------------------------------
    def breakdown(self, shape: PassShape) -> PassCost:
        """Per op class FLOPs, bytes, seconds and what bounds it (scalars only): the pieces of
        time_s's terms (`_pass_terms`), the attention roof (pass_time.attention_time_s), the
        all-reduce and the launches as time_s adds them."""
        T, n_logits, F, W = float(shape.num_tokens), float(shape.num_logits), self.peak_flops_s, self.bw_bytes_s
        o = self._pass_terms(T, n_logits, per_op=True)
        c = self.pass_constants(float(shape.num_seqs))

        def op(flops: float, nbytes: float, seconds: float, bw_bytes_s: float, shown: float = 1.0) -> OpCost:
            """flops: at the dtype's rate (what bounds the op); shown: the FLOPs reported per such FLOP."""
            return OpCost(flops * shown, nbytes, float(seconds),
                          "compute" if flops / F > nbytes / bw_bytes_s else "memory")

        ops = {"linear": op(o.linear_flops, self.linear_bytes, o.linear_s, o.weights_bytes_s, self._linear_flops_shown)}
        if o.experts_s is not None:
            ops["moe_experts"] = op(o.experts_flops, o.experts_bytes, o.experts_s, o.weights_bytes_s,
                                    self._moe_flops_shown)
        if o.linear_attn_s is not None:
            ops["linear_attention"] = op(o.linear_attn_flops, o.linear_attn_bytes, o.linear_attn_s, self.bw_kv_bytes_s)
        attn_flops = self.attn_flops_per_pair * shape.sum_attn_pairs
        attn_bytes = self.full_kv_bytes_per_token * (shape.sum_context + 2 * T)
        if self.window:
            attn_flops += self.win_flops_per_pair * min(shape.sum_attn_pairs, T * self.window)
            attn_bytes += self.win_kv_bytes_per_token * (min(shape.sum_context, c.seqs * (self.window - 1.0)) + 2 * T)
        ops["attention"] = op(attn_flops, attn_bytes,
                              attention_time_s(c, T, shape.sum_context, shape.sum_attn_pairs), c.kv_bytes_s)
        ops["lm_head"] = op(o.head_flops, self.lm_head_bytes, o.head_s,
                            self.bw_gemv_bytes_s if n_logits == 1 else W, self._head_flops_shown)
        sb, eb = o.sampling_bytes, o.elementwise_bytes
        ops["sampling"] = OpCost(0.0, sb, sb / W + self.sampling_host_s_per_logit * n_logits, "memory")
        ops["elementwise"] = OpCost(0.0, eb, eb / W, "memory")
        if self.allreduce_count:
            ops["allreduce"] = OpCost(0.0, self.allreduce_count * (self.allreduce_bytes_per_token * T),
                                      self._ar_per_token_s * T + self._ar_fixed_s, "network")
        if self.all_to_all_count:   # (dp_attention: no all-reduce, so _ar_* hold the all-to-all alone)
            ops["all_to_all"] = OpCost(0.0, self.all_to_all_bytes_per_token * T,
                                       self._a2a_per_token_s * T + self._a2a_fixed_s, "network")
        ops["overhead"] = OpCost(0.0, 0.0, self.launch_overhead_s, "overhead")
        return PassCost(ops)
