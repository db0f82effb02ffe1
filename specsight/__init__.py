"""specsight: predict whether speculative decoding speeds up an LLM deployment, and by how much.

The Python API (docs/api.md), imported on first use so `import specsight` stays fast:

    import specsight
    r = specsight.simulate("scenarios/llama8b-h100-eagle3-chat.yaml", baseline=True)   # SimResult
    be = specsight.breakeven("scenarios/....yaml", axis="batch", ks=[1, 2, 3])        # .frame, .verdict
    an = specsight.analytic_breakeven("llama-3.1-8b", "h100-sxm", "eagle3", alpha=0.7)
    plan = specsight.capacity_plan("scenarios/....yaml", target_qps=20)               # .rows, .frame
    sw = specsight.sweep("scenarios/....yaml", {"acceptance.alpha": [0.5, 0.7]})      # .frame
    s = specsight.plan_search("scenarios/....yaml", 40, {"hardware.tp": [4, 8]})      # .rows, .chosen
    day = specsight.fleet_day("scenarios/llama70b-tp4-h100-fleet-day.yaml")         # .rows: fewest replicas
    dep = specsight.deployment("scenarios/....yaml")                                  # ["vllm"].argv
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "simulate": "specsight.studies.simulate",
    "SimResult": "simulator.run.result",
    "load_scenario": "simulator.scenario.scenario",
    "breakeven": "specsight.studies.breakeven.study",
    "BreakevenResult": "specsight.studies.breakeven.study",
    "BreakevenVerdict": "specsight.studies.breakeven.crossings",
    "analytic_breakeven": "specsight.studies.breakeven.analytic",
    "AnalyticBreakeven": "specsight.studies.breakeven.analytic",
    "capacity_plan": "specsight.studies.plan.study",
    "CapacityPlan": "specsight.studies.plan.study",
    "SLO": "specsight.studies.plan.study",
    "fleet_day": "specsight.studies.fleet_day.study",
    "FleetDay": "specsight.studies.fleet_day.study",
    "plan_search": "specsight.studies.plan.search",
    "PlanSearch": "specsight.studies.plan.search",
    "deployment": "specsight.studies.deploy.study",
    "Deployment": "specsight.studies.deploy.study",
    "plan_deployment": "specsight.studies.deploy.study",
    "search_deployment": "specsight.studies.deploy.study",
    "sweep": "specsight.studies.sweep",
    "SweepResult": "specsight.studies.sweep",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'specsight' has no attribute {name!r}")
    from . import kernel_source  # noqa: F401  (acceptance model kernel: calibrate's kernel, for the simulator)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
