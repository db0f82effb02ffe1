"""`specsight plan SCENARIO.yaml --target-qps X [--slo-tpot-ms-p99 MS] [--slo-ttft-ms-p99 MS]
[--price-per-gpu-hour USD] [--grid KEY.PATH=V1,V2 ...]`, or `specsight plan DAY.yaml [--max-replicas N]`
for a scenario whose workload is a day of traffic (a `schedule` arrival process)

Capacity plan (specsight.studies.plan.study): for each speculation setting (off, static K,
and policies), the largest Poisson request rate one replica sustains within the SLO, then the
replicas and GPUs that serve the target rate, and what they cost. With `--grid`, a configuration
search (specsight.studies.plan.search): every point of the grids' product under every setting,
ranked by USD per million output tokens, the cheapest that meets the SLO chosen. Every probe is a
point of DIR/points.jsonl, so a rerun resumes. Without --target-qps (specsight.studies.fleet_day.study),
the scenario's day is simulated over fleets of hardware.replicas replicas behind its router, and the
answer is the fewest replicas meeting the SLO in every window of the day, per setting.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from .args import (
    SCENARIO_HARDWARE_HELP,
    add_executor,
    add_grid,
    add_hardware,
    add_json,
    add_k,
    add_out,
    add_set,
    check_out_dir,
    scenario_overrides,
)
from .emit import emit_json

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ..studies.deploy.study import PlanDeployment

HELP = "replicas, GPUs and cost to serve a target QPS within an SLO, with and without speculation"


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ..studies.fleet_day.study import DEFAULT_MAX_REPLICAS
    from ..studies.plan.study import DEFAULT_POLICIES, TOLERANCE

    p = sub.add_parser("plan", help=HELP, description=HELP)
    p.add_argument("scenario", help="scenario YAML (its slo: block gives the default SLO)")
    p.add_argument("--target-qps", type=float,
                   help="requests/s the fleet must serve (omit for a scenario whose workload is a schedule: the "
                        "fewest replicas serving its day)")
    p.add_argument("--max-replicas", type=int, default=DEFAULT_MAX_REPLICAS,
                   help=f"without --target-qps: the largest fleet to try (default {DEFAULT_MAX_REPLICAS})")
    p.add_argument("--slo-tpot-ms-p99", type=float, help="TPOT p99 limit, ms (default: the scenario's slo)")
    p.add_argument("--slo-ttft-ms-p99", type=float, help="TTFT p99 limit, ms (default: the scenario's slo)")
    p.add_argument("--price-per-gpu-hour", type=float,
                   help="USD per GPU-hour (default: the scenario's pricing.usd_per_gpu_hour, else the hardware "
                        "profile's price_usd_per_gpu_hour, each with its cited source)")
    p.add_argument("--policies", default=",".join(DEFAULT_POLICIES),
                   help="settings to plan: off (no speculation), static (the scenario's K), goodput, adaptive, "
                        "batch_schedule")
    add_k(p, None, "static K values to plan (default: the scenario's num_speculative_tokens)")
    p.add_argument("--tolerance", type=float, default=TOLERANCE,
                   help=f"relative bracket width to stop at (default {TOLERANCE})")
    add_set(p, "override a scenario value first; repeatable")
    add_hardware(p, help=SCENARIO_HARDWARE_HELP)
    add_grid(p, "search: the configurations are the product of the grids (any scenario key, values parsed as "
                "YAML; repeatable), each under every --policies setting; ranked by $/M output tokens into "
                "DIR/search.csv, search.md, search_pareto.png")
    add_out(p, "out/plan", "folder for plan.csv, plan.md, plan.png (with --grid: search.csv, search.md, "
                           "search_pareto.png), points.jsonl and the chosen configuration's serving commands "
                           "(serve_vllm.sh, serve_sglang.sh, serve_trtllm.sh, trtllm.yaml)")
    add_executor(p)
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..studies.deploy.study import plan_deployment, search_deployment

    out = check_out_dir(args.out)                # before any probe runs
    t0 = time.perf_counter()
    overrides = scenario_overrides(args)
    if args.target_qps is None:                  # a day of traffic (a schedule workload)
        return _fleet_day(args, overrides, out, t0)
    common = dict(slo_tpot_ms_p99=args.slo_tpot_ms_p99, slo_ttft_ms_p99=args.slo_ttft_ms_p99,
                  price_per_gpu_hour=args.price_per_gpu_hour, policies=args.policies, ks=args.k or (),
                  tolerance=args.tolerance, overrides=overrides, store=out / "points.jsonl",
                  workers=args.workers, dask=args.dask, progress=not args.no_progress)
    if args.grid:                                # the configuration search
        from ..studies.plan import search_outputs as outputs
        from ..studies.plan.search import plan_search
        res = plan_search(args.scenario, args.target_qps, args.grid, **common)
        notes = ["  " + line for line in outputs.unserved_lines(res.rows)] + [outputs.chosen_line(res)]
        choose = lambda: search_deployment(res)                            # noqa: E731
    else:
        from ..studies.plan import outputs as outputs  # type: ignore[no-redef]
        from ..studies.plan.study import capacity_plan
        res = capacity_plan(args.scenario, args.target_qps, **common)   # type: ignore[assignment]
        notes = ["  " + line for line in outputs.unserved_lines(res.rows)]
        choose = lambda: plan_deployment(res, args.scenario, overrides, args.policies, args.k or ())  # noqa: E731
    serving_text, serving, deploy_files = serving_commands(choose, out)
    files = {**res.write(out, serving_text), "store": str(common["store"]), **deploy_files}
    elapsed = time.perf_counter() - t0
    if args.json:
        emit_json({**res.to_dict(), "deployment": serving, "elapsed_s": round(elapsed, 2), "files": files})
        return 0
    print(outputs.headline(res).replace("# ", "").replace("\n\n", "\n"))   # type: ignore[arg-type]
    print(outputs.format_table(res.rows))
    for line in notes:
        print(line)
    print(serving_text)
    print(f"{elapsed:.1f} s; wrote " + ", ".join(str(f) for f in files.values()), file=sys.stderr)
    return 0


def _fleet_day(args: argparse.Namespace, overrides: list[str], out: Path, t0: float) -> int:
    """The fewest replicas serving the scenario's day, per setting: a table, or --json."""
    from simulator.common.errors import SpecsightInputError

    from ..studies.fleet_day.outputs import headline, table
    from ..studies.fleet_day.study import fleet_day

    if args.grid:
        raise SpecsightInputError("--grid", args.grid[0], "needs --target-qps (a day of traffic is planned for the "
                                                           "scenario as given; change it with --set)")
    res = fleet_day(args.scenario, slo_tpot_ms_p99=args.slo_tpot_ms_p99, slo_ttft_ms_p99=args.slo_ttft_ms_p99,
                    policies=args.policies, ks=args.k or (), max_replicas=args.max_replicas, overrides=overrides,
                    store=out / "points.jsonl", workers=args.workers, dask=args.dask, progress=not args.no_progress)
    files = {**res.write(out), "store": str(out / "points.jsonl")}
    elapsed = time.perf_counter() - t0
    if args.json:
        emit_json({**res.to_dict(), "elapsed_s": round(elapsed, 2), "files": files})
        return 0
    print(headline(res).replace("# ", "").replace("\n\n", "\n"))
    print(table(res))
    for r in res.rows:
        print(f"  {r['config']}: {r['limited_by']}" + ("" if r["replicas"] is None or r["replicas"] == 1
                                                      else f" with {r['replicas'] - 1} replicas"))
    print(f"{elapsed:.1f} s; wrote " + ", ".join(str(f) for f in files.values()), file=sys.stderr)
    return 0


def serving_commands(choose: Callable[[], PlanDeployment | None], out: Path) -> tuple[str, dict, dict[str, str]]:
    """The chosen configuration's serving commands (specsight.studies.deploy.study) as text and data,
    and the files written for them ({"none": why} when there are none)."""
    from simulator.common.errors import SpecsightInputError
    try:
        chosen = choose()
    except SpecsightInputError as e:
        why = str(e)
    else:
        if chosen is not None:
            return chosen.text(), chosen.to_dict(), chosen.write(out)
        why = "no configuration meets the SLO"
    return f"serving commands: none ({why})", {"none": why}, {}
