"""Break-even on capacity: the highest Poisson request rate per GPU that meets the SLO, with and
without speculation, at each point of an axis.

`breakeven(scenario, axis, metric="capacity")`: at each value of `axis` (one of CAPACITY_AXES:
on `batch` the value caps the running batch, engine.max_num_seqs, since the load is the
searched rate itself; on `drafter` each value is a drafter with its acceptance,
drafters.py), plain decoding and every curve are searched for their capacity with the
search of `specsight plan` (capacity_plan.plan: bracket and bisect on the Poisson rate; a rate
passes when TPOT p99 and TTFT p99 meet the scenario's slo: block and the queue is not growing,
saturation.py). The speedup is capacity with speculation / capacity without; break-even, best K
and status follow as for every metric (crossings.py). Capacity per GPU = the rate one replica
sustains / hardware.tp.

`curve_capacities(source, curves, ...)`: the same search at the scenario itself, the line a
qps-axis study prints beside its speedups (QUICK_TOLERANCE: a coarse bracket, to add little run
time to a study whose own points are the load).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simulator.common.errors import SpecsightInputError

from ..plan.statuses import no_rate_meets
from ..plan.study import SLO, TOLERANCE, plan, replica_tp
from ..published.answer_intervals import (
    has_interval,
    scaled_interval,
    scenario_group,
    speedup_interval,
    with_speedup_interval,
)
from ..published.spread import scenario_spread
from ..shared.point_store import PointStore
from .axes import AXES, REQUESTS_PER_USER, axis_overrides
from .crossings import CAPACITY, as_number, verdict
from .curves import BreakevenResult, _freeze, baseline_overrides, curve_point
from .drafters import DRAFTER, DrafterValue, drafter_verdict

CAPACITY_AXES = tuple(a for a in AXES if a != "qps") + (DRAFTER,)
QUICK_TOLERANCE = 0.1       # relative bracket of the capacities a qps-axis study reports (plan's default: 0.05)
PLAIN_CONFIG = ("plain", {"policy": {"kind": "off"}})


def scenario_slo(source: Mapping[str, Any], field: str = "--metric", value: Any = CAPACITY) -> SLO:
    """The scenario's slo: block as an SLO; an error naming `field` when it sets no limit."""
    raw = source.get("slo") or {}
    slo = SLO(raw.get("tpot_ms_p99"), raw.get("ttft_ms_p99"))
    if slo.tpot_ms_p99 is None and slo.ttft_ms_p99 is None:
        raise SpecsightInputError(field, value, "needs an SLO: set slo.tpot_ms_p99 and/or slo.ttft_ms_p99 "
                                                   "in the scenario (or --set slo.tpot_ms_p99=50)")
    return slo


def check_axis(axis: str) -> None:
    if axis not in CAPACITY_AXES:
        raise SpecsightInputError("--axis", axis, "with --metric capacity, one of " + ", ".join(CAPACITY_AXES)
                                  + " (capacity is itself the highest load: the qps axis has nothing to sweep)")


def capacity_overrides(axis: str, value: float | DrafterValue, source: Mapping[str, Any]) -> dict[str, Any]:
    """What a point of `axis` changes when the load is the searched Poisson rate: on `batch`, the
    engine's running-batch cap; on `drafter`, the drafter and acceptance blocks; elsewhere what
    breakeven_axes.axis_overrides sets."""
    if isinstance(value, DrafterValue):
        return value.overrides()
    if axis == "batch":
        eng = source.get("engine") or {}
        b = int(value)
        return {"engine.max_num_seqs": b,
                "engine.max_num_batched_tokens": max(b, int(eng.get("max_num_batched_tokens", 8192)))}
    return axis_overrides(axis, value, source, REQUESTS_PER_USER)


def search(source: Mapping[str, Any], configs: Sequence[tuple[str, Mapping[str, Any]]], slo: SLO, tol: float,
           store_path: Path | None, executor: Any, progress: bool) -> tuple[dict[str, dict[str, Any]], int, int]:
    """capacity_plan.plan's search for each (label, overrides); returns ({label: plan row},
    simulations run, probes in all)."""
    before = len(PointStore(store_path)) if store_path is not None else 0
    rows = plan(source, 1.0, slo, 0.0, [(lab, dict(ov)) for lab, ov in configs], tol=tol, store_path=store_path,
                executor=executor, progress=progress)
    probes = sum(len(r["probes"]) for r in rows)
    ran = len(PointStore(store_path)) - before if store_path is not None else probes
    return {r["config"]: r for r in rows}, ran, probes


def capacity_of(row: Mapping[str, Any], tp: int) -> dict[str, Any]:
    """One searched configuration's capacity per replica and per GPU, and what limits it."""
    q = row["max_qps_per_replica"]
    return {"capacity_qps_per_replica": q, "capacity_qps_per_gpu": q / tp if q else None,
            "bracket_hi_qps": row["bracket_hi_qps"], "limited_by": row["limited_by"],
            "tpot_ms_p99": row["tpot_ms_p99_at_max"], "ttft_ms_p99": row["ttft_ms_p99_at_max"],
            "output_tokens_per_s": row["output_tokens_per_s_at_max"], "probes": len(row["probes"])}


