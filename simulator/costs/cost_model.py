"""The roofline cost of one forward pass, per op class, per tensor-parallel shard.

For sequences i = 1..B with n_i new tokens and c_i cached tokens (T = sum n_i), the cost
depends on the batch only through five sums (`PassShape`, simulator/costs/pass_shape.py): sequences,
tokens, sum c_i, query-key pairs sum n_i (c_i + (n_i + 1) / 2) (`causal_pairs`), and positions
that need logits. Each op
class has FLOPs and bytes; its time is the soft roofline

    t = (t_compute^p + t_memory^p)^(1/p),  t_compute = FLOPs / (peak * eff_compute),
                                           t_memory  = bytes / (bandwidth * eff_memory)

(p = roofline_sharpness; p -> inf is max()), plus the all-reduce (alpha-beta ring model)
and per-kernel launch overheads. docs/cost_model.md states every term. simulator/costs/shard_costs.py
computes the per-GPU coefficients (bytes, FLOPs, collectives, overheads: `ShardCosts`, set as this
model's attributes); simulator/costs/op_cost.py holds the per-op report (`PassCost`, `pass_breakdown`)
and the soft roofline.

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

Attention by layer type (simulator/models/layer_types.py): the full layers read the whole cache, the
sliding layers at most their window per sequence (a second roof in pass_time.pass_time_s, from
the constants of a pass over num_seqs sequences), the linear layers a constant state per position
that needs logits (an op class of the terms, `_linear_attention`); DeepSeek Sparse Attention as its
indexer on the full group and its top-k MLA on the windowed one (shard_costs.sparse_attention, no
new constant). Weights in per-part formats
(simulator/models/weight_formats.py: MXFP4 experts, NVFP4, INT4) stream at their bytes per weight and
multiply at the rate of the dtype their products run in.

`CostModel.time_s` takes floats or numpy arrays (broadcast), so the simulator costs an
iteration in a few microseconds and analytic sweeps cost 10^4 points in one call. It computes
(and caches) the terms that depend only on tokens and logits, and adds them with the attention
roof in simulator/costs/pass_time.py's `pass_time_s`, the one function the compiled decode rounds
(simulator/serving/decode_kernel.py) run too, from `CostModel.constants`.
"""
from __future__ import annotations

import math

import numpy as np

from ..common.errors import SpecsightInputError, require_int
from ..hardware.hardware import DTYPE_BYTES, Efficiency, HardwareProfile
from ..models.model_spec import ModelSpec
from ..models.moe_parallel import all_to_all_s_per_byte, check_layout, collective_latency_s, experts_touched
from .op_cost import OpCost, OpPieces, PassCost, pass_breakdown, soft_roofline
from .pass_shape import PassShape
from .pass_time import PassConstants, constants_row, pass_time_s, steps_time_s, timing_constants
from .shard_costs import KERNELS_FIXED, KERNELS_PER_LAYER, KERNELS_PER_LAYER_TP, LOGIT_BYTES, shard_costs

__all__ = ["CostModel", "PassShape", "PassCost", "OpCost", "soft_roofline",
           "KERNELS_FIXED", "KERNELS_PER_LAYER", "KERNELS_PER_LAYER_TP", "LOGIT_BYTES"]  # (costs/shard_costs.py's)

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
    over every GPU (simulator/models/moe_parallel.py)."""

    def __init__(self, model: ModelSpec, hw: HardwareProfile, tp: int = 1, dtype: str = "bf16",
                 kv_dtype: str | None = None, efficiency: Efficiency | None = None, ep: int = 1,
                 dp_attention: bool = False):
        tp = require_int("tp", tp, lo=1)
        self.layout = check_layout(model, tp, ep, dp_attention, hw.interconnect.gpus_per_node)
        atp = self.layout.attention_tp       # tp without dp_attention
        if dtype not in DTYPE_BYTES:
            raise SpecsightInputError("dtype", dtype, f"one of {', '.join(DTYPE_BYTES)}")
        if model.num_heads % atp:
            raise SpecsightInputError("tp", tp, f"must divide the {model.name} attention heads ({model.num_heads})")
        if not model.is_mla and model.num_kv_heads % atp and atp % model.num_kv_heads:
            raise SpecsightInputError("tp", tp, f"must divide, or be a multiple of, the {model.name} KV heads "
                                                f"({model.num_kv_heads})")
        self.model, self.hw, self.tp, self.dtype = model, hw, tp, dtype
        # the per-GPU coefficients (simulator/costs/shard_costs.py), as attributes
        for name, value in vars(shard_costs(model, hw, tp, dtype, kv_dtype, efficiency or hw.efficiency,
                                            self.layout)).items():
            setattr(self, name, value)
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
        as a float64 row (every term is a float): how simulator/serving/decode_kernel.py takes them (`terms`)."""
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
        """Per op class FLOPs, bytes, seconds and what bounds it (scalars only): op_cost.pass_breakdown."""
        return pass_breakdown(self, shape)
