"""Configuration search: the cheapest configuration, in USD per million output tokens, that serves a
target request rate within the SLO.

A configuration is a point of the grids' product (any scenario keys: hardware.gpu, hardware.tp,
drafter.num_speculative_tokens, pricing.usd_per_gpu_hour, ...) under each speculation setting of
`policies` (capacity_plan.configurations). For each, capacity_plan's search finds the largest
Poisson rate one replica sustains within the SLO. All configurations' probes run together, a round
at a time, on the executor (a process pool or a dask cluster) through the point store, so a rerun
resumes where an interrupted one stopped and configurations that share a probe share its point.
Per configuration: replicas = ceil(target / max rate), GPUs = replicas x tp, $/hour = GPUs x its
price per GPU-hour (price.py: the caller's, the scenario's pricing block, or its
hardware profile's), $/M output tokens = $/hour / (target x mean output tokens x 3600) x 10^6. Then
one more probe per configuration that meets the SLO: one replica at target / replicas, the load
each replica of that fleet serves, for the latency its users see.

Ranking: the configurations that meet the SLO by $/M output tokens (ties: lower TPOT p99 at the
fleet's load, then fewer GPUs); then those that pass at their largest rate but miss the SLO at the
fleet's lower load (a finite run is noisy; more requests per probe settle it); then those that
meet it at no rate; then those that cannot run,
with the reason: `does not fit` (the weights leave no room for a KV cache, or the KV cache cannot
hold the longest request) or `cannot run` (any other refusal). The Pareto front: the
configurations that meet the SLO and that no other beats on both $/M output tokens and TPOT p99
at the fleet's load.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.common.errors import SpecsightInputError
from simulator.engines import engine_label

from ..published.answer_intervals import capacity_intervals, scenario_group
from ..published.spread import scenario_spread
from ..shared.inputs import int_list
from ..shared.jsonable import json_safe
from ..shared.overrides import check_points, describe_scenario, grid_points, override_strings, scenario_source
from ..shared.points import run_points, study_executor
from .price import gpu_hour_price, without_pricing
from .statuses import AT_LOAD, CANNOT_RUN, ERROR_PREFIX, MEETS, NO_FIT, NO_FIT_STATUS, NO_RATE, STATUS_ORDER
from .study import (
    DEFAULT_POLICIES,
    SLO,
    TOLERANCE,
    Search,
    checked_inputs,
    configurations,
    fleet_row,
    policy_names,
    probe_point,
    replica_tp,
    run_searches,
    speculates,
    start_rate,
    verdict,
)


@dataclass(frozen=True)
class Candidate:
    """One configuration: a grid point under one speculation setting."""
    point: dict[str, Any]           # the grid point as given
    setting: str                    # the speculation setting, e.g. "static K=3"
    overrides: dict[str, Any]       # what the probes apply: the point (less pricing) and the setting
    tp: int
    price_per_gpu_hour: float
    price_source: str

    @property
    def label(self) -> str:
        return f"{short_point_label(self.point)}; {self.setting}"


def short_point_label(point: Mapping[str, Any]) -> str:
    """`gpu=h100-sxm tp=2`: each key by its last part (the whole key where two last parts agree)."""
    last = [k.split(".")[-1] for k in point]
    return " ".join(f"{k if last.count(k.split('.')[-1]) > 1 else k.split('.')[-1]}={v}" for k, v in point.items())


def candidates(source: Mapping[str, Any], points: Sequence[Mapping[str, Any]], policies: list[str],
               ks: list[int], price: float | None) -> list[Candidate]:
    """Every configuration of the search, priced (an unpriced profile is refused here, up front)."""
    out = []
    for point in points:
        src = scenario_source(source, override_strings(point))
        hw = src.get("hardware") or {}
        if "hardware.gpu" in point and hw.get("profile"):
            raise SpecsightInputError("--grid hardware.gpu", point["hardware.gpu"],
                                      f"the scenario sets hardware.profile ({hw['profile']}), which replaces gpu: "
                                      "grid hardware.profile instead")
        usd, where = gpu_hour_price(src, price)
        sim_point = {k: v for k, v in point.items() if k.split(".")[0] != "pricing"}
        for setting, ov in configurations(src, policies, ks):
            out.append(Candidate(dict(point), setting, {**sim_point, **ov}, replica_tp(src), usd, where))
    return out


def status_of(s: Search) -> str:
    if s.error:
        return NO_FIT_STATUS if any(m in s.error for m in NO_FIT) else CANNOT_RUN
    return MEETS if s.lo else NO_RATE


def load_probes(source: Mapping[str, Any], rows: list[dict[str, Any]], cands: list[Candidate], target: float,
                slo: SLO, store_path: Path | None, executor: Any, progress: bool) -> None:
    """Add to each row that meets the SLO the latencies of one replica at target / replicas. A row
    whose replica fails the SLO there (a finite run can pass at one rate and fail at a lower one)
    becomes `misses SLO at load`, with the reason: it is not ranked."""
    todo = [(r, c) for r, c in zip(rows, cands) if r["status"] == MEETS]
    pts = []
    for r, c in todo:
        p = probe_point(c.overrides, target / r["replicas"])
        r["qps_per_replica_at_load"] = p["workload.arrival"]["qps"]
        pts.append(p)
    recs = run_points(without_pricing(source), pts, store_path, executor, progress=progress, desc="fleet load")
    for (r, _), rec in zip(todo, recs):
        summ = rec["summary"] or {}
        r["tpot_ms_p99_at_load"], r["ttft_ms_p99_at_load"] = summ.get("tpot_ms_p99"), summ.get("ttft_ms_p99")
        ok, why = verdict(rec["summary"], slo)
        if not ok:
            r["status"] = AT_LOAD
            r["limited_by"] = (f"passes at {r['max_qps_per_replica']:.3g} requests/s per replica but not at "
                               f"{r['qps_per_replica_at_load']:.3g}: {rec['error'] or why}")


def rank(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Meets-SLO rows by cost (then TPOT p99 at load, then GPUs), the rest by status; `rank` 1.. for
    the first group, `pareto` marking the cost-vs-TPOT front."""
    def key(r: dict[str, Any]) -> tuple:
        inf = math.inf
        return (STATUS_ORDER.index(r["status"]), r["cost_per_million_output_tokens_usd"] or inf,
                r.get("tpot_ms_p99_at_load") or inf, r["gpus"] or inf)
    ranked = sorted(rows, key=key)
    best_tpot = math.inf
    for i, r in enumerate(ranked):
        ok = r["status"] == MEETS
        r["rank"] = i + 1 if ok else None
        tpot = r.get("tpot_ms_p99_at_load")
        r["pareto"] = bool(ok and tpot is not None and tpot < best_tpot)   # cheaper rows come first
        if r["pareto"]:
            best_tpot = tpot
    return ranked


