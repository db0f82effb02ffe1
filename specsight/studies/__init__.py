"""Studies: questions answered by running the simulator (or the analytic model) many times.
Each returns DataFrames and verdicts (frozen dataclasses), prints nothing and parses no flags;
the `specsight` command line is a thin layer over them. See docs/api.md.

| module            | entry point                          | returns                      |
| ----------------- | ------------------------------------ | ---------------------------- |
| breakeven.py      | breakeven(scenario, axis, ...)       | BreakevenResult (.frame, .verdict) |
| analytic.py       | analytic_breakeven(model, hw, ...)   | AnalyticBreakeven (.frame)   |
| capacity_plan.py  | capacity_plan(scenario, target_qps)  | CapacityPlan (.rows, .frame) |
| plan_search.py    | plan_search(scenario, qps, grid)     | PlanSearch (.rows, .chosen)  |
| deploy.py         | deployment(scenario), plan_deployment, search_deployment | Deployment, PlanDeployment |
| fleet_day.py      | fleet_day(scenario)                  | FleetDay (.rows, .frame)     |
| sweep.py          | sweep(scenario, grid)                | SweepResult (.frame)         |

Underneath: overrides.py (scenarios as mappings, key-path overrides, grids), points.py (points
run through the resumable store, point_store.py, which concurrent runs share via store_claims.py,
on executors.py's pools and clusters), simulator/output_files.py (outputs written whole), breakeven_axes.py
(what an axis value changes), crossings.py (break-even and the verdict), saturation.py (the
saturated / KV-limited rule), breakeven_capacity.py (capacity within the SLO along an axis;
breakeven_drafters.py: the drafter axis),
*_outputs.py and plots.py (CSV, Markdown, PNG).
"""
