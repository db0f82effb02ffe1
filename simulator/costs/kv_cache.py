"""Paged KV-cache capacity of one replica, as vLLM sizes it.

    per GPU:  usable = HBM x gpu_memory_utilization
              free   = usable - target weights - drafter weights - activation reserve
              blocks = floor(free / (block_size x (target + drafter) KV bytes per token))

The drafter is the one the deployment loads: none for a run that never speculates (policy off,
the baseline), which also reserves for K = 0 (simulator/scenario/deployment.py, drafter_loaded and memory_k_max).

KV is sharded over the tensor-parallel GPUs (KV heads split by tp), so the per-GPU block count
is the replica's block count: the same as HBM x utilisation x tp - weights - ... over the whole
group. Under data-parallel attention (hardware.dp_attention) each GPU keeps only its own requests'
KV: the cost model's KV bytes per GPU per replica token are then 1/tp of a token's KV, and the same
formula counts the replica's tokens (pooled over the GPUs; simulator/models/moe_parallel.py). The
activation reserve stands in for vLLM's profiling run (the peak memory of one forward pass of
max_num_batched_tokens tokens plus the sampler's logits) and the memory outside PyTorch's allocator
(CUDA context, NCCL buffers, CUDA graphs): `estimate_activation_reserve_bytes`.

By layer type (simulator/models/layer_types.py): the blocks hold the full layers' KV of every cached
token (`pool_kv_bytes_per_token`); the sliding layers' KV is held apart, per sequence slot and
capped at the window (`SlidingSlots`); the linear layers' constant states are reserved up front for
max_num_seqs sequences x (1 + k_max) slots (vLLM keeps num_speculative_tokens extra state slots
per request), inside the reserve (`linear_state_reserve_bytes`).

The sliding layers, against vLLM's hybrid KV cache manager (vllm-project/vllm
vllm/v1/core/single_type_kv_cache_manager.py@129ab7c60cbb8eb11e875373e67f7e521b74aa30,
SlidingWindowManager; vllm/v1/core/kv_cache_utils.py@001cabc1be16a59a70d720ed61a13b678c060a18,
_get_kv_cache_groups_uniform_page_size and get_kv_cache_config_from_groups). vLLM puts the full and
the sliding layers in groups of equally many layers over ONE block pool (num_blocks = memory //
page_size // layers per group); each group has its own block table per request, and the sliding
groups' `remove_skipped_blocks` frees the blocks whose tokens fall out of the window
(get_num_skipped_tokens = computed tokens - W + 1), so a running request holds at most
cdiv(W - 1 + new tokens, block_size) + 1 blocks per sliding group
(vllm/v1/kv_cache_interface.py@001cabc1be16a59a70d720ed61a13b678c060a18,
SlidingWindowSpec.max_memory_usage_bytes: "+1 here because the sliding window may not start from
the beginning of the block"). Here, so that the hot path keeps counting ceil(tokens / block_size)
blocks per sequence:
- a slot holds one decoding sequence's sliding KV: `sliding_slot_tokens` = block_size x
  (cdiv(W - 1 + 1 + k_max, block_size) + 1) tokens, vLLM's bound with 1 + k_max new tokens a step;
  a prefill chunk's extra tokens (at most max_num_batched_tokens in a step) are reserved once more;
- the slots are `SlidingSlots.slots` = min(max_num_seqs, the sequences the free memory holds when
  each holds its slot plus `mean_tokens` tokens in the pool), so the pool and the slots run out
  together at the workload's mean request length (the run passes the drawn requests' mean prompt +
  output + k_max; without one, a sequence of a slot's length); the replica then runs at most that
  many sequences at once (its max_num_seqs).
What that leaves out: vLLM shares the one pool, so sequences shorter than the window take less
than a slot and more of them fit (the slots cap them here: a lower bound on the concurrency of
short requests), and the split between slots and pool follows the running requests rather than the
workload's mean (longer-than-mean requests run out of pool blocks here where vLLM would use the
slack of shorter ones); vLLM also rounds layers into equal groups (padding layers, a few per cent at
most) which is not counted. A drafter's own KV (CostModel.kv_bytes_per_token of its layers) stays in
the pool per token, its sliding layers included. Models without sliding layers: no slots, the pool
as before, bit for bit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..common.errors import SpecsightInputError
from .cost_model import LOGIT_BYTES, CostModel

# Memory outside PyTorch's allocator that vLLM's profiler also subtracts: CUDA context, NCCL
# buffers, CUDA-graph pools. An estimate: vLLM start-up logs on Hopper GPUs commonly report
# 0.3-1.5 GiB for "non-torch memory" plus "CUDA graph" memory together; 1 GB is a middle value.
NON_TORCH_RESERVE_BYTES = 1.0e9
# Live activation tensors per token at the forward pass's peak, in units of hidden size
# (residual, normed input, attention output, MLP output), plus the MLP's gate/up/act intermediates.
ACT_D_TENSORS = 4
ACT_I_TENSORS = 3
LOGIT_TENSORS = 2            # logits and probabilities, float32


@dataclass(frozen=True)
class KVBudget:
    """Where one GPU's memory goes (bytes per GPU) and the resulting KV capacity of the replica."""
    hbm_bytes: float
    usable_bytes: float
    target_weight_bytes: float
    drafter_weight_bytes: float
    activation_reserve_bytes: float
    kv_bytes_per_token: float            # what the pool holds per token: target + drafter, per GPU
    block_size: int
    num_blocks: int
    sliding_slots: int = 0               # sequences whose sliding-layer KV is held apart (SlidingSlots)
    sliding_reserve_bytes: float = 0.0   # per GPU, beside the pool

    @property
    def capacity_tokens(self) -> int:
        return self.num_blocks * self.block_size

    def to_dict(self) -> dict:
        d = dict(vars(self))
        d["capacity_tokens"] = self.capacity_tokens
        return d


