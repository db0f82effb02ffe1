"""Capacity plan: the replicas, GPUs and cost that serve a target request rate within an SLO,
for each speculation setting (off, static K, and policies).

For each setting, the largest Poisson request rate one replica sustains within the SLO. A rate
*passes* when the simulated TPOT p99 and TTFT p99 are within the SLO and the queue is not growing
(saturation.py: the rule `simulate --json` and `breakeven` report as `saturated`). Search: start
at the scenario's rate (or 1/s), double or halve until a passing and a failing rate bracket the
limit, then bisect geometrically until they are within `tolerance` (relative). Every probe is a
point of the point store, so a rerun resumes. A probe that errors (the configuration does not fit
in memory, or cannot run at all) ends its configuration's search: no rate would help. replicas =
ceil(target / max rate); GPUs = replicas x tp; $/hour = GPUs x price (price.py); $/M
output tokens = $/hour / (target rate x mean output tokens x 3600) x 10^6. Under a real engine a
speculative configuration's max rate, capacity against `off` and replicas carry their 80 %
intervals (published/answer_intervals.capacity_intervals).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.common.errors import SpecsightInputError, require_range

from ..published.answer_intervals import capacity_intervals, scenario_group
from ..published.spread import scenario_spread
from ..shared.inputs import int_list
from ..shared.jsonable import json_safe
from ..shared.overrides import describe_scenario, own_policy, scenario_source
from ..shared.points import run_points, study_executor
from ..shared.saturation import queue_growth
from .price import gpu_hour_price, without_pricing
from .statuses import MIN_QPS

DEFAULT_POLICIES = ("off", "static", "goodput")
TOLERANCE = 0.05             # bisection stops when hi / lo - 1 <= this
MAX_PROBES = 16              # per configuration


@dataclass(frozen=True)
class SLO:
    tpot_ms_p99: float | None
    ttft_ms_p99: float | None


def verdict(summary: Mapping[str, Any] | None, slo: SLO) -> tuple[bool, str]:
    """(passes, reason) for one simulated rate."""
    if not summary:
        return False, "simulation failed"

    def g(k: str) -> float:
        v = summary.get(k)
        return math.nan if v is None else float(v)
    if slo.tpot_ms_p99 is not None and not g("tpot_ms_p99") <= slo.tpot_ms_p99:
        return False, f"TPOT p99 {g('tpot_ms_p99'):.1f} ms > {slo.tpot_ms_p99:g}"
    if slo.ttft_ms_p99 is not None and not g("ttft_ms_p99") <= slo.ttft_ms_p99:
        return False, f"TTFT p99 {g('ttft_ms_p99'):.0f} ms > {slo.ttft_ms_p99:g}"
    growing, why = queue_growth(summary)
    return (False, why) if growing else (True, "ok")


@dataclass
class Search:
    """Bracket-and-bisect on the Poisson rate for one configuration."""
    label: str
    overrides: dict[str, Any]
    q: float
    tol: float
    slo: SLO = SLO(None, None)
    lo: float | None = None            # largest passing rate
    hi: float | None = None            # smallest failing rate
    lo_summary: dict | None = None
    probes: list[dict] = field(default_factory=list)
    done: bool = False
    reason_hi: str = ""
    error: str | None = None            # a probe's error: the configuration cannot run at any rate

    def feed(self, q: float, summary: dict | None, ok: bool, why: str, error: str | None = None) -> None:
        self.probes.append({"qps": q, "pass": ok, "why": why, "summary": summary})
        if error:
            self.error, self.done = error, True
            return
        if ok and (self.lo is None or q > self.lo):
            self.lo, self.lo_summary = q, summary
        if not ok and (self.hi is None or q < self.hi):
            self.hi, self.reason_hi = q, why
        if self.hi is None:
            self.q = q * 2.0
        elif self.lo is None:
            self.q = q / 2.0
            if self.q < MIN_QPS:
                self.done = True
        else:
            self.q = math.sqrt(self.lo * self.hi)
            if self.hi / self.lo - 1.0 <= self.tol:
                self.done = True
        if len(self.probes) >= MAX_PROBES:
            self.done = True


def configurations(source: Mapping[str, Any], policies: list[str], ks: list[int]) -> list[tuple[str, dict[str, Any]]]:
    k_own = int((source.get("drafter") or {}).get("num_speculative_tokens", 0))
    own = own_policy(source)
    out: list[tuple[str, dict[str, Any]]] = []
    for pol in policies:
        if pol == "off":
            out.append(("off (no speculation)", {"policy": {"kind": "off"}}))
        elif source.get("drafter") is None:
            raise SpecsightInputError("--policies", pol, "needs a scenario with a drafter (only `off` without one)")
        elif pol == "static":
            for k in ks or [k_own]:
                out.append((f"static K={k}", {"policy": {"kind": "static"}, "drafter.num_speculative_tokens": k}))
        elif pol in ("goodput", "adaptive"):
            out.append((f"{pol} (K<={k_own})", {"policy": dict(own) if own.get("kind") == pol else {"kind": pol}}))
        elif pol == "batch_schedule":
            if own.get("kind") != "batch_schedule":
                raise SpecsightInputError("--policies", pol, "the scenario's policy block must give the schedule")
            out.append(("batch_schedule", {"policy": dict(own)}))
        else:
            raise SpecsightInputError("--policies", pol,
                                      "comma-separated, from off, static, goodput, adaptive, batch_schedule")
    return out


def speculates(overrides: Mapping[str, Any]) -> bool:
    """Whether a configuration's overrides leave speculation on (policy off, or static K 0, do not)."""
    kind = (overrides.get("policy") or {}).get("kind")
    return kind != "off" and not (kind == "static" and overrides.get("drafter.num_speculative_tokens") == 0)


