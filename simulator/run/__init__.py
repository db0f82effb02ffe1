"""`simulate(scenario)`: run one scenario and return its data (nothing is written or printed).

The run of a mixed fleet (mixed.py) or of a disaggregated one (disaggregated.py), each on
the deployment its scenario resolves to (simulator/scenario/resolve.py); the result (result.py:
`SimResult`); the random streams by role (seeds.py: a run and its K = 0 baseline see identical
arrivals and lengths).
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..common.errors import SpecsightInputError, SpecsightWarning
from ..models.catalog import head_target_mismatch
from ..scenario.scenario import Scenario, as_scenario
from ..scenario.work_limits import check_memory
from ..serving.metrics import speedups
from ..speculation.acceptance_presets import k_extrapolation, shape_mismatch
from .disaggregated import simulate_disagg
from .mixed import simulate_mixed
from .result import SimResult

ITERATION_OUTPUTS = ("memory", "none")    # simulate(iterations=...): the per-iteration log kept, or not


def simulate(scenario: Scenario | str | Path | Mapping[str, Any], *, baseline: bool = False,
             trace: bool = False, iterations: str = "memory") -> SimResult:
    """Run a scenario. baseline=True also runs it with speculation off on the same requests and
    merges `speedup_*` and `baseline_*` keys into the summary. trace=True records
    (time_s, event, request_id) tuples (arrive, admit, first_token, preempt, finish).
    iterations="none" keeps no per-iteration log (`SimResult.iterations` is None): its rows are
    folded into the summary's figures as the run goes (simulator/serving/iteration_totals.py)."""
    if iterations not in ITERATION_OUTPUTS:
        raise SpecsightInputError("iterations", iterations, " or ".join(ITERATION_OUTPUTS))
    sc = as_scenario(scenario)
    check_memory(sc)
    _warn_shape_mismatch(sc)
    result = _simulate_one(sc, trace, iterations)
    if not baseline:
        return result
    base = _simulate_one(sc.baseline(), trace, iterations)
    summary = dict(result.summary)
    summary.update(speedups(result.summary, base.summary))
    return SimResult(sc, result.requests, result.iterations, summary, result.kv, base, result.trace)


def _warn_shape_mismatch(sc: Scenario) -> None:
    """Doubtful inputs, each a warning (results unchanged): a chain drafter given a tree-measured
    acceptance preset (naming a chain preset), a preset measured at a smaller K than the scenario
    runs, a drafter head trained for another target than the scenario's."""
    if sc.drafter is None:
        return
    preset = getattr(sc.acceptance, "preset", None)
    messages = [] if preset is None else [shape_mismatch(preset.name, sc.drafter.method, sc.drafter.branches),
                                          k_extrapolation(preset.name, sc.k_max)]
    if sc.drafter.model and sc.model:
        messages.append(head_target_mismatch(str(sc.drafter.model), str(sc.model)))
    for message in messages:
        if message:
            warnings.warn(message, SpecsightWarning, stacklevel=3)


def _simulate_one(sc: Scenario, trace: bool, iterations: str = "memory") -> SimResult:
    if sc.disaggregation is not None:
        return simulate_disagg(sc, trace, iterations)
    return simulate_mixed(sc, trace, iterations)
