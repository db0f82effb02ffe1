"""Paged KV-cache capacity of one replica, as vLLM sizes it.

    per GPU:  usable = HBM x gpu_memory_utilization
              free   = usable - target weights - drafter weights - activation reserve
              blocks = floor(free / (block_size x (target + drafter) KV bytes per token))

KV is sharded over the tensor-parallel GPUs (KV heads split by tp), so the per-GPU block count
is the replica's block count: the same as HBM x utilisation x tp - weights - ... over the whole
group. Under data-parallel attention (hardware.dp_attention) each GPU keeps only its own requests'
KV: the cost model's KV bytes per GPU per replica token are then 1/tp of a token's KV, and the same
formula counts the replica's tokens (pooled over the GPUs; simulator/moe_parallel.py). The
activation reserve stands in for vLLM's profiling run (the peak memory of one forward pass of
max_num_batched_tokens tokens plus the sampler's logits) and the memory outside PyTorch's allocator
(CUDA context, NCCL buffers, CUDA graphs): `estimate_activation_reserve_bytes`.

By layer type (simulator/layer_types.py): the blocks hold every cached token of the full and the
sliding layers (CostModel.kv_bytes_per_token; a sliding layer's blocks past its window are not
freed here, as vLLM's hybrid KV cache manager frees them, so the capacity is a lower bound for
contexts beyond the window); the linear layers' constant states are reserved up front for
max_num_seqs sequences x (1 + k_max) slots (vLLM keeps num_speculative_tokens extra state slots
per request), inside the reserve (`linear_state_reserve_bytes`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .cost_model import LOGIT_BYTES, CostModel
from .errors import SpecsightInputError

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
    kv_bytes_per_token: float            # target + drafter, per GPU
    block_size: int
    num_blocks: int

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
    reserve = acts + logits + NON_TORCH_RESERVE_BYTES
    if cm.linear_state_bytes:
        reserve = reserve + linear_state_reserve_bytes(cm, max_num_seqs, k_max)
    return reserve


def linear_state_reserve_bytes(cm: CostModel, max_num_seqs: int, k_max: int) -> float:
    """Per GPU: the linear-attention layers' states of max_num_seqs sequences, 1 + k_max slots each."""
    return cm.kv_bytes_held(max_num_seqs, 0, spec_tokens=k_max) if cm.linear_state_bytes else 0.0


def kv_budget(cm: CostModel, drafter_weight_bytes: float, drafter_kv_bytes_per_token: float, *,
              block_size: int, gpu_memory_utilization: float, activation_reserve_bytes: float,
              num_gpu_blocks: int | None = None) -> KVBudget:
    """KV blocks per replica; a clear error when the weights leave no room for any KV cache."""
    hbm = cm.hw.memory_bytes
    usable = hbm * gpu_memory_utilization
    kv_tok = float(cm.kv_bytes_per_token) + float(drafter_kv_bytes_per_token)
    free = usable - cm.weight_bytes_per_gpu - drafter_weight_bytes - activation_reserve_bytes
    if num_gpu_blocks is not None:
        blocks = int(num_gpu_blocks)
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
                    float(activation_reserve_bytes), kv_tok, int(block_size), blocks)


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks a sequence holding `tokens` KV slots occupies (ceil)."""
    return -(-tokens // block_size)