def probe_point(overrides: Mapping[str, Any], qps: float) -> dict[str, Any]:
    """One probe: `overrides` on one replica under Poisson arrivals at `qps` (rounded to 6 places)."""
    return {**overrides, "workload.arrival": {"process": "poisson", "qps": round(qps, 6)}, "hardware.replicas": 1}


def run_searches(source: Mapping[str, Any], searches: Sequence[Search], *, store_path: str | Path | None = None,
                 executor: Any = None, progress: bool = True, expected: Sequence[type[BaseException]] = ()) -> None:
    """Feed every search its probes, one round of all unfinished searches at a time (so a round
    runs in parallel), until each is done. Each probe is one replica at a Poisson rate.
    `expected`: refusals that print no line (points.run_points); every one ends its search."""
    probe_source = without_pricing(source)
    rnd = 0
    while any(not s.done for s in searches):
        rnd += 1
        active = [s for s in searches if not s.done]
        pts = [probe_point(s.overrides, s.q) for s in active]
        recs = run_points(probe_source, pts, store_path, executor, progress=progress, desc=f"plan round {rnd}",
                          expected=expected)
        for s, p, r in zip(active, pts, recs):
            ok, why = verdict(r["summary"], s.slo)
            if r["error"]:
                why = r["error"]
            s.feed(p["workload.arrival"]["qps"], r["summary"], ok, why, r["error"])


def fleet_row(s: Search, target_qps: float, tp: int, price: float) -> dict[str, Any]:
    """One configuration's answer: max rate per replica, replicas, GPUs, costs, and its probes."""
    best = s.lo or 0.0
    summ = s.lo_summary or {}
    out_tok = (summ.get("output_tokens") or 0) / max(1, summ.get("num_requests") or 1)
    replicas = math.ceil(target_qps / best) if best > 0 else None
    gpus = replicas * tp if replicas else None
    cost_h = gpus * price if gpus else None
    cost_m = cost_h / (target_qps * out_tok * 3600.0) * 1e6 if cost_h and out_tok else None
    return {"config": s.label, "max_qps_per_replica": best if best > 0 else None,
            "bracket_hi_qps": s.hi, "limited_by": s.error or s.reason_hi or "not reached",
            "tpot_ms_p99_at_max": summ.get("tpot_ms_p99"), "ttft_ms_p99_at_max": summ.get("ttft_ms_p99"),
            "output_tokens_per_s_at_max": summ.get("output_tokens_per_s"),
            "mean_output_tokens": out_tok or None, "replicas": replicas, "tp": tp, "gpus": gpus,
            "cost_per_hour_usd": cost_h, "cost_per_million_output_tokens_usd": cost_m,
            "probes": [{"qps": p["qps"], "pass": p["pass"], "why": p["why"],
                        "tpot_ms_p99": (p["summary"] or {}).get("tpot_ms_p99"),
                        "ttft_ms_p99": (p["summary"] or {}).get("ttft_ms_p99")} for p in s.probes]}


