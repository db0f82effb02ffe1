"""Simulated break-even: sweep one axis of a scenario, find where speculation stops paying.

`breakeven(scenario, axis="batch", ks=(1, 2, 3, 4))` simulates each (point, curve) and the point
with speculation off (policy off, same seed, so the same arrivals and lengths: common random
numbers; this is what `simulate(..., baseline=True)` computes, the baseline shared by every
curve of a point). Each curve is one speculation setting: a static K or a policy (goodput,
adaptive, batch_schedule). What an axis value changes in the scenario: axes.py.

The speedup metric is output-token throughput for closed-loop load (fixed users: throughput
ratio = per-user speedup) and TPOT p50 (plain / speculative) for open-loop load, where
throughput just follows the offered rate below capacity; `metric` picks another (crossings.py).
The analytic model (analytic.py) is overlaid on the batch, context and alpha axes, at the
point's batch (batch axis) or at the baseline's simulated mean batch (context and alpha axes).
Every row says whether either run saturated (its queue grows) or ran out of KV (saturation.py);
metric "capacity" searches the SLO-bound rate per GPU instead (capacity.py).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from simulator.common.errors import SpecsightInputError, require_range
from simulator.common.limits import MAX_K
from simulator.speculation.policies import ENGINE_RULES

from ..shared.inputs import int_list
from ..shared.overrides import describe_scenario, scenario_source
from ..shared.points import study_executor
from .axes import (
    AXES,
    DEFAULT_VALUES,
    REQUESTS_PER_USER,
    arrival_block,
    default_values,
    parse_values,
)
from .capacity import QUICK_TOLERANCE, capacity_study, check_axis, curve_capacities
from .crossings import CAPACITY, METRICS
from .curves import POLICIES, BreakevenResult, comma_names, run_study, study_curves
from .drafters import DRAFTER, parse_drafters
from .engines import EngineBreakevenResult, breakeven_by_engine, parse_engines


def breakeven(scenario: Any, axis: str = "batch", values: Sequence[float] | Sequence[str] | str | None = None,
              ks: Sequence[int] | str = (1, 2, 3, 4), policies: Sequence[str] | str = ("static",), *,
              axis2: str | None = None, values2: Sequence[float] | str | None = None, metric: str | None = None,
              requests_per_user: int = REQUESTS_PER_USER, overrides: Iterable[str] = (),
              store: str | Path | None = None, workers: int | None = None, dask: str | None = None,
              executor: Any = None, progress: bool = True, engines: Sequence[str] | str | None = None,
              capacity: bool | None = None, tolerance: float | None = None,
              ) -> BreakevenResult | EngineBreakevenResult:
    """Simulate the sweep of `axis` (one of AXES) at `values` (default: DEFAULT_VALUES, or the
    scenario's rate x 1/4 .. x 4 on the qps axis), one curve per static K in `ks` and per policy;
    with `axis2`, over both axes. Nothing is written but the point store (`store`, a JSON-lines
    file; None keeps the points in memory). `overrides`: `key.path=value` strings applied first.
    `engines` (ideal, vllm, sglang, trtllm): the study once per engine, an EngineBreakevenResult
    (engines.py); one axis only. `metric="capacity"`: the highest Poisson rate per GPU
    within the scenario's SLO at each point, searched to `tolerance` (capacity.py); with
    it, `axis="drafter"` takes drafters as values ("ngram,eagle3@minimax-m3-eagle3":
    drafters.py).
    `capacity` (qps axis, one axis): also search each curve's capacity at the scenario, to
    `tolerance` (default QUICK_TOLERANCE) into `.capacity`; None: when the scenario has an SLO
    and its arrivals are not a trace."""
    overrides = list(overrides)
    source = scenario_source(scenario, overrides)
    res = _study(source, axis, values, ks, policies, axis2, values2, metric, requests_per_user, store, workers, dask,
                 executor, progress, engines, capacity, tolerance)
    names = (getattr(res, "ran", None) or getattr(res, "engines", None)) if hasattr(res, "ran") else None
    return dataclasses.replace(res, meta=describe_scenario(source, overrides, names))


def _wants_capacity(source: Mapping[str, Any], capacity: bool | None) -> bool:
    """Whether a qps-axis study searches the capacities within the SLO: as asked, else when the
    scenario has an SLO and its arrivals are not a trace (plan's Poisson search replaces a
    trace's arrivals, and with them its lengths)."""
    if capacity is not None:
        return capacity
    return bool({k: v for k, v in (source.get("slo") or {}).items() if v is not None}) \
        and arrival_block(source).get("process") != "trace"


def _study(source: Mapping[str, Any], axis: str, values: Any, ks: Sequence[int] | str, policies: Sequence[str] | str,
           axis2: str | None, values2: Any, metric: str | None, requests_per_user: int, store: str | Path | None,
           workers: int | None, dask: str | None, executor: Any, progress: bool,
           engines: Sequence[str] | str | None, capacity: bool | None,
           tolerance: float | None) -> BreakevenResult | EngineBreakevenResult:
    """breakeven() on the scenario as a mapping, its overrides applied."""
    if axis == DRAFTER and metric != CAPACITY:
        raise SpecsightInputError("--axis", axis, "the drafter axis needs --metric capacity (the highest rate per GPU "
                                                  "within the SLO for each drafter)")
    if axis not in AXES and axis != DRAFTER:
        raise SpecsightInputError("--axis", axis, "one of " + ", ".join([*AXES, DRAFTER]))
    if metric is not None and metric not in METRICS and metric != CAPACITY:
        raise SpecsightInputError("--metric", metric, "one of " + ", ".join(sorted([*METRICS, CAPACITY])))
    if metric == CAPACITY:
        check_axis(axis)
        for flag, v in (("--axis2", axis2), ("--engines", engines)):
            if v is not None:
                raise SpecsightInputError(flag, v, "not with --metric capacity (one axis, the scenario's engine)")
    tol = None if tolerance is None else require_range("--tolerance", tolerance, 0.001, 1.0)
    values = parse_drafters("--values", values, source) if axis == DRAFTER else \
        parse_values("--values", values if values is not None else default_values(axis, source), axis)
    ks = int_list("k", ks, lo=1, hi=MAX_K)
    policies = comma_names("--policies", policies, POLICIES)
    vals2: list[float] = []
    if axis2:
        if axis2 not in AXES:
            raise SpecsightInputError("--axis2", axis2, "one of " + ", ".join(AXES))
        if values2 is None and axis2 != "qps":
            vals2 = parse_values("--values2", DEFAULT_VALUES[axis2], axis2)
        else:
            vals2 = parse_values("--values2", values2 if values2 is not None else default_values("qps", source), axis2)
    elif values2 is not None:
        raise SpecsightInputError("--values2", values2, "only with --axis2")
    if requests_per_user < 1:
        raise SpecsightInputError("--requests-per-user", requests_per_user, "must be an integer >= 1")
    store_path = None if store is None else Path(store)
    if engines is not None:
        if axis2:
            raise SpecsightInputError("--axis2", axis2, "not with --engines (every engine along one axis, one plot)")
        names = parse_engines(engines)
        with study_executor(executor, workers, dask, len(names) * len(values) * (len(ks) + len(policies))) as ex:
            return breakeven_by_engine(source, names, axis, values, ks, policies, metric, requests_per_user,
                                       store_path, ex, progress, _wants_capacity(source, capacity),
                                       QUICK_TOLERANCE if tol is None else tol)
    kind = (source.get("engine") or {}).get("kind", "ideal")
    for p in policies:
        if ENGINE_RULES.get(p, kind) != kind:
            raise SpecsightInputError("--policies", p, f"runs under engine.kind {ENGINE_RULES[p]} (this scenario: "
                                                       f"{kind}); --engines {ENGINE_RULES[p]} runs it there")
    n_guess = len(values) * max(1, len(vals2)) * (len(ks) + len(policies))
    with study_executor(executor, workers, dask, n_guess) as ex:
        if metric == CAPACITY:
            curves, _, _ = study_curves(source, axis, ks, policies)
            return capacity_study(source, axis, values, curves, tol, store_path, ex, progress)
        res = run_study(source, axis, values, ks, policies, axis2, vals2, metric, requests_per_user,
                        store_path, ex, progress)
        if _wants_capacity(source, capacity) and axis == "qps" and axis2 is None:
            found = curve_capacities(source, res.curves, QUICK_TOLERANCE if tol is None else tol, store_path, ex,
                                     progress)
            res = dataclasses.replace(res, capacity=found)
        return res