def estimate_activation_reserve_bytes(cm: CostModel, max_num_batched_tokens: int, max_num_seqs: int,
                                      k_max: int) -> float:
    """Per GPU: peak activations of one pass over max_num_batched_tokens tokens, the sampler's
    float32 logits for every verify position of a full batch, NON_TORCH_RESERVE_BYTES, and the
    linear-attention states of a full batch (linear_state_reserve_bytes; none without linear layers)."""
    m, tp = cm.model, cm.tp
    if m.is_moe:
        inter = (m.experts_per_token + m.num_shared_experts) * m.moe_intermediate_size
    else:
        inter = m.intermediate_size
    per_token = ACT_D_TENSORS * m.hidden_size + ACT_I_TENSORS * inter / tp
    acts = max_num_batched_tokens * per_token * cm.activation_bytes
    logits = max_num_seqs * (k_max + 1) * m.vocab_size * LOGIT_BYTES * LOGIT_TENSORS / tp
    return acts + logits + NON_TORCH_RESERVE_BYTES + linear_state_reserve_bytes(cm, max_num_seqs, k_max)


def linear_state_reserve_bytes(cm: CostModel, max_num_seqs: int, k_max: int) -> float:
    """Per GPU: the linear-attention layers' states of max_num_seqs sequences, 1 + k_max slots each."""
    return cm.kv_bytes_held(max_num_seqs, 0, spec_tokens=k_max) if cm.linear_state_bytes else 0.0


def pool_kv_bytes_per_token(cm: CostModel) -> float:
    """Per GPU, the target's KV bytes per cached token the block pool holds: every softmax layer
    without sliding layers, else the full layers only (the sliding ones: SlidingSlots)."""
    return float(cm.full_kv_bytes_per_token if cm.window else cm.kv_bytes_per_token)


