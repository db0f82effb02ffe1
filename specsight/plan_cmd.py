"""`specsight plan SCENARIO.yaml --target-qps X [--slo-tpot-ms-p99 MS] [--slo-ttft-ms-p99 MS] [--price-per-gpu-hour USD]`

Capacity plan: for each speculation setting (off, static K, and policies), the largest Poisson
request rate one replica sustains within the SLO, then the replicas and GPUs that serve the
target rate, and what they cost.

A rate *passes* when the simulated TPOT p99 and TTFT p99 are within the SLO and the queue is not
growing: the mean TTFT of the last quarter of requests (by arrival) is at most
2 x that of the first quarter + a quarter of the median E2E latency (past capacity the backlog,
and with it the wait, grows through the run). Search: start at the scenario's rate (or 1/s),
double or halve until a passing and a failing rate bracket the limit, then bisect geometrically
until they are within --tolerance (relative). Every probe is a sweep point (DIR/points.jsonl), so
a rerun resumes. replicas = ceil(target / max rate); GPUs = replicas x tp; $/hour = GPUs x price;
$/M output tokens = $/hour / (target rate x mean output tokens x 3600) x 10^6.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from simulator.errors import SpecsightInputError, require_range

from .sweep import default_workers, describe_scenario, open_executor, own_policy, run_points, scenario_source

HELP = "replicas, GPUs and cost to serve a target QPS within an SLO, with and without speculation"
DEFAULT_PRICE = 2.0          # USD per GPU-hour: a placeholder; pass your own
DEFAULT_POLICIES = "off,static,goodput"
TOLERANCE = 0.05             # bisection stops when hi / lo - 1 <= this
MAX_PROBES = 16              # per configuration
MIN_QPS = 1e-3               # below this a configuration is declared unable to meet the SLO


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("plan", help=HELP, description=HELP)
    p.add_argument("scenario", help="scenario YAML (its slo: block gives the default SLO)")
    p.add_argument("--target-qps", type=float, required=True, help="requests/s the fleet must serve")
    p.add_argument("--slo-tpot-ms-p99", type=float, help="TPOT p99 limit, ms (default: the scenario's slo)")
    p.add_argument("--slo-ttft-ms-p99", type=float, help="TTFT p99 limit, ms (default: the scenario's slo)")
    p.add_argument("--price-per-gpu-hour", type=float, default=DEFAULT_PRICE,
                   help=f"USD per GPU-hour (default {DEFAULT_PRICE}, a placeholder)")
    p.add_argument("--policies", default=DEFAULT_POLICIES,
                   help="settings to plan: off (no speculation), static (the scenario's K), goodput, adaptive, batch_schedule")
    p.add_argument("--k", help="static K values to plan (default: the scenario's num_speculative_tokens)")
    p.add_argument("--tolerance", type=float, default=TOLERANCE, help=f"relative bracket width to stop at (default {TOLERANCE})")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a scenario value first; repeatable")
    p.add_argument("--out", default="out/plan", help="folder for plan.csv, plan.md, plan.png and points.jsonl")
    p.add_argument("--workers", type=int, help="local processes (default: CPU count; 1 = in this process)")
    p.add_argument("--dask", metavar="ADDRESS", help="dask.distributed scheduler address")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)
    return p


# ---- what passes --------------------------------------------------------------------------------
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
    early, late, e2e = g("ttft_first_quarter_s"), g("ttft_last_quarter_s"), g("e2e_ms_p50") / 1e3
    if math.isfinite(late) and not late <= 2.0 * early + 0.25 * (e2e if math.isfinite(e2e) else 0.0):
        return False, f"queue growing (TTFT {early:.2f} s -> {late:.2f} s)"
    return True, "ok"


# ---- the search ---------------------------------------------------------------------------------
@dataclass
class Search:
    """Bracket-and-bisect on the Poisson rate for one configuration."""
    label: str
    overrides: dict[str, Any]
    q: float
    tol: float
    lo: float | None = None            # largest passing rate
    hi: float | None = None            # smallest failing rate
    lo_summary: dict | None = None
    probes: list[dict] = field(default_factory=list)
    done: bool = False
    reason_hi: str = ""

    def feed(self, q: float, summary: dict | None, ok: bool, why: str) -> None:
        self.probes.append({"qps": q, "pass": ok, "why": why, "summary": summary})
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
            raise SpecsightInputError("--policies", pol, "comma-separated, from off, static, goodput, adaptive, batch_schedule")
    return out


def plan(source: Mapping[str, Any], target_qps: float, slo: SLO, price: float, configs: list[tuple[str, dict]],
         *, tol: float = TOLERANCE, store_path: str | Path | None = None, executor: Any = None,
         progress: bool = True) -> list[dict[str, Any]]:
    """One row per configuration: max rate per replica, replicas, GPUs, costs, and the probes."""
    arr = (source.get("workload") or {}).get("arrival") or {}
    q0 = float(arr.get("qps", 1.0)) if isinstance(arr, Mapping) and arr.get("qps") else 1.0
    tp = int((source.get("hardware") or {}).get("tp", 1))
    searches = [Search(label, dict(ov), q0, tol) for label, ov in configs]
    rnd = 0
    while any(not s.done for s in searches):
        rnd += 1
        active = [s for s in searches if not s.done]
        pts = []
        for s in active:
            p = dict(s.overrides)
            p["workload.arrival"] = {"process": "poisson", "qps": round(s.q, 6)}
            p["hardware.replicas"] = 1
            pts.append(p)
        recs = run_points(source, pts, store_path, executor, progress=progress, desc=f"plan round {rnd}")
        for s, p, r in zip(active, pts, recs):
            ok, why = verdict(r["summary"], slo)
            if r["error"]:
                why = r["error"]
            s.feed(p["workload.arrival"]["qps"], r["summary"], ok, why)
    rows = []
    for s in searches:
        best = s.lo or 0.0
        summ = s.lo_summary or {}
        out_tok = (summ.get("output_tokens") or 0) / max(1, summ.get("num_requests") or 1)
        replicas = math.ceil(target_qps / best) if best > 0 else None
        gpus = replicas * tp if replicas else None
        cost_h = gpus * price if gpus else None
        cost_m = cost_h / (target_qps * out_tok * 3600.0) * 1e6 if cost_h and out_tok else None
        rows.append({"config": s.label, "max_qps_per_replica": best if best > 0 else None,
                     "bracket_hi_qps": s.hi, "limited_by": s.reason_hi or "not reached",
                     "tpot_ms_p99_at_max": summ.get("tpot_ms_p99"), "ttft_ms_p99_at_max": summ.get("ttft_ms_p99"),
                     "output_tokens_per_s_at_max": summ.get("output_tokens_per_s"),
                     "mean_output_tokens": out_tok or None, "replicas": replicas, "tp": tp, "gpus": gpus,
                     "cost_per_hour_usd": cost_h, "cost_per_million_output_tokens_usd": cost_m,
                     "probes": [{"qps": p["qps"], "pass": p["pass"], "why": p["why"],
                                 "tpot_ms_p99": (p["summary"] or {}).get("tpot_ms_p99"),
                                 "ttft_ms_p99": (p["summary"] or {}).get("ttft_ms_p99")} for p in s.probes]})
    base = next((r for r in rows if r["config"].startswith("off")), None)
    for r in rows:
        r["capacity_vs_off"] = (r["max_qps_per_replica"] / base["max_qps_per_replica"]
                                if base and base["max_qps_per_replica"] and r["max_qps_per_replica"] else None)
    return rows


# ---- output -------------------------------------------------------------------------------------
def _f(v: Any, fmt: str) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


TABLE = (("config", "config", "", "<24"), ("max QPS/replica", "max_qps_per_replica", ".2f", ">16"),
         ("vs off", "capacity_vs_off", ".2f", ">8"), ("TPOT p99 ms", "tpot_ms_p99_at_max", ".1f", ">13"),
         ("TTFT p99 ms", "ttft_ms_p99_at_max", ".0f", ">13"), ("replicas", "replicas", "d", ">9"),
         ("GPUs", "gpus", "d", ">6"), ("$/hour", "cost_per_hour_usd", ",.2f", ">10"),
         ("$/M out tok", "cost_per_million_output_tokens_usd", ".3f", ">13"))


def format_table(rows: list[dict[str, Any]]) -> str:
    lines = ["".join(format(h, a) for h, _, _, a in TABLE)]
    for r in rows:
        lines.append("".join(format(str(r[k]) if not f else _f(r[k], f), a) for _, k, f, a in TABLE))
    return "\n".join(lines)


def format_markdown(rows: list[dict[str, Any]], head: str) -> str:
    lines = [head, "", "| " + " | ".join(h for h, _, _, _ in TABLE) + " | limited by |",
             "|" + "---|" * (len(TABLE) + 1)]
    for r in rows:
        lines.append("| " + " | ".join(str(r[k]) if not f else _f(r[k], f) for _, k, f, _ in TABLE)
                     + f" | {r['limited_by']} |")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from .foundation_cmds import emit_json, parse_int_list
    from .plots import plot_plan_probes
    from .sweep import json_safe

    t0 = time.perf_counter()
    target = require_range("--target-qps", args.target_qps, 0.0, lo_open=True)
    price = require_range("--price-per-gpu-hour", args.price_per_gpu_hour, 0.0)
    tol = require_range("--tolerance", args.tolerance, 0.001, 1.0)
    source = scenario_source(args.scenario, args.overrides)
    raw_slo = source.get("slo") or {}
    slo = SLO(args.slo_tpot_ms_p99 if args.slo_tpot_ms_p99 is not None else raw_slo.get("tpot_ms_p99"),
              args.slo_ttft_ms_p99 if args.slo_ttft_ms_p99 is not None else raw_slo.get("ttft_ms_p99"))
    for name, v in (("--slo-tpot-ms-p99", slo.tpot_ms_p99), ("--slo-ttft-ms-p99", slo.ttft_ms_p99)):
        if v is not None:
            require_range(name, v, 0.0, lo_open=True)
    if slo.tpot_ms_p99 is None and slo.ttft_ms_p99 is None:
        raise SpecsightInputError("--slo-tpot-ms-p99", None, "give an SLO (flags or the scenario's slo: block)")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    ks = parse_int_list("k", args.k, lo=1) if args.k else []
    configs = configurations(source, policies, ks)
    out = Path(args.out)
    workers = args.workers if args.workers is not None else default_workers(len(configs))
    with open_executor(workers, args.dask) as ex:
        rows = plan(source, target, slo, price, configs, tol=tol, store_path=out / "points.jsonl", executor=ex,
                    progress=not args.no_progress)
    out.mkdir(parents=True, exist_ok=True)
    import pandas as pd
    flat = pd.DataFrame([{k: v for k, v in r.items() if k != "probes"} for r in rows])
    csv = out / "plan.csv"
    flat.to_csv(csv, index=False)
    meta = describe_scenario(source)
    head = (f"# Capacity plan: {source.get('name')}\n\n{meta['deployment']} per replica, drafter {meta['drafter']}; "
            f"target {target:g} requests/s; SLO TPOT p99 <= {_f(slo.tpot_ms_p99, 'g')} ms, "
            f"TTFT p99 <= {_f(slo.ttft_ms_p99, 'g')} ms; ${price:g} per GPU-hour.")
    md = out / "plan.md"
    md.write_text(format_markdown(rows, head))
    png = plot_plan_probes(rows, slo_tpot_ms=slo.tpot_ms_p99, slo_ttft_ms=slo.ttft_ms_p99, path=out / "plan.png",
                           title=f"{source.get('name')}: p99 latency vs offered load per replica (search probes)")
    elapsed = time.perf_counter() - t0
    files = {"csv": str(csv), "markdown": str(md), "plot": str(png), "store": str(out / "points.jsonl")}
    if args.json:
        emit_json(json_safe({"scenario": source.get("name"), "target_qps": target, "slo": vars(slo),
                             "price_per_gpu_hour": price, "plans": rows, "elapsed_s": round(elapsed, 2), "files": files}))
        return 0
    print(head.replace("# ", "").replace("\n\n", "\n"))
    print(format_table(rows))
    for r in rows:
        if r["max_qps_per_replica"] is None:
            print(f"  {r['config']}: no rate >= {MIN_QPS} requests/s meets the SLO ({r['limited_by']})")
    print(f"{elapsed:.1f} s; wrote {csv}, {md}, {png}", file=sys.stderr)
    return 0
