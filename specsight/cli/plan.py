"""`specsight plan SCENARIO.yaml --target-qps X [--slo-tpot-ms-p99 MS] [--slo-ttft-ms-p99 MS]
[--price-per-gpu-hour USD]`

Capacity plan (specsight.studies.capacity_plan): for each speculation setting (off, static K,
and policies), the largest Poisson request rate one replica sustains within the SLO, then the
replicas and GPUs that serve the target rate, and what they cost. Every probe is a point of
DIR/points.jsonl, so a rerun resumes; `--grid KEY.PATH=V1,V2` plans each point of a grid of
scenario overrides.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from pathlib import Path

    from ..studies.capacity_plan import CapacityPlan

HELP = "replicas, GPUs and cost to serve a target QPS within an SLO, with and without speculation"


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ..studies.capacity_plan import DEFAULT_POLICIES, DEFAULT_PRICE, TOLERANCE

    p = sub.add_parser("plan", help=HELP, description=HELP)
    p.add_argument("scenario", help="scenario YAML (its slo: block gives the default SLO)")
    p.add_argument("--target-qps", type=float, required=True, help="requests/s the fleet must serve")
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
    add_out(p, "out/plan", "folder for plan.csv, plan.md, plan.png, points.jsonl and the serving commands "
                            "(serve_vllm.sh, serve_sglang.sh, serve_trtllm.sh, trtllm.yaml)")
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
        res = capacity_plan(args.scenario, args.target_qps, slo_tpot_ms_p99=args.slo_tpot_ms_p99,
                            slo_ttft_ms_p99=args.slo_ttft_ms_p99, price_per_gpu_hour=args.price_per_gpu_hour,
                            policies=args.policies, ks=args.k or (), tolerance=args.tolerance, overrides=overrides,
                            store=out / "points.jsonl", workers=args.workers, dask=args.dask,
                            progress=not args.no_progress)
        files = {**res.write(out), "store": str(out / "points.jsonl")}
        serving_text, serving, deploy_files = deploy_hook(res, args, overrides, out)
        elapsed = time.perf_counter() - t0
        if args.json:
            answers.append({**({"point": point} if point is not None else {}), **res.to_dict(),
                            "deployment": serving, "elapsed_s": round(elapsed, 2), "files": {**files, **deploy_files}})
            continue
        if point is not None:
            print(f"== {point_label(point)}")
        print(headline(res).replace("# ", "").replace("\n\n", "\n"))
        print(format_table(res.rows))
        for r in res.rows:
            if r["max_qps_per_replica"] is None:
                print(f"  {r['config']}: no rate >= {MIN_QPS} requests/s meets the SLO ({r['limited_by']})")
        print(serving_text)
        print(f"{elapsed:.1f} s; wrote {files['csv']}, {files['markdown']}, {files['plot']}"
              + "".join(f", {f}" for f in deploy_files.values()), file=sys.stderr)
    if args.json:
        emit_json(answers[0] if not args.grid else {"grid": answers})
    return 0


def deploy_hook(res: CapacityPlan, args: argparse.Namespace, overrides: list[str],
                out: Path) -> tuple[str, dict, dict[str, str]]:
    """The chosen configuration's serving commands (specsight.studies.deploy) as text and data,
    and the files written for them ({"none": why} when there are none)."""
    from simulator.errors import SpecsightInputError

    from ..studies.deploy import plan_deployment
    try:
        chosen = plan_deployment(res, args.scenario, overrides, args.policies, args.k or ())
    except SpecsightInputError as e:
        why = str(e)
    else:
        if chosen is not None:
            return chosen.text(), chosen.to_dict(), chosen.deployment.write(out)
        why = "no configuration meets the SLO"
    return f"serving commands: none ({why})", {"none": why}, {}
