"""What a scenario resolves to on its hardware (`Deployment`), whether it holds a drafter in
memory, the K its memory reserves for, a replica's KV memory, and its drafter's verify width.

Built by resolve.py (engine.kind ideal) and engine_deployment.py (a real engine).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..costs.kv_cache import KVBudget, estimate_activation_reserve_bytes, kv_budget
from ..speculation.drafters import Drafter
from .scenario import Scenario

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..speculation.drafters import DrafterSpec


@dataclass(frozen=True)
class Deployment:
    """What a scenario resolves to on its hardware: per-iteration costs and KV capacity."""
    step_cost: Any
    drafter: Drafter | None
    kv: KVBudget | None
    capacity_blocks: int
    hardware_profile: str
    context_window_tokens: int = 0   # the target's max_position_embeddings (0: not given, or fixed step costs)


class _SpecOnly:
    """Lets Drafter.verify_tokens_per_seq run without a cost model (hardware.kind fixed)."""

    def __init__(self, spec: DrafterSpec):
        self.spec = spec


def verify_width_fn(scenario: Scenario, drafter: Drafter | None) -> Callable[[int], int]:
    """Verify positions per sequence at K: the drafter's, its spec's without a cost model (fixed
    step costs), 1 without a drafter."""
    if drafter is not None:
        return drafter.verify_tokens_per_seq
    if scenario.drafter is None:
        return lambda k: 1
    shim = _SpecOnly(scenario.drafter)
    return lambda k: Drafter.verify_tokens_per_seq(shim, k)   # type: ignore[arg-type]


def drafter_loaded(scenario: Scenario) -> bool:
    """Whether the deployment holds a drafter in memory: it names one and its policy may speculate.
    A policy that never speculates (Policy.speculates False: `off`, the baseline's) is a plain
    deployment: no drafter weights, drafter KV or K lookahead in its memory budget
    (docs/simulator.md, KV capacity)."""
    return scenario.drafter is not None and bool(scenario.policy.speculates)


def memory_k_max(scenario: Scenario) -> int:
    """The K the memory budget reserves for (sampler logits, lookahead slots): k_max with a drafter
    loaded, else 0."""
    return scenario.k_max if drafter_loaded(scenario) else 0


def replica_kv_budget(scenario: Scenario, cm: Any, drafter: Drafter | None,
                      mean_tokens: float | None = None, hold_drafter: bool = False) -> KVBudget:
    """The replica's KV memory: what the weights (target and, when loaded or `hold_drafter`,
    drafter) and the activation reserve leave of each GPU's HBM (with sliding layers: the pool and
    the slots, kv_cache.kv_budget). `hold_drafter`: a replica that runs the drafter over prompts
    without speculating (a disaggregated prefill pool whose drafter's KV is moved): the drafter's
    weights and KV per token held, K = 0 reserved."""
    eng = scenario.engine
    k = memory_k_max(scenario)
    loaded = drafter if hold_drafter or drafter_loaded(scenario) else None
    if eng.activation_reserve_gb is not None:
        reserve = float(eng.activation_reserve_gb) * 1e9
    else:
        reserve = estimate_activation_reserve_bytes(cm, int(eng.max_num_batched_tokens), int(eng.max_num_seqs), k)
    return kv_budget(cm, loaded.weight_bytes_per_gpu() if loaded else 0.0,
                     loaded.kv_bytes_per_token_per_gpu() if loaded else 0.0,
                     block_size=int(eng.block_size), gpu_memory_utilization=float(eng.gpu_memory_utilization),
                     activation_reserve_bytes=reserve, num_gpu_blocks=eng.num_gpu_blocks,
                     max_num_seqs=int(eng.max_num_seqs), k_max=k,
                     max_num_batched_tokens=int(eng.max_num_batched_tokens), mean_tokens=mean_tokens)