def replica_tp(source: Mapping[str, Any]) -> int:
    """GPUs per replica: the scenario's hardware.tp (1 when unset); a disaggregated deployment's
    replica is one xPyD unit: its prefill and decode instances' GPUs."""
    tp = int((source.get("hardware") or {}).get("tp", 1))
    d = source.get("disaggregation")
    if d:
        return sum(int(d[p].get("instances", 1)) * int(d[p].get("tp") or tp) for p in ("prefill", "decode"))
    return tp


def start_rate(source: Mapping[str, Any]) -> float:
    """Where a search starts: the scenario's Poisson rate, or 1 request/s."""
    arr = (source.get("workload") or {}).get("arrival") or {}
    return float(arr.get("qps", 1.0)) if isinstance(arr, Mapping) and arr.get("qps") else 1.0


def plan(source: Mapping[str, Any], target_qps: float, slo: SLO, price: float, configs: list[tuple[str, dict]],
         *, tol: float = TOLERANCE, store_path: str | Path | None = None, executor: Any = None,
         progress: bool = True) -> list[dict[str, Any]]:
    """One row per configuration: max rate per replica, replicas, GPUs, costs, and the probes."""
    tp = replica_tp(source)
    searches = [Search(label, dict(ov), start_rate(source), tol, slo) for label, ov in configs]
    run_searches(source, searches, store_path=store_path, executor=executor, progress=progress)
    rows = [fleet_row(s, target_qps, tp, price) for s in searches]
    base = next((r for r in rows if r["config"].startswith("off")), None)
    engine, method = scenario_group(source)
    for r, (_, ov) in zip(rows, configs):
        r["capacity_vs_off"] = (r["max_qps_per_replica"] / base["max_qps_per_replica"]
                                if base and base["max_qps_per_replica"] and r["max_qps_per_replica"] else None)
        k = ov.get("drafter.num_speculative_tokens")
        r.update(capacity_intervals(r, target_qps, engine, method, speculates(ov),
                                    scenario_spread(source, k=int(k) if k else None).pair if speculates(ov) else None))
    return rows


@dataclass(frozen=True)
class CapacityPlan:
    """A capacity plan: `rows`, one per configuration (max QPS per replica, the bracket, what
    limits it, latencies at the max, replicas, GPUs, costs, capacity against `off`, under a real
    engine the `*_interval`s of those three, and the search's probes); `frame`: the rows without
    their probes."""
    scenario: str | None
    meta: dict[str, Any]                    # {scenario, deployment, drafter, engine} in words
    target_qps: float
    slo: SLO
    price_per_gpu_hour: float
    rows: list[dict[str, Any]]
    frame: Any                              # pandas.DataFrame
    price_source: str = ""                  # where the price comes from (price.py)
    source: Mapping[str, Any] | None = None  # the scenario as planned (its engine and drafter pick the intervals)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: what `specsight plan --json` prints, less timing and files."""
        return json_safe({"scenario": self.scenario, "engine": self.meta["engine"], "target_qps": self.target_qps,
                          "slo": vars(self.slo), "price_per_gpu_hour": self.price_per_gpu_hour,
                          "price_source": self.price_source, "plans": self.rows})

    def write(self, out_dir: str | Path, serving: str | None = None) -> dict[str, str]:
        """plan.csv, plan.md and plan.png under out_dir; returns {csv, markdown, plot}. `serving`:
        the chosen configuration's serving commands as text (`plan_deployment(plan, ...).text()`),
        closing plan.md."""
        from .outputs import write_outputs
        return write_outputs(self, Path(out_dir), serving)


