"""Fleet day: the fewest replicas that serve a day of traffic within the SLO, for each speculation
setting (off, static K, and dynamic-K policies).

The scenario's workload must be a `schedule` arrival process (simulator/workload/rate_schedule.py): a rate
that varies over the day. Each probe simulates the whole day (compressed by the schedule's
time_compression) over a fleet of `hardware.replicas` replicas behind the scenario's router. A
replica count *passes* when, in every window of the schedule (each of its rows: an hour of the
day), the p99 TPOT and the p99 TTFT of the requests arriving in that window are within the SLO:
the peak hour cannot hide in a day-wide percentile. A backlog carried out of the peak shows up in
the windows after it.

Search, per setting, on the assumption that more replicas never make a window worse: start at the
scenario's hardware.replicas; double until a count passes (or `max_replicas` fails), halve until
one fails (or 1 passes), then bisect the integers between the largest failing and the smallest
passing count. Every probe is a point of the point store (points.py), so a rerun resumes.
GPUs = replicas x tp; GPU-hours per day = GPUs x the schedule's period on the real clock.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.common.errors import SpecsightInputError, require_int

from ..plan.study import DEFAULT_POLICIES, SLO, configurations, policy_names, resolve_slo
from ..shared.inputs import int_list
from ..shared.jsonable import json_safe
from ..shared.overrides import describe_scenario, scenario_source
from ..shared.points import run_points, study_executor

if TYPE_CHECKING:

    pass

DEFAULT_MAX_REPLICAS = 256
MAX_PROBES = 24               # per setting: enough to bracket and bisect up to MAX_REPLICAS


# ---- one probe's verdict ------------------------------------------------------------------------
def day_verdict(summary: Mapping[str, Any] | None, slo: SLO) -> tuple[bool, str]:
    """(passes, reason): every window's p99 TPOT and TTFT within the SLO."""
    if not summary:
        return False, "simulation failed"
    tpot, ttft = summary.get("window_tpot_ms_p99_max"), summary.get("window_ttft_ms_p99_max")
    if tpot is None or ttft is None:
        return False, "no window statistics (the workload is not a schedule)"
    if slo.tpot_ms_p99 is not None and not float(tpot) <= slo.tpot_ms_p99:
        return False, f"worst window TPOT p99 {float(tpot):.1f} ms > {slo.tpot_ms_p99:g}"
    if slo.ttft_ms_p99 is not None and not float(ttft) <= slo.ttft_ms_p99:
        return False, f"worst window TTFT p99 {float(ttft):.0f} ms > {slo.ttft_ms_p99:g}"
    return True, "ok"


