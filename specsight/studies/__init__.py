"""Studies: questions answered by running the simulator (or the analytic model) many times.
Each returns DataFrames and verdicts (frozen dataclasses), prints nothing and parses no flags;
the `specsight` command line is a thin layer over them. See docs/api.md.

| package / module | entry point                          | returns                      |
| ---------------- | ------------------------------------ | ---------------------------- |
| breakeven/       | study.breakeven(scenario, axis, ...) | BreakevenResult (.frame, .verdict) |
|                  | analytic.analytic_breakeven(model, hw, ...) | AnalyticBreakeven (.frame) |
| plan/            | study.capacity_plan(scenario, target_qps) | CapacityPlan (.rows, .frame) |
|                  | search.plan_search(scenario, qps, grid) | PlanSearch (.rows, .chosen) |
| fleet_day/       | study.fleet_day(scenario)            | FleetDay (.rows, .frame)     |
| deploy/          | study.deployment(scenario), plan_deployment, search_deployment | Deployment, PlanDeployment |
| published/       | study.validate_published(...)        | the validation table         |
| sweep.py         | sweep(scenario, grid)                | SweepResult (.frame)         |

Underneath them all: shared/ (overrides, the resumable point store and its executors, the
saturation rule, plots). A study may import shared/ and the studies listed after it
(breakeven -> plan and published; fleet_day, deploy -> plan), never one before it.
moved.py keeps the old flat module paths importable for one release.
"""
from .. import kernel_source  # noqa: F401  (acceptance model kernel: calibrate's kernel, for the simulator)
from . import moved  # noqa: F401  (the old flat paths, for one release)
