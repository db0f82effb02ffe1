"""What one GPU of a replica does per unit of a forward pass: the coefficients the cost model
(simulator/costs/cost_model.py) multiplies a pass's sums by, for `model` on tp `hw` GPUs in `layout`
(simulator/models/moe_parallel.py) at `dtype`: achieved rates, weight bytes and FLOPs per token or logit,
KV bytes per cached token and attention FLOPs per query-key pair by layer type, the memory-bound
streams, the collectives (counts, bytes, ring link) and the fixed overheads. `ShardCosts` holds
them; `shard_costs` computes them, once per cost model (docs/cost_model.md states every term).

Tensor parallelism shards the weights, the KV heads and the FLOPs tp ways; with dp_attention the
non-expert weights are replicated on every GPU, each GPU attends over its own requests (1 / tp of
the replica's tokens) and the routed experts are split tp ways, reached by an all-to-all. Per-part
weight formats (simulator/models/weight_formats.py) set their own bytes and rates. DeepSeek Sparse
Attention (DSA) replicates its indexer's weights (`replicated_indexer`) and is priced on the two
attention groups of pass_time.pass_time_s with no new constant (`sparse_attention`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..hardware.hardware import DTYPE_BYTES, Efficiency, HardwareProfile, require_sm_count
from ..models.model_spec import ModelSpec
from ..models.moe_parallel import FP8_DISPATCH_BYTES, ParallelLayout, all_to_all_bytes, ring_link
from ..models.weight_formats import weight_costs

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


@dataclass(frozen=True)
class ShardCosts:
    """The per-GPU coefficients of a forward pass. CostModel sets each field as its attribute of
    the same name (the few with a leading underscore only it and its per-op report read)."""
    kv_dtype: str
    activation_bytes: int
    p: float                            # roofline_sharpness
    peak_flops_s: float                 # achieved: peak * efficiency.compute
    bw_bytes_s: float                   # achieved memory bandwidth
    bw_gemv_bytes_s: float              # one-token (GEMV) weight streaming
    bw_kv_bytes_s: float                # attention's KV-cache reads
    # Linear layers every token multiplies (attention projections, dense MLP, shared experts,
    # router, head projections); FLOPs at the dtype's rate
    linear_bytes: float
    linear_flops_per_token: float
    # Routed experts: distinct experts touched per layer E (1 - (1 - k/E)^T) under uniform routing
    n_moe_layers: int
    num_experts: int
    expert_keep: float                  # 1 - k / E (1.0 without MoE layers)
    expert_bytes: float                 # one routed expert
    moe_flops_per_token: float
    weight_bytes_per_gpu: float         # every weight the GPU holds
    lm_head_bytes: float
    lm_head_flops_per_logit: float
    # FLOPs at the dtype's rate x these = the FLOPs an op class reports (1.0 unless parts run at
    # other rates: weight_formats.py)
    _linear_flops_shown: float
    _moe_flops_shown: float
    _head_flops_shown: float
    # KV bytes per cached token of the softmax layers (full and sliding), of the full layers (read
    # over the whole context; the block pool's, simulator/costs/kv_cache.py) and of the sliding layers
    # (read and held up to the window)
    kv_bytes_per_token: float
    full_kv_bytes_per_token: float
    window: int
    win_kv_bytes_per_token: float
    # Linear-attention layers: one state per sequence per layer (recurrent + convolution), sharded
    # over heads; the recurrence's FLOPs per token (simulator/models/layer_types.py)
    n_linear_layers: int
    linear_state_bytes: float
    linear_attn_flops_per_token: float
    # Attention kernels with one thread block per (sequence, KV head) run in waves over the
    # multiprocessors (Efficiency.attention_blocks; CostModel.kv_wave_factor)
    _waves: bool
    kv_heads_per_gpu: int
    query_group: int                    # query heads per KV head
    sm_count: int | None
    attn_flops_per_pair: float          # full layers
    win_flops_per_pair: float           # sliding layers
    window_caps_memory: bool            # sliding layers hold at most their window
    sampling_bytes_per_logit: float
    sampling_host_s_per_logit: float    # measured host sampling time per logit row (0.0: none)
    elementwise_bytes_per_token: float
    # Tensor-parallel all-reduce: ring alpha-beta model
    allreduce_count: int
    allreduce_bytes_per_token: float
    ring_factor: float
    link_bytes_s: float
    ring_latency_s: float               # small-message time, per collective
    # dp_attention with expert parallelism: each MoE layer's all-to-all dispatch and combine
    all_to_all_count: int
    all_to_all_bytes_per_token: float
    launch_overhead_s: float
    iteration_overhead_s: float
    verify_overhead_s: float            # a speculative round's verification step, once per round with K > 0


def shard_costs(m: ModelSpec, hw: HardwareProfile, tp: int, dtype: str, kv_dtype: str | None, eff: Efficiency,
                layout: ParallelLayout) -> ShardCosts:
    """The coefficients of `m` on one GPU of a replica of tp `hw` GPUs in `layout`, weights in
    `dtype` (or their per-part formats), KV cache in kv_dtype (None: bf16 with fp8 weights, else
    `dtype`), at the achieved fractions `eff`. dtype and layout are already checked."""
    atp, adp = layout.attention_tp, layout.attention_dp   # tp, 1 without dp_attention
    kv_dtype = kv_dtype or ("bf16" if dtype == "fp8" else dtype)
    activation_bytes = FP32_ACTIVATION_BYTES if dtype == "fp32" else ACTIVATION_BYTES
    p = eff.roofline_sharpness
    peak_flops_s = hw.peak_flops(dtype) * eff.compute
    bw_bytes_s = hw.memory_bandwidth_bytes_s * eff.memory
    bw_gemv_bytes_s = hw.memory_bandwidth_bytes_s * eff.memory_one_token
    bw_kv_bytes_s = hw.memory_bandwidth_bytes_s * eff.memory_kv
    bpw = DTYPE_BYTES[dtype]
    L = m.num_layers
    lin_params = m.layer_params_dense_part + m.extra_linear_params
    linear_bytes = lin_params * bpw / atp        # dp_attention: replicated on every GPU
    linear_flops_per_token = 2.0 * lin_params / tp
    # (with ep: E / ep experts per rank, each over tp / ep GPUs: the same 1 / tp of the touched bytes)
    expert_keep = (1.0 - m.experts_per_token / m.num_experts) if m.is_moe else 1.0
    expert_bytes = m.expert_params * bpw / tp
    moe_flops_per_token = 2.0 * m.num_moe_layers * m.experts_per_token * m.expert_params / tp
    weight_bytes_per_gpu = (m.params_total * bpw) / tp
    if adp > 1:     # dp_attention: the non-expert weights replicated, the routed experts split tp ways
        routed = m.num_moe_layers * m.num_experts * m.expert_params
        weight_bytes_per_gpu = (m.params_total - routed) * bpw + routed * bpw / tp
    lm_head_bytes = m.lm_head_params * bpw / atp
    lm_head_flops_per_logit = 2.0 * m.lm_head_params / tp
    linear_flops_shown = moe_flops_shown = head_flops_shown = 1.0
    if m.weight_formats:        # per-part formats (simulator/models/weight_formats.py): their bytes and rates
        w = weight_costs(m, hw, tp, dtype)
        linear_bytes, linear_flops_per_token = w.linear_bytes, w.linear_flops_per_token
        expert_bytes, moe_flops_per_token = w.expert_bytes, moe_flops_per_token * w.experts_slow
        lm_head_bytes = w.lm_head_bytes
        lm_head_flops_per_logit = lm_head_flops_per_logit * w.head_slow
        weight_bytes_per_gpu = w.weight_bytes
        linear_flops_shown = w.linear_flops_shown
        moe_flops_shown, head_flops_shown = 1.0 / w.experts_slow, 1.0 / w.head_slow
    # Attention: KV sharded over heads (replicated when tp exceeds the KV heads; MLA's latent is replicated);
    # dp_attention: each GPU holds its own requests' whole KV, 1 / tp of the replica's tokens.
    kv_shards = adp if adp > 1 else 1 if m.is_mla else min(tp, m.num_kv_heads)
    kv_b = DTYPE_BYTES[kv_dtype]
    # full layers with their own shape (ModelSpec.full_attention) split their own KV heads
    fs = m.full_attention
    full_shards = kv_shards if fs is None or adp > 1 else min(tp, fs.num_kv_heads)
    kv_bytes_per_token = m.num_softmax_layers * m.kv_elems_per_token() * kv_b / kv_shards
    full_kv_bytes_per_token = m.num_full_layers * m.full_kv_elems_per_token() * kv_b / full_shards
    win_kv_bytes_per_token = m.num_sliding_layers * m.kv_elems_per_token() * kv_b / kv_shards
    if fs is not None:
        kv_bytes_per_token = full_kv_bytes_per_token + win_kv_bytes_per_token
    lin = m.linear
    linear_state_bytes = m.num_linear_layers * lin.state_bytes(kv_b) / tp if lin else 0.0
    linear_attn_flops_per_token = m.num_linear_layers * lin.flops_per_token / tp if lin else 0.0
    # MLA: eager attention expands the latent into per-head keys and values, one block per query head.
    kv_heads_per_gpu = (max(1, m.num_heads // atp) if m.is_mla
                        else max(1, m.num_kv_heads // min(atp, m.num_kv_heads)))
    require_sm_count(hw.name, eff, hw.sm_count)        # (an efficiency override may ask for waves)
    # Sampling (on the gathered logits; the LM head is vocabulary-parallel).
    sampling_bytes_per_logit = m.num_lm_heads * m.lm_head_vocab * LOGIT_BYTES * SAMPLING_PASSES / adp
    # Elementwise (norms, residuals, rotary, activation): memory-bound.
    act_width = (m.num_dense_layers * m.intermediate_size
                 + m.num_moe_layers * (m.experts_per_token + m.num_shared_experts) * m.moe_intermediate_size)
    elementwise_bytes_per_token = activation_bytes * (L * ELEMENTWISE_D_PASSES * m.hidden_size / adp
                                                      + ELEMENTWISE_I_PASSES * act_width / tp)
    # Tensor-parallel all-reduce: two per layer of T * d activations.
    # Past one NVLink domain (gpus_per_node) the ring runs at the inter-node link's rate and latency.
    link_bytes_s, ring_latency_s = ring_link(atp, hw.interconnect)
    # Expert parallelism under dp_attention: each MoE layer's all-to-all dispatch (FP8 with FP8
    # weights, as DeepEP) and combine of each GPU's T / tp tokens (moe_parallel.all_to_all_bytes).
    all_to_all_count = 2 * m.num_moe_layers if adp > 1 and layout.ep > 1 else 0
    all_to_all_bytes_per_token = 0.0
    if all_to_all_count:
        dispatch = FP8_DISPATCH_BYTES if dtype == "fp8" else activation_bytes
        all_to_all_bytes_per_token = m.num_moe_layers * all_to_all_bytes(
            1.0 / adp, m.experts_per_token, m.hidden_size, dispatch + activation_bytes, layout.ep)
    n_kernels = (L * (KERNELS_PER_LAYER + (KERNELS_PER_LAYER_TP if atp > 1 else 0)) + KERNELS_FIXED
                 + all_to_all_count)
    costs = ShardCosts(
        kv_dtype=kv_dtype, activation_bytes=activation_bytes, p=p, peak_flops_s=peak_flops_s, bw_bytes_s=bw_bytes_s,
        bw_gemv_bytes_s=bw_gemv_bytes_s, bw_kv_bytes_s=bw_kv_bytes_s,
        linear_bytes=linear_bytes, linear_flops_per_token=linear_flops_per_token,
        n_moe_layers=m.num_moe_layers, num_experts=m.num_experts, expert_keep=expert_keep, expert_bytes=expert_bytes,
        moe_flops_per_token=moe_flops_per_token, weight_bytes_per_gpu=weight_bytes_per_gpu,
        lm_head_bytes=lm_head_bytes, lm_head_flops_per_logit=lm_head_flops_per_logit,
        _linear_flops_shown=linear_flops_shown, _moe_flops_shown=moe_flops_shown, _head_flops_shown=head_flops_shown,
        kv_bytes_per_token=kv_bytes_per_token, full_kv_bytes_per_token=full_kv_bytes_per_token, window=m.window,
        win_kv_bytes_per_token=win_kv_bytes_per_token, n_linear_layers=m.num_linear_layers,
        linear_state_bytes=linear_state_bytes, linear_attn_flops_per_token=linear_attn_flops_per_token,
        _waves=eff.attention_blocks == "per_sequence_head", kv_heads_per_gpu=kv_heads_per_gpu,
        query_group=1 if m.is_mla else max(1, m.num_heads // m.num_kv_heads), sm_count=hw.sm_count,
        attn_flops_per_pair=m.num_full_layers * m.full_attn_flops_per_pair() / tp,
        win_flops_per_pair=m.num_sliding_layers * m.attn_flops_per_pair() / tp, window_caps_memory=m.window > 0,
        sampling_bytes_per_logit=sampling_bytes_per_logit,
        sampling_host_s_per_logit=(hw.overheads.sampling_row_us or 0.0) * 1e-6,
        elementwise_bytes_per_token=elementwise_bytes_per_token,
        allreduce_count=2 * L if atp > 1 else 0, allreduce_bytes_per_token=m.hidden_size * activation_bytes,
        ring_factor=2.0 * (atp - 1) / atp, link_bytes_s=link_bytes_s, ring_latency_s=ring_latency_s,
        all_to_all_count=all_to_all_count, all_to_all_bytes_per_token=all_to_all_bytes_per_token,
        launch_overhead_s=n_kernels * hw.overheads.kernel_launch_us * 1e-6,
        iteration_overhead_s=hw.overheads.iteration_us * 1e-6,
        verify_overhead_s=(hw.overheads.verify_round_us or 0.0) * 1e-6)
    if m.sparse is None:
        return costs
    return sparse_attention(replicated_indexer(costs, m, bpw, tp, atp, adp), m, kv_shards, adp)


def replicated_indexer(c: ShardCosts, m: ModelSpec, bpw: float, tp: int, atp: int, adp: int) -> ShardCosts:
    """DSA's lightning-indexer weights (counted in the model's attention weights, which TP
    shards) are replicated on every GPU (vLLM's and SGLang's DeepSeek-V3.2 Indexer: wq_b, wk and
    weights_proj are ReplicatedLinear): each GPU reads all of them and multiplies its tokens
    (T / adp) by them. Adds the part the sharded count leaves out."""
    idx = m.num_layers * m.indexer_params
    held = c.weight_bytes_per_gpu
    if adp == 1:        # (dp_attention already replicates every non-expert weight)
        held += idx * bpw * (1.0 - 1.0 / tp)
    return replace(c, linear_bytes=c.linear_bytes + idx * bpw * (1.0 - 1.0 / atp),
                   linear_flops_per_token=c.linear_flops_per_token + 2.0 * idx * (1.0 / adp - 1.0 / tp),
                   weight_bytes_per_gpu=held)


def sparse_attention(c: ShardCosts, m: ModelSpec, kv_shards: int, adp: int) -> ShardCosts:
    """DeepSeek Sparse Attention on the two attention groups of pass_time.pass_time_s, with no
    new constant: the lightning indexer reads every cached token's index key and scores every
    (query, key) pair, as a full layer does (attn_flops_per_pair, full_kv_bytes_per_token); the
    MLA attends to each query's top index_topk keys, as a window of W = index_topk does (pairs
    min(P, T W); cached keys min(sum c, B (W - 1)) + 2 T). Memory holds every token of both
    (window_caps_memory false). The index keys are one per token, kept like MLA's latent (over
    kv_shards: 1, or the attention data-parallel groups); the indexer's heads are not
    split over TP (each GPU scores its own sequences' pairs with all of them)."""
    sp = m.sparse
    L = m.num_full_layers
    index_kv = L * sp.key_bytes / kv_shards
    return replace(c, window=sp.index_topk, win_flops_per_pair=c.attn_flops_per_pair,
                   win_kv_bytes_per_token=c.full_kv_bytes_per_token, attn_flops_per_pair=L * sp.flops_per_pair / adp,
                   full_kv_bytes_per_token=index_kv, kv_bytes_per_token=c.kv_bytes_per_token + index_kv,
                   window_caps_memory=False)