# ---- the search ---------------------------------------------------------------------------------
@dataclass
class ReplicaSearch:
    """Double, halve, then bisect the integers for the fewest passing replicas of one setting."""
    label: str
    overrides: dict[str, Any]
    r: int
    max_replicas: int
    lo: int | None = None              # largest failing count
    hi: int | None = None              # smallest passing count
    results: dict[int, tuple[bool, str, dict | None]] = field(default_factory=dict)
    done: bool = False

    def feed(self, r: int, ok: bool, why: str, summary: dict | None) -> None:
        self.results[r] = (ok, why, summary)
        if ok and (self.hi is None or r < self.hi):
            self.hi = r
        if not ok and (self.lo is None or r > self.lo):
            self.lo = r
        if self.hi is None:                                   # nothing passes yet: double
            self.done = r >= self.max_replicas
            self.r = min(2 * r, self.max_replicas)
        elif self.lo is None:                                 # everything passes so far: halve
            self.done = r <= 1
            self.r = max(1, r // 2)
        else:
            self.done = self.hi - self.lo <= 1
            self.r = (self.lo + self.hi) // 2
        if len(self.results) >= MAX_PROBES or self.r in self.results:
            self.done = True


def search_replicas(source: Mapping[str, Any], slo: SLO, configs: list[tuple[str, dict]], *, start: int,
                    max_replicas: int, store_path: str | Path | None = None, executor: Any = None,
                    progress: bool = True) -> list[ReplicaSearch]:
    """Run every setting's search, one round of probes (one per unfinished setting) at a time."""
    searches = [ReplicaSearch(label, dict(ov), min(start, max_replicas), max_replicas) for label, ov in configs]
    rnd = 0
    while any(not s.done for s in searches):
        rnd += 1
        active = [s for s in searches if not s.done]
        pts = [{**s.overrides, "hardware.replicas": s.r} for s in active]
        recs = run_points(source, pts, store_path, executor, progress=progress, desc=f"fleet day round {rnd}")
        for s, p, rec in zip(active, pts, recs):
            ok, why = day_verdict(rec["summary"], slo)
            s.feed(p["hardware.replicas"], ok, rec["error"] or why, rec["summary"])
    return searches


def _row(s: ReplicaSearch, tp: int, period_h: float) -> dict[str, Any]:
    best = s.results.get(s.hi)[2] if s.hi is not None else None      # type: ignore[index]
    below = s.results.get(s.hi - 1) if s.hi is not None and s.hi > 1 else None
    best = best or {}
    return {"config": s.label, "replicas": s.hi, "gpus": s.hi * tp if s.hi else None,
            "gpu_hours_per_day": s.hi * tp * period_h if s.hi else None,
            "limited_by": (below[1] if below else ("1 replica suffices" if s.hi == 1 else
                                                   f"fails at {s.max_replicas} (--max-replicas)")),
            "worst_window_tpot_ms_p99": best.get("window_tpot_ms_p99_max"),
            "worst_window_ttft_ms_p99": best.get("window_ttft_ms_p99_max"),
            "day_tpot_ms_p99": best.get("tpot_ms_p99"), "day_ttft_ms_p99": best.get("ttft_ms_p99"),
            "requests": best.get("num_requests"), "mean_batch": best.get("mean_batch"), "mean_k": best.get("mean_k"),
            "windows": best.get("windows", []),
            "probes": [{"replicas": r, "pass": ok, "why": why} for r, (ok, why, _) in sorted(s.results.items())]}


@dataclass(frozen=True)
class FleetDay:
    """The answer: `rows`, one per speculation setting (fewest replicas meeting the SLO in every
    window, GPUs, GPU-hours per day, what fails one replica fewer, latencies and utilisation at
    the answer, its windows, and the probes); `frame`: the rows without windows and probes."""
    scenario: str | None
    meta: dict[str, Any]                    # {scenario, deployment, drafter} in words
    slo: SLO
    schedule: dict[str, Any]                # peak and mean rate (real clock), period, compression
    rows: list[dict[str, Any]]
    frame: Any                              # pandas.DataFrame

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: what `specsight plan --json` prints for a schedule scenario."""
        return json_safe({"scenario": self.scenario, "slo": vars(self.slo), "schedule": self.schedule,
                          "fleet_day": self.rows})

    def write(self, out_dir: str | Path) -> dict[str, str]:
        """day.csv and day.md under out_dir; returns {csv, markdown}."""
        from .outputs import write_outputs
        return write_outputs(self, Path(out_dir))


def fleet_day(scenario: Any, *, slo_tpot_ms_p99: float | None = None, slo_ttft_ms_p99: float | None = None,
              policies: Sequence[str] | str = DEFAULT_POLICIES, ks: Sequence[int] | str = (),
              max_replicas: int = DEFAULT_MAX_REPLICAS, overrides: Iterable[str] = (),
              store: str | Path | None = None, workers: int | None = None, dask: str | None = None,
              executor: Any = None, progress: bool = True) -> FleetDay:
    """The fewest replicas that serve the scenario's day (a `schedule` workload) within the SLO, per
    setting: off (no speculation), static (the scenario's K, or each of `ks`), goodput, adaptive,
    batch_schedule. The SLO defaults to the scenario's slo: block; store: the JSON-lines point store."""
    import pandas as pd

    from simulator.common.limits import MAX_K, MAX_REPLICAS
    from simulator.scenario.scenario import load_scenario

    cap = require_int("--max-replicas", max_replicas, lo=1, hi=MAX_REPLICAS)
    overrides = list(overrides)
    source = scenario_source(scenario, overrides)
    sc = load_scenario(source)
    if sc.workload.arrival != "schedule":
        raise SpecsightInputError("--target-qps", None,
                                  "required unless the scenario's workload.arrival.process is schedule (a day of "
                                  f"traffic); this one's is {sc.workload.arrival}")
    slo = resolve_slo(source, slo_tpot_ms_p99, slo_ttft_ms_p99)
    configs = configurations(source, policy_names(policies), int_list("--k", ks, lo=1, hi=MAX_K) if ks else [])
    sch = sc.workload.schedule
    assert sch is not None
    raw_arr = source["workload"]["arrival"]
    compression = float(raw_arr.get("time_compression") or 1.0)
    period_h = sch.period_s * compression / 3600.0
    day = {"peak_qps": max(sch.qps), "mean_qps": sch.requests_per_period / sch.period_s,
           "period_h": period_h, "time_compression": compression, "windows": len(sch.start_s),
           "requests": sc.workload.n_requests}
    with study_executor(executor, workers, dask, len(configs)) as ex:
        searches = search_replicas(source, slo, configs, start=int(sc.hardware.replicas), max_replicas=cap,
                                   store_path=None if store is None else Path(store), executor=ex, progress=progress)
    rows = [_row(s, int(sc.hardware.tp), period_h) for s in searches]
    flat = pd.DataFrame([{k: v for k, v in r.items() if k not in ("probes", "windows")} for r in rows])
    return FleetDay(source.get("name"), describe_scenario(source, overrides), slo, day, rows, flat)
