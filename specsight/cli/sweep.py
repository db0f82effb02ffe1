"""`specsight sweep SCENARIO.yaml --grid key.path=v1,v2,... [--grid ...] [--out DIR] [--dask ADDRESS] [--workers N]`

Simulates the cartesian product of the grids (each value parsed as YAML; specsight.studies.sweep),
on a local process pool or on a dask.distributed cluster. Every finished point is appended to
DIR/points.jsonl at once, keyed by a hash of the scenario, the point's overrides and the
simulator's code and data, so rerunning the same command after an interruption computes only
the missing points; a point that fails records its error and the sweep goes on. DIR/sweep.csv
gets one row per point.

A cluster: `dask scheduler` on one machine (it listens on tcp://HOST:8786), `dask worker
tcp://HOST:8786` on each machine (with this repository installed), then
`specsight sweep ... --dask tcp://HOST:8786`.
"""
from __future__ import annotations

import argparse
import sys
import time

from simulator.common.atomic_files import write_csv

from .args import (
    SCENARIO_HARDWARE_HELP,
    add_executor,
    add_grid,
    add_hardware,
    add_json,
    add_out,
    add_set,
    check_out_dir,
    scenario_overrides,
)
from .emit import emit_json

HELP = "simulate a grid of scenario overrides (local processes or a dask cluster); resumable"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help=HELP, description=HELP)
    p.add_argument("scenario", help="scenario YAML")
    add_grid(p, "values of one key (parsed as YAML; commas inside {} or [] do not split); "
                "repeatable: the product is swept")
    add_set(p, "override a scenario value for every point; repeatable")
    add_hardware(p, help=SCENARIO_HARDWARE_HELP)
    p.add_argument("--baseline", action="store_true", help="also run each point with speculation off (speedup_* keys)")
    add_out(p, "out/sweep", "folder for points.jsonl (the resumable store) and sweep.csv")
    add_executor(p)
    p.add_argument("--retry-errors", action="store_true", help="recompute points whose stored record is an error")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..studies.sweep import sweep

    t0 = time.perf_counter()
    out = check_out_dir(args.out)            # before any point runs
    store = out / "points.jsonl"
    res = sweep(args.scenario, args.grid, overrides=scenario_overrides(args), baseline=args.baseline, store=store,
                workers=args.workers, dask=args.dask, retry_errors=args.retry_errors, progress=not args.no_progress)
    df = res.frame
    csv = write_csv(df, out / "sweep.csv")
    n_new, n_err, n = res.computed, res.errors, len(res.records)
    elapsed = time.perf_counter() - t0
    if args.json:
        emit_json({**res.to_dict(), "store": str(store), "csv": str(csv), "elapsed_s": round(elapsed, 2)})
        return 1 if n_err else 0
    keys = list(res.points[0])
    show = [c for c in ("output_tokens_per_s", "speedup_output_tokens_per_s", "tpot_ms_p50", "tpot_ms_p99",
                        "ttft_ms_p99")
            if df[c].notna().any()]
    width = {k: max(12, len(k) + 2) for k in keys}
    labels = (s.replace("_ms_", " ").replace("output_tokens_per_s", "tok/s") for s in show)
    head = "".join(f"{k:>{width[k]}}" for k in keys) + "".join(f"{c:>16}" for c in labels)
    print(head)
    for _, r in df.iterrows():
        cells = "".join(f"{str(r[k])[:width[k] - 1]:>{width[k]}}" for k in keys)
        if r["error"]:
            print(cells + f"  error: {r['error'][:100]}")
        else:
            print(cells + "".join(f"{r[c]:>16.4g}" for c in show))
    print(f"{n} points: {n_new} simulated, {n - n_new} from the store, {n_err} failed; "
          f"{elapsed:.1f} s", file=sys.stderr)
    print(f"wrote {csv} (store: {store})", file=sys.stderr)
    return 1 if n_err else 0        # (the finished points are kept either way)
