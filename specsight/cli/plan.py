"""`specsight plan SCENARIO.yaml --target-qps X [--slo-tpot-ms-p99 MS] [--slo-ttft-ms-p99 MS]
[--price-per-gpu-hour USD]`, or `specsight plan DAY.yaml [--max-replicas N]` for a scenario whose
workload is a day of traffic (a `schedule` arrival process)

Capacity plan (specsight.studies.capacity_plan): for each speculation setting (off, static K,
and policies), the largest Poisson request rate one replica sustains within the SLO, then the
replicas and GPUs that serve the target rate, and what they cost. Every probe is a point of
DIR/points.jsonl, so a rerun resumes; `--grid KEY.PATH=V1,V2` plans each point of a grid of
scenario overrides. Without --target-qps (specsight.studies.fleet_day), the scenario's day is
simulated over fleets of hardware.replicas replicas behind its router, and the answer is the fewest
replicas meeting the SLO in every window of the day, per setting.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .args import (
    GRID_HELP,
    SCENARIO_HARDWARE_HELP,
    add_executor,
    add_grid,
    add_hardware,
    add_json,
    add_k,
    add_out,
    add_set,
    check_out_dir,
    grid_cases,
)
from .emit import emit_json

HELP = "replicas, GPUs and cost to serve a target QPS within an SLO, with and without speculation"


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ..studies.capacity_plan import DEFAULT_POLICIES, DEFAULT_PRICE, TOLERANCE
    from ..studies.fleet_day import DEFAULT_MAX_REPLICAS

    p = sub.add_parser("plan", help=HELP, description=HELP)
    p.add_argument("scenario", help="scenario YAML (its slo: block gives the default SLO)")
    p.add_argument("--target-qps", type=float,
                   help="requests/s the fleet must serve (omit for a scenario whose workload is a schedule: the "
                        "fewest replicas serving its day)")
    p.add_argument("--max-replicas", type=int, default=DEFAULT_MAX_REPLICAS,
                   help=f"without --target-qps: the largest fleet to try (default {DEFAULT_MAX_REPLICAS})")
    p.add_argument("--slo-tpot-ms-p99", type=float, help="TPOT p99 limit, ms (default: the scenario's slo)")
    p.add_argument("--slo-ttft-ms-p99", type=float, help="TTFT p99 limit, ms (default: the scenario's slo)")
    p.add_argument("--price-per-gpu-hour", type=float, default=DEFAULT_PRICE,
                   help=f"USD per GPU-hour (default {DEFAULT_PRICE}, a placeholder)")
    p.add_argument("--policies", default=",".join(DEFAULT_POLICIES),
                   help="settings to plan: off (no speculation), static (the scenario's K), goodput, adaptive, "
                        "batch_schedule")
    add_k(p, None, "static K values to plan (default: the scenario's num_speculative_tokens)")
    p.add_argument("--tolerance", type=float, default=TOLERANCE,
                   help=f"relative bracket width to stop at (default {TOLERANCE})")
    add_set(p, "override a scenario value first; repeatable")
    add_hardware(p, help=SCENARIO_HARDWARE_HELP)
    add_grid(p, GRID_HELP)
    add_out(p, "out/plan", "folder for plan.csv, plan.md, plan.png and points.jsonl")
    add_executor(p)
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..studies.capacity_plan import MIN_QPS, capacity_plan
    from ..studies.capacity_plan_outputs import format_table, headline
    from ..studies.overrides import point_label

    answers = []
    cases = grid_cases(args)
    for _, _, out in cases:
        check_out_dir(out)                   # every case's folder before any probe runs
    for point, overrides, out in cases:
        t0 = time.perf_counter()
        if args.target_qps is None:
            answers.append(_fleet_day(args, point, overrides, out, t0))
            continue
        res = capacity_plan(args.scenario, args.target_qps, slo_tpot_ms_p99=args.slo_tpot_ms_p99,
                            slo_ttft_ms_p99=args.slo_ttft_ms_p99, price_per_gpu_hour=args.price_per_gpu_hour,
                            policies=args.policies, ks=args.k or (), tolerance=args.tolerance, overrides=overrides,
                            store=out / "points.jsonl", workers=args.workers, dask=args.dask,
                            progress=not args.no_progress)
        files = {**res.write(out), "store": str(out / "points.jsonl")}
        elapsed = time.perf_counter() - t0
        if args.json:
            answers.append({**({"point": point} if point is not None else {}), **res.to_dict(),
                            "elapsed_s": round(elapsed, 2), "files": files})
            continue
        if point is not None:
            print(f"== {point_label(point)}")
        print(headline(res).replace("# ", "").replace("\n\n", "\n"))
        print(format_table(res.rows))
        for r in res.rows:
            if r["max_qps_per_replica"] is None:
                print(f"  {r['config']}: no rate >= {MIN_QPS} requests/s meets the SLO ({r['limited_by']})")
        print(f"{elapsed:.1f} s; wrote {files['csv']}, {files['markdown']}, {files['plot']}", file=sys.stderr)
    if args.json:
        emit_json(answers[0] if not args.grid else {"grid": answers})
    return 0


def _fleet_day(args: argparse.Namespace, point: dict | None, overrides: list[str], out: Path, t0: float) -> dict:
    """The fleet-day answer for one grid case: printed as a table, or returned for --json."""
    from ..studies.fleet_day import fleet_day
    from ..studies.fleet_day_outputs import headline, table
    from ..studies.overrides import point_label

    res = fleet_day(args.scenario, slo_tpot_ms_p99=args.slo_tpot_ms_p99, slo_ttft_ms_p99=args.slo_ttft_ms_p99,
                    policies=args.policies, ks=args.k or (), max_replicas=args.max_replicas, overrides=overrides,
                    store=out / "points.jsonl", workers=args.workers, dask=args.dask, progress=not args.no_progress)
    files = {**res.write(out), "store": str(out / "points.jsonl")}
    elapsed = time.perf_counter() - t0
    if not args.json:
        if point is not None:
            print(f"== {point_label(point)}")
        print(headline(res).replace("# ", "").replace("\n\n", "\n"))
        print(table(res))
        for r in res.rows:
            print(f"  {r['config']}: {r['limited_by']}" + ("" if r["replicas"] is None or r["replicas"] == 1
                                                          else f" with {r['replicas'] - 1} replicas"))
        print(f"{elapsed:.1f} s; wrote {files['csv']}, {files['markdown']}, {files['windows']}", file=sys.stderr)
    return {**({"point": point} if point is not None else {}), **res.to_dict(), "elapsed_s": round(elapsed, 2),
            "files": files}