def sliding_slot_tokens(window: int, block_size: int, k_max: int) -> int:
    """Tokens of sliding-layer KV one decoding sequence holds at most: block_size x
    (cdiv(W - 1 + 1 + k_max, block_size) + 1), vLLM's SlidingWindowSpec bound with 1 + k_max new
    tokens a step (module docstring)."""
    return block_size * (-(-(window + k_max) // block_size) + 1)


@dataclass(frozen=True)
class SlidingSlots:
    """The sliding layers' KV held apart from the block pool (module docstring): `slots` sequences
    of `slot_tokens` each, plus one step's prefill tokens; bytes per GPU."""
    slots: int
    slot_tokens: int
    reserve_bytes: float


def sliding_slots(win_bytes_per_token: float, pool_bytes_per_token: float, free_bytes: float, *,
                  window: int, block_size: int, k_max: int, max_num_seqs: int, max_num_batched_tokens: int,
                  mean_tokens: float | None = None) -> SlidingSlots:
    """slots = min(max_num_seqs, floor((free - win x max_num_batched_tokens) / (win x slot_tokens
    + pool x mean_tokens))); reserve = win x (slots x slot_tokens + max_num_batched_tokens);
    mean_tokens: the tokens a sequence keeps in the pool (None: slot_tokens)."""
    slot = sliding_slot_tokens(window, block_size, k_max)
    per_seq = win_bytes_per_token * slot + pool_bytes_per_token * (slot if mean_tokens is None else mean_tokens)
    room = free_bytes - win_bytes_per_token * max_num_batched_tokens
    n = min(int(max_num_seqs), int(math.floor(room / per_seq))) if room > 0 else 0
    return SlidingSlots(n, slot, win_bytes_per_token * (n * slot + max_num_batched_tokens) if n > 0 else 0.0)


def kv_budget(cm: CostModel, drafter_weight_bytes: float, drafter_kv_bytes_per_token: float, *,
              block_size: int, gpu_memory_utilization: float, activation_reserve_bytes: float,
              num_gpu_blocks: int | None = None, max_num_seqs: int = 1, k_max: int = 0,
              max_num_batched_tokens: int = 0, mean_tokens: float | None = None) -> KVBudget:
    """KV blocks per replica, and with sliding layers their slots (`sliding_slots`: max_num_seqs,
    k_max, max_num_batched_tokens and mean_tokens size them; num_gpu_blocks fixes the pool and
    leaves max_num_seqs slots); a clear error when the weights leave no room for any KV cache."""
    hbm = cm.hw.memory_bytes
    usable = hbm * gpu_memory_utilization
    kv_tok = pool_kv_bytes_per_token(cm) + float(drafter_kv_bytes_per_token)
    free = usable - cm.weight_bytes_per_gpu - drafter_weight_bytes - activation_reserve_bytes
    slots = SlidingSlots(0, 0, 0.0)
    if cm.window:
        slots = sliding_slots(float(cm.win_kv_bytes_per_token), kv_tok, free, window=int(cm.window),
                              block_size=block_size, k_max=k_max, max_num_seqs=max_num_seqs,
                              max_num_batched_tokens=max_num_batched_tokens, mean_tokens=mean_tokens)
        if num_gpu_blocks is not None:
            slots = SlidingSlots(int(max_num_seqs), slots.slot_tokens, 0.0)
        free = free - slots.reserve_bytes if slots.slots > 0 else 0.0
    if num_gpu_blocks is not None:
        blocks = int(num_gpu_blocks)
    elif cm.window and kv_tok == 0.0 and free > 0:   # every layer slides: the pool holds nothing, never binds
        ctx = int(cm.model.max_position_embeddings)
        if ctx <= 0:
            raise SpecsightInputError("model: max_position_embeddings", ctx,
                                      "a context window in tokens: every layer of the model slides, so the KV "
                                      "blocks are counted for its slots' sequences at that length")
        blocks = slots.slots * blocks_for(ctx + k_max, block_size)
    else:
        blocks = int(math.floor(free / (block_size * kv_tok))) if free > 0 else 0
        if blocks <= 0:
            gb = 1e-9
            raise SpecsightInputError(
                "hardware.tp", cm.tp,
                f"no room for a KV cache on {cm.hw.name}: per GPU {usable * gb:.1f} GB usable, "
                f"target weights {cm.weight_bytes_per_gpu * gb:.1f} GB, "
                f"drafter weights {drafter_weight_bytes * gb:.1f} GB, "
                f"activation reserve {activation_reserve_bytes * gb:.1f} GB; raise tp, gpu_memory_utilization "
                f"or pick a larger GPU")
    return KVBudget(hbm, usable, float(cm.weight_bytes_per_gpu), float(drafter_weight_bytes),
                    float(activation_reserve_bytes), kv_tok, int(block_size), blocks,
                    slots.slots, slots.reserve_bytes)


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks a sequence holding `tokens` KV slots occupies (ceil)."""
    return -(-tokens // block_size)
