"""`resolve_deployment(scenario)`: the cost model, drafter and KV capacity of one replica (roofline),
the fixed step costs (hardware.kind fixed), or a real engine's deployment (engine_deployment.py)."""
from __future__ import annotations

from typing import Any

from ..common.errors import SpecsightInputError
from ..costs.cost_model import CostModel
from ..hardware.hardware import load_profile
from ..models.catalog import load_model
from ..serving.step_cost import FixedStepCost, RooflineStepCost
from ..speculation.drafters import Drafter
from .deployment import Deployment, drafter_loaded, replica_kv_budget
from .engine_deployment import real_engine_deployment
from .scenario import Scenario


def resolve_deployment(scenario: Scenario, max_request_tokens: int = 0,
                       mean_tokens: float | None = None, hold_drafter: bool = False) -> Deployment:
    """Cost model, drafter and KV capacity of one replica (roofline), or the fixed step costs;
    mean_tokens: the KV slots a request keeps at its end, on average (sizes a sliding-window
    model's slots: kv_cache.sliding_slots; None: a slot's length); hold_drafter: the drafter held
    in memory under a policy that never speculates (deployment.replica_kv_budget)."""
    hw, eng = scenario.hardware, scenario.engine
    if eng.kind != "ideal":
        return real_engine_deployment(scenario, mean_tokens, hold_drafter=hold_drafter)
    if hw.is_fixed:
        cost = FixedStepCost(hw.target_step_s, hw.draft_step_s)   # type: ignore[arg-type]
        cap = eng.num_gpu_blocks
        desc = f"fixed step costs (target_step_s={hw.target_step_s}, draft_step_s={hw.draft_step_s})"
        return Deployment(cost, None, None, int(cap) if cap is not None else 0, desc)

    profile = load_profile(hw.profile or hw.gpu)   # type: ignore[arg-type]
    model = load_model(scenario.model)             # type: ignore[arg-type]
    cm = CostModel(model, profile, tp=int(hw.tp), dtype=hw.dtype, kv_dtype=hw.kv_dtype, ep=int(hw.ep),
                   dp_attention=bool(hw.dp_attention))
    drafter = Drafter(scenario.drafter, model, cm) if scenario.drafter is not None else None
    if drafter is not None and (hold_drafter or drafter_loaded(scenario)) and (hw.ep > 1 or hw.dp_attention):
        _drafter_layout(drafter, cm)
    kv = replica_kv_budget(scenario, cm, drafter, mean_tokens, hold_drafter)
    return Deployment(RooflineStepCost(cm, drafter), drafter, kv, kv.num_blocks, profile.describe(),
                      model.max_position_embeddings)


def _drafter_layout(drafter: Drafter, cm: Any) -> None:
    """A drafter with its own weights runs in the target's layout (SGLang builds the draft worker
    in the target's attention-TP group, docs/reference/engines.md): its routed experts over the same ep
    groups (a dense drafter: ep 1), its attention data-parallel with the target's."""
    dc, layout = drafter.draft_cost, cm.layout
    if dc is None:
        return
    if dc.tp != cm.tp:
        raise SpecsightInputError("drafter.draft_tp", dc.tp, f"the target's tp ({cm.tp}) with hardware.ep or "
                                                             "hardware.dp_attention")
    drafter.draft_cost = CostModel(dc.model, dc.hw, tp=dc.tp, dtype=dc.dtype, kv_dtype=dc.kv_dtype,
                                   ep=layout.ep if dc.model.is_moe else 1, dp_attention=layout.dp_attention)
