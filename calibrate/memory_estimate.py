"""Memory a calibration or ground-truth run will allocate, estimated before torch builds anything,
and refused when the device has less free: one line with the estimate, what the device has and the
flag to lower, instead of torch's allocator error after up to a minute of work.

    weights      params of the (scaled) layers run + embedding + LM head, x dtype bytes
    KV cache     2 x layers x batch x KV heads x slots x head_dim x dtype bytes (target and draft;
                 slots: prompt + rounds x (K + 1) + margin, as calibrate/groundtruth.py allocates)
    activations  the verify pass's logits, batch x (K + 1) x vocab x 4 bytes, and the prefill's
                 MLP activations, batch x prompt x intermediate x dtype bytes, ACTIVATION_COPIES each
Free memory: MemAvailable on a CPU, torch.cuda.mem_get_info on cuda. The estimate is a lower
bound of what torch takes (its caching allocator rounds up); a run is refused past FREE_SHARE of
the free memory.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from simulator.common.errors import SpecsightInputError
from simulator.hardware.hardware import DTYPE_BYTES
from simulator.scenario.work_limits import free_memory_bytes

if TYPE_CHECKING:
    from simulator.models.model_spec import ModelSpec

ACTIVATION_COPIES = 4          # live copies of the largest activation (input, output, two temporaries)
FREE_SHARE = 0.9               # refuse past this share of the free memory
SLOT_MARGIN = 64 + 128         # cache slots rounded up (layers.py) plus PassRunner.KEY_BUCKET


def weight_bytes(spec: ModelSpec, layers: int, dtype: str) -> float:
    """Weights of `layers` of `spec`'s layers, embedding and LM head."""
    experts = spec.num_moe_layers * spec.num_experts * spec.expert_params
    per_layer = (spec.layer_params_dense_part + experts + spec.extra_linear_params) / max(1, spec.num_layers)
    head = 0 if spec.tie_word_embeddings else spec.lm_head_params
    return (per_layer * min(layers, max(1, spec.num_layers)) + spec.embedding_params + head) * DTYPE_BYTES[dtype]


def kv_bytes(spec: ModelSpec, layers: int, batch: int, slots: int, dtype: str) -> float:
    return 2.0 * layers * batch * spec.num_kv_heads * slots * spec.head_dim * DTYPE_BYTES[dtype]


def groundtruth_bytes(target: ModelSpec, draft: ModelSpec | None, layers: int, draft_layers: int, dtype: str,
                      batches: Iterable[int], ks: Iterable[int], prompt_len: int,
                      rounds_for: Callable[[int], int]) -> tuple[float, str]:
    """(bytes, the largest (batch, K)) of a ground-truth run: weights plus the largest config's
    caches and activations (configs run one after another). `rounds_for(batch)`: rounds run."""
    weights = weight_bytes(target, layers, dtype) + (weight_bytes(draft, draft_layers, dtype) if draft else 0.0)
    worst, which = 0.0, ""
    for b in batches:
        for k in ks:
            slots = prompt_len + rounds_for(b) * (k + 1) + k + 2 + SLOT_MARGIN
            need = kv_bytes(target, layers, b, slots, dtype)
            if draft is not None and k > 0:
                need += kv_bytes(draft, draft_layers, b, slots, dtype)
            need += ACTIVATION_COPIES * max(b * (k + 1) * target.vocab_size * 4.0,
                                            b * prompt_len * target.intermediate_size * DTYPE_BYTES[dtype])
            if need > worst:
                worst, which = need, f"--batch {b} --k {k}"
    return weights + worst, which


def free_device_bytes(device: str) -> float | None:
    """Free memory of `device` ("cpu": MemAvailable; "cuda": torch's figure)."""
    if device == "cuda":
        import torch
        return float(torch.cuda.mem_get_info()[0])
    free = free_memory_bytes()
    return None if free is None else float(free)


def check_fits(need_bytes: float, device: str, what: str, field: str, value: object, lower: str) -> None:
    """Refuse a run whose estimate exceeds FREE_SHARE of the device's free memory."""
    free = free_device_bytes(device)
    if free is not None and need_bytes > FREE_SHARE * free:
        raise SpecsightInputError(field, value, f"{what} needs about {need_bytes / 1e9:.3g} GB; this {device} has "
                                  f"{free / 1e9:.3g} GB free: {lower}")