@dataclass(frozen=True)
class PlanSearch:
    """A configuration search: `rows` ranked (rank 1 is `chosen`), one per configuration, each with
    its grid point, setting, the overrides its probes apply, status, max rate per replica, fleet,
    costs, latencies and probes; `frame`: the rows without their probes."""
    scenario: str | None
    meta: dict[str, Any]                    # {scenario, deployment, drafter} in words
    target_qps: float
    slo: SLO
    grid: list[str]                         # the grid's keys
    rows: list[dict[str, Any]]
    frame: Any                              # pandas.DataFrame
    source: dict[str, Any]                  # the scenario searched, as a mapping (overrides applied)

    @property
    def chosen(self) -> dict[str, Any] | None:
        """The cheapest configuration that meets the SLO (None when none does)."""
        return self.rows[0] if self.rows and self.rows[0]["rank"] == 1 else None

    def scenario_for(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The scenario (a mapping, as scenario_source gives it) of one row's configuration: its grid
        point and speculation setting applied, e.g. `scenario_for(search.chosen)` to deploy it."""
        return scenario_source(self.source, override_strings({**row["point"], **row["overrides"]}))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: what `specsight plan --grid ... --json` prints, less timing and files."""
        chosen = self.chosen
        return json_safe({"scenario": self.scenario, "target_qps": self.target_qps, "slo": vars(self.slo),
                          "grid": self.grid, "chosen": None if chosen is None else
                          {k: chosen[k] for k in chosen if k != "probes"}, "configurations": self.rows})

    def write(self, out_dir: str | Path, serving: str | None = None) -> dict[str, str]:
        """search.csv, search.md and search_pareto.png under out_dir; returns {csv, markdown, plot}.
        `serving`: the chosen configuration's serving commands as text (`search_deployment(search).text()`),
        closing search.md."""
        from .search_outputs import write_outputs
        return write_outputs(self, Path(out_dir), serving)


def plan_search(scenario: Any, target_qps: float, grid: Sequence[str] | Mapping[str, Sequence[Any]], *,
                slo_tpot_ms_p99: float | None = None, slo_ttft_ms_p99: float | None = None,
                price_per_gpu_hour: float | None = None, policies: Sequence[str] | str = DEFAULT_POLICIES,
                ks: Sequence[int] | str = (), tolerance: float = TOLERANCE, overrides: Iterable[str] = (),
                store: str | Path | None = None, workers: int | None = None, dask: str | None = None,
                executor: Any = None, progress: bool = True) -> PlanSearch:
    """Find the cheapest configuration of the grid's product (`key=v1,v2` strings or {key: [values]})
    that serves `target_qps` within the SLO. Arguments as capacity_plan's; `price_per_gpu_hour`
    (None: each configuration's scenario pricing, else its hardware profile's price) prices every
    configuration alike when given. Bad input (a misspelt grid key, a value the schema refuses, an
    unpriced profile) fails before any probe runs."""
    import pandas as pd

    from simulator.common.limits import MAX_K

    overrides = list(overrides)
    source, target, slo, tol = checked_inputs(scenario, target_qps, slo_tpot_ms_p99, slo_ttft_ms_p99, tolerance,
                                              overrides)
    points = grid_points(grid)
    check_points(source, points)
    cands = candidates(source, points, policy_names(policies), int_list("--k", ks, lo=1, hi=MAX_K) if ks else [],
                       price_per_gpu_hour)
    searches = [Search(c.label, dict(c.overrides), start_rate(source), tol, slo) for c in cands]
    store_path = None if store is None else Path(store)
    with study_executor(executor, workers, dask, len(cands)) as ex:
        run_searches(source, searches, store_path=store_path, executor=ex, progress=progress,
                     expected=(SpecsightInputError,))        # a refusal is listed in the ranking, with its reason
        rows = []
        for s, c in zip(searches, cands):
            row = fleet_row(s, target, c.tp, c.price_per_gpu_hour)
            row.update(point=c.point, setting=c.setting, overrides=c.overrides, status=status_of(s),
                       limited_by=row["limited_by"].removeprefix(ERROR_PREFIX),
                       price_per_gpu_hour=c.price_per_gpu_hour, price_source=c.price_source,
                       qps_per_replica_at_load=None, tpot_ms_p99_at_load=None, ttft_ms_p99_at_load=None)
            point_source = scenario_source(source, override_strings(c.point))
            ivs = capacity_intervals(row, target, *scenario_group(point_source), speculates(c.overrides),
                                     scenario_spread(point_source).pair if speculates(c.overrides) else None)
            row.update({k: ivs[k] for k in ("max_qps_per_replica_interval", "replicas_interval") if k in ivs})
            rows.append(row)
        load_probes(source, rows, cands, target, slo, store_path, ex, progress)
    ranked = rank(rows)
    own = source.get("engine") or {}
    for r in ranked:        # the engine each configuration was searched under (a grid may set engine.kind)
        kind = r["point"].get("engine.kind", own.get("kind"))
        r["engine"] = engine_label(kind, r["point"].get("engine.version",
                                                        own.get("version") if kind == own.get("kind") else None))
    flat = pd.DataFrame([{"engine": r["engine"],
                          **{k: v for k, v in r.items() if k not in ("probes", "point", "overrides", "engine")},
                          **r["point"]} for r in ranked])
    return PlanSearch(source.get("name"), describe_scenario(source, overrides), target, slo, list(points[0]), ranked,
                      flat, source)
