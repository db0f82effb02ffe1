"""`specsight sweep SCENARIO.yaml --grid key.path=v1,v2,... [--grid ...] [--out DIR] [--dask ADDRESS] [--workers N]`

Simulates the cartesian product of the grids (each value parsed as YAML), on a local process
pool or on a dask.distributed cluster. Every finished point is appended to DIR/points.jsonl at
once, keyed by a hash of the scenario, the point's overrides and the simulator's code and data,
so rerunning the same command after an interruption computes only the missing points; a point
that fails records its error and the sweep goes on. DIR/sweep.csv gets one row per point.

A cluster: `dask scheduler` on one machine (it listens on tcp://HOST:8786), `dask worker
tcp://HOST:8786` on each machine (with this repository installed), then
`specsight sweep ... --dask tcp://HOST:8786`.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from simulator.errors import SpecsightInputError

from .sweep import default_workers, open_executor, parse_grid, run_points, scenario_source

HELP = "simulate a grid of scenario overrides (local processes or a dask cluster); resumable"
COLUMNS = ("output_tokens_per_s", "speedup_output_tokens_per_s", "tpot_ms_p50", "tpot_ms_p99", "ttft_ms_p99",
           "goodput_requests_per_s", "slo_attainment", "mean_tokens_per_round", "mean_batch")


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("sweep", help=HELP, description=HELP)
    p.add_argument("scenario", help="scenario YAML")
    p.add_argument("--grid", action="append", default=[], metavar="KEY.PATH=V1,V2,...",
                   help="values of one key (parsed as YAML; commas inside {} or [] do not split); repeatable: the product is swept")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a scenario value for every point; repeatable")
    p.add_argument("--baseline", action="store_true", help="also run each point with speculation off (speedup_* keys)")
    p.add_argument("--out", default="out/sweep", help="folder for points.jsonl (the resumable store) and sweep.csv")
    p.add_argument("--workers", type=int, help="local processes (default: CPU count; 1 = in this process)")
    p.add_argument("--dask", metavar="ADDRESS", help="dask.distributed scheduler address, e.g. tcp://host:8786")
    p.add_argument("--retry-errors", action="store_true", help="recompute points whose stored record is an error")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)
    return p


def grid_points(grids: list[str]) -> list[dict[str, Any]]:
    """The cartesian product of `key=v1,v2` specs as a list of {key: value} mappings."""
    if not grids:
        raise SpecsightInputError("--grid", None, "at least one, e.g. --grid drafter.num_speculative_tokens=1,2,3")
    parsed = [parse_grid(g) for g in grids]
    keys = [k for k, _ in parsed]
    dup = {k for k in keys if keys.count(k) > 1}
    if dup:
        raise SpecsightInputError("--grid", sorted(dup)[0], "each key once (list all its values in one --grid)")
    return [dict(zip(keys, combo)) for combo in itertools.product(*(v for _, v in parsed))]


def records_frame(records: list[dict[str, Any]]):
    import pandas as pd
    rows = []
    for r in records:
        row: dict[str, Any] = {k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in r["overrides"].items()}
        s = r["summary"] or {}
        for c in COLUMNS:
            row[c] = s.get(c, math.nan) if s.get(c) is not None else math.nan
        row.update(error=r["error"] or "", elapsed_s=r["elapsed_s"], cached=r["cached"], key=r["key"])
        rows.append(row)
    return pd.DataFrame(rows)


def run(args: argparse.Namespace) -> int:
    from .foundation_cmds import emit_json
    from .sweep import json_safe

    t0 = time.perf_counter()
    source = scenario_source(args.scenario, args.overrides)
    points = grid_points(args.grid)
    out = Path(args.out)
    store = out / "points.jsonl"
    workers = args.workers if args.workers is not None else default_workers(len(points))
    with open_executor(workers, args.dask) as ex:
        recs = run_points(source, points, store, ex, baseline=args.baseline, progress=not args.no_progress,
                          desc="sweep", retry_errors=args.retry_errors)
    df = records_frame(recs)
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "sweep.csv"
    df.to_csv(csv, index=False)
    n_new = int((~df["cached"]).sum())
    n_err = int((df["error"] != "").sum())
    elapsed = time.perf_counter() - t0
    if args.json:
        emit_json(json_safe({"scenario": source.get("name"), "points": [
            {"key": r["key"], "overrides": r["overrides"], "summary": r["summary"], "error": r["error"],
             "cached": r["cached"]} for r in recs],
            "computed": n_new, "from_store": len(recs) - n_new, "errors": n_err, "store": str(store), "csv": str(csv),
            "elapsed_s": round(elapsed, 2)}))
        return 1 if n_err else 0
    keys = list(points[0])
    show = [c for c in ("output_tokens_per_s", "speedup_output_tokens_per_s", "tpot_ms_p50", "tpot_ms_p99", "ttft_ms_p99")
            if df[c].notna().any()]
    width = {k: max(12, len(k) + 2) for k in keys}
    head = "".join(f"{k:>{width[k]}}" for k in keys) + "".join(f"{c:>16}" for c in (s.replace("_ms_", " ").replace("output_tokens_per_s", "tok/s") for s in show))
    print(head)
    for _, r in df.iterrows():
        cells = "".join(f"{str(r[k])[:width[k] - 1]:>{width[k]}}" for k in keys)
        if r["error"]:
            print(cells + f"  error: {r['error'][:100]}")
        else:
            print(cells + "".join(f"{r[c]:>16.4g}" for c in show))
    print(f"{len(recs)} points: {n_new} simulated, {len(recs) - n_new} from the store, {n_err} failed; "
          f"{elapsed:.1f} s", file=sys.stderr)
    print(f"wrote {csv} (store: {store})", file=sys.stderr)
    return 1 if n_err else 0        # (the finished points are kept either way)