def checked_inputs(scenario: Any, target_qps: float, slo_tpot_ms_p99: float | None, slo_ttft_ms_p99: float | None,
                   tolerance: float, overrides: Iterable[str]) -> tuple[dict[str, Any], float, SLO, float]:
    """(scenario source, target, SLO, tolerance), each checked; the SLO limits default to the
    scenario's slo: block."""
    from simulator.common.limits import MAX_QPS

    target = require_range("--target-qps", target_qps, 0.0, MAX_QPS, lo_open=True)
    tol = require_range("--tolerance", tolerance, 0.001, 1.0)
    source = scenario_source(scenario, overrides)
    return source, target, resolve_slo(source, slo_tpot_ms_p99, slo_ttft_ms_p99), tol


def resolve_slo(source: Mapping[str, Any], tpot_ms_p99: float | None, ttft_ms_p99: float | None) -> SLO:
    """The SLO: the flags' limits, else the scenario's slo: block; at least one limit is required."""
    from simulator.common.limits import MAX_MS
    raw_slo = source.get("slo") or {}
    slo = SLO(tpot_ms_p99 if tpot_ms_p99 is not None else raw_slo.get("tpot_ms_p99"),
              ttft_ms_p99 if ttft_ms_p99 is not None else raw_slo.get("ttft_ms_p99"))
    for name, v in (("--slo-tpot-ms-p99", slo.tpot_ms_p99), ("--slo-ttft-ms-p99", slo.ttft_ms_p99)):
        if v is not None:
            require_range(name, v, 0.0, MAX_MS, lo_open=True)
    if slo.tpot_ms_p99 is None and slo.ttft_ms_p99 is None:
        raise SpecsightInputError("--slo-tpot-ms-p99", None, "give an SLO (flags or the scenario's slo: block)")
    return slo


def policy_names(policies: Sequence[str] | str) -> list[str]:
    """`off,static` or ["off", "static"] -> ["off", "static"]."""
    text = policies if isinstance(policies, str) else ",".join(policies)
    return [p.strip() for p in text.split(",") if p.strip()]


def capacity_plan(scenario: Any, target_qps: float, *, slo_tpot_ms_p99: float | None = None,
                  slo_ttft_ms_p99: float | None = None, price_per_gpu_hour: float | None = None,
                  policies: Sequence[str] | str = DEFAULT_POLICIES, ks: Sequence[int] | str = (),
                  tolerance: float = TOLERANCE, overrides: Iterable[str] = (), store: str | Path | None = None,
                  workers: int | None = None, dask: str | None = None, executor: Any = None,
                  progress: bool = True) -> CapacityPlan:
    """Plan the fleet that serves `target_qps` requests/s. The SLO limits default to the
    scenario's slo: block; the price to the scenario's pricing block, then the hardware profile's
    (price.py); policies: off (no speculation), static (the scenario's K, or each of
    `ks`), goodput, adaptive, batch_schedule; store: the JSON-lines point store (None: in memory)."""
    import pandas as pd

    from simulator.common.limits import MAX_K

    overrides = list(overrides)
    source, target, slo, tol = checked_inputs(scenario, target_qps, slo_tpot_ms_p99, slo_ttft_ms_p99, tolerance,
                                              overrides)
    configs = configurations(source, policy_names(policies), int_list("--k", ks, lo=1, hi=MAX_K) if ks else [])
    price, price_source = gpu_hour_price(source, price_per_gpu_hour)
    with study_executor(executor, workers, dask, len(configs)) as ex:
        rows = plan(source, target, slo, price, configs, tol=tol, store_path=None if store is None else Path(store),
                    executor=ex, progress=progress)
    meta = describe_scenario(source, overrides)
    flat = pd.DataFrame([{k: v for k, v in r.items() if k != "probes"} for r in rows])
    flat.insert(0, "engine", meta["engine"])     # the engine every capacity was searched under
    return CapacityPlan(source.get("name"), meta, target, slo, price, rows, flat, price_source, source)