def curve_capacities(source: Mapping[str, Any], curves: Sequence[Any], tol: float, store_path: Path | None,
                     executor: Any, progress: bool) -> dict[str, Any]:
    """At the scenario itself: plain decoding's and each curve's capacity, each curve's capacity
    over plain's (`vs_plain`), and the static K of the highest capacity (`best_k`; 0 when none
    beats plain decoding, None without static curves; the first of a tie); under a real engine each
    curve's `vs_plain_interval` and `capacity_qps_per_gpu_interval` (answer_intervals.py)."""
    slo = scenario_slo(source, "capacity", True)
    found, ran, probes = search(source, [PLAIN_CONFIG, *((c.label, c.overrides) for c in curves)], slo, tol,
                                store_path, executor, progress)
    tp = replica_tp(source)
    per = {lab: capacity_of(r, tp) for lab, r in found.items()}
    base = per["plain"]["capacity_qps_per_replica"]
    engine, method = scenario_group(source)
    spread = scenario_spread(source).pair if has_interval(engine) else None      # at the scenario's own batch and K
    for lab, p in per.items():
        q = p["capacity_qps_per_replica"]
        p["vs_plain"] = q / base if q and base else None
        if has_interval(engine) and lab != "plain":      # the speedup's interval, carried to the capacity
            p["vs_plain_interval"] = speedup_interval(p["vs_plain"], engine, method, spread=spread)
            p["capacity_qps_per_gpu_interval"] = scaled_interval(p["capacity_qps_per_gpu"], engine, method,
                                                                 spread=spread)
    static = [(per[c.label]["vs_plain"] or 0.0, -c.k, c.k) for c in curves if c.k is not None]
    best = max(static, default=None)
    return {"slo": vars(slo), "tolerance": tol, "tp": tp, "capacities": per,
            "best_k": None if best is None else (best[2] if best[0] > 1.0 else 0), "simulated": ran, "probes": probes}


def capacity_rows(source: Mapping[str, Any], axis: str, values: Sequence[float | DrafterValue], curves: Sequence[Any],
                  tol: float, store_path: Path | None, executor: Any,
                  progress: bool) -> tuple[list[dict[str, Any]], int, int]:
    """One row per (point, curve): both capacities, the speedup and what limits each; plus
    (simulations run, probes in all)."""
    slo = scenario_slo(source)
    cells = [(v.label if isinstance(v, DrafterValue) else v, capacity_overrides(axis, v, source)) for v in values]
    configs: dict[str, dict[str, Any]] = {}
    for _, ov in cells:
        for p in [baseline_overrides(ov)] + [curve_point(axis, ov, c) for c in curves]:
            configs.setdefault(_freeze(p), p)
    found, ran, probes = search(source, list(configs.items()), slo, tol, store_path, executor, progress)
    tp = replica_tp(source)
    rows = []
    for v, ov in cells:
        base = capacity_of(found[_freeze(baseline_overrides(ov))], tp)
        for c in curves:
            spec = capacity_of(found[_freeze(curve_point(axis, ov, c))], tp)
            k = c.k if c.k is not None else (int(ov["drafter.num_speculative_tokens"]) if axis == "k" else None)
            qs, qb = spec["capacity_qps_per_gpu"], base["capacity_qps_per_gpu"]
            missing = [no_rate_meets(who, r["limited_by"])
                       for who, r, q in (("speculative", spec, qs), ("plain", base, qb)) if not q]
            rows.append({axis: as_number(v), "curve": c.label, "k": k, "policy": c.policy, "metric": CAPACITY,
                         "speedup": qs / qb if qs and qb else math.nan, "analytic_speedup": math.nan,
                         "spec_capacity_qps_per_gpu": qs, "base_capacity_qps_per_gpu": qb,
                         "spec_capacity_qps_per_replica": spec["capacity_qps_per_replica"],
                         "base_capacity_qps_per_replica": base["capacity_qps_per_replica"],
                         "spec_limited_by": spec["limited_by"], "base_limited_by": base["limited_by"],
                         "spec_tpot_ms_p99": spec["tpot_ms_p99"], "base_tpot_ms_p99": base["tpot_ms_p99"],
                         "spec_ttft_ms_p99": spec["ttft_ms_p99"], "base_ttft_ms_p99": base["ttft_ms_p99"],
                         "spec_output_tokens_per_s": spec["output_tokens_per_s"],
                         "base_output_tokens_per_s": base["output_tokens_per_s"], "error": "; ".join(missing)})
    return rows, ran, probes


def capacity_study(source: Mapping[str, Any], axis: str, values: Sequence[float | DrafterValue], curves: Sequence[Any],
                   tol: float | None, store_path: Path | None, executor: Any, progress: bool) -> Any:
    """The capacity break-even along `axis` (a BreakevenResult with metric 'capacity')."""
    import pandas as pd

    from ..shared.overrides import describe_scenario
    check_axis(axis)
    rows, ran, probes = capacity_rows(source, axis, values, curves, TOLERANCE if tol is None else tol,
                                      store_path, executor, progress)
    meta = describe_scenario(source)
    df = pd.DataFrame(rows)
    df.insert(0, "engine", meta["engine"])       # the engine every capacity of the row was searched under
    methods = {v.label: v.drafter.get("method") for v in values if isinstance(v, DrafterValue)}
    df = with_speedup_interval(df, source, [methods[str(v)] for v in df[axis]] if methods else None)
    shown = [v.label if isinstance(v, DrafterValue) else v for v in values]
    return BreakevenResult(axis, None, shown, [], CAPACITY, df,   # type: ignore[arg-type]
                           drafter_verdict(df) if axis == DRAFTER else verdict(df, axis, None), list(curves),
                           meta, None, ran, probes, source, None)
