"""`specsight.simulate`: `simulator.run.simulate`, its result carrying the 80 % intervals of its
speedups and TPOTs under a real engine (`SimResult.intervals`: `<metric>_interval` -> [low,
high], the keys and values `simulate --json` adds; published/intervals.summary_intervals).
Under ideal, or without a baseline, `intervals` is empty: ideal is the physics bound."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulator.run.result import SimResult
    from simulator.scenario.scenario import Scenario


def simulate(scenario: Scenario | str | Path | Mapping[str, Any], *, baseline: bool = False, trace: bool = False,
             iterations: str = "memory") -> SimResult:
    """simulator.run.simulate (the same arguments), with `intervals` filled."""
    from simulator.run import simulate as run
    return with_intervals(run(scenario, baseline=baseline, trace=trace, iterations=iterations))


def with_intervals(result: SimResult) -> SimResult:
    """The result with `intervals`: its summary's under its engine and drafter family."""
    from .published.intervals import summary_intervals
    sc = result.scenario
    if sc.engine.kind == "ideal":
        return result
    from .published.spread import scenario_spread
    batch = result.summary.get("mean_batch") if isinstance(result.summary.get("mean_batch"), (int, float)) else None
    ivs = summary_intervals(result.summary, sc.engine.kind, sc.drafter.method if sc.drafter is not None else None,
                            spread=scenario_spread(sc, "speedup", batch).pair,
                            tpot_spread=scenario_spread(sc, "tpot", batch).pair)
    return dataclasses.replace(result, intervals=ivs)
