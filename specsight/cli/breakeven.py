"""`specsight breakeven SCENARIO.yaml --axis {batch,qps,context,alpha,k,drafter} [--values ...] [--k 1,2,3]`
and `specsight breakeven --analytic --model M --hardware H --drafter D --alpha A`.

The simulated study (specsight.studies.breakeven.study) sweeps one axis of a scenario and finds where
speculation stops paying (speedup crosses 1), one curve per static K (`--k`) or policy
(`--policies goodput,adaptive,batch_schedule`); `--grid KEY.PATH=V1,V2` runs it at each point of
a grid of scenario overrides. The analytic one (specsight.studies.breakeven.analytic) sweeps batch size
with the cost model alone. Writes the CSV and plots under --out.
"""
from __future__ import annotations

import argparse
import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from simulator.common.errors import SpecsightInputError

from ..studies.breakeven.axes import AXES, DEFAULT_VALUES, REQUESTS_PER_USER
from ..studies.breakeven.capacity import CAPACITY_AXES, QUICK_TOLERANCE
from ..studies.breakeven.crossings import CAPACITY, METRIC_LABELS, METRICS, as_number
from ..studies.breakeven.drafters import DRAFTER, VALUE_FORM
from ..studies.plan.study import TOLERANCE
from ..studies.published.answer_intervals import format_interval, group_note, scenario_group
from .args import GRID_HELP, add_executor, add_grid, add_hardware, add_json, add_k, add_out, add_set, grid_cases
from .breakeven_text import MARKS, capacity_lines, format_text, range_text, simulated_line
from .emit import emit_json

if TYPE_CHECKING:
    from ..studies.breakeven.engines import EngineBreakevenResult

HELP = "where speculation turns net-negative: sweep an axis, find speedup = 1"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("breakeven", help=HELP, description=HELP)
    p.add_argument("scenario", nargs="?", help="scenario YAML (omit with --analytic)")
    add_k(p, "1,2,3,4", "K values, one curve each")
    add_out(p, "out/breakeven", "output folder for CSV and PNG")
    add_json(p)
    p.add_argument("--analytic", action="store_true",
                   help="closed-form cost-model sweep over batch size (no simulation)")
    p.add_argument("--model")
    add_hardware(p, help="hardware profile: with --analytic, the GPU costed; "
                         "with a scenario, sets its hardware.profile")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--drafter", help="method (eagle3), method:model (draft_model:llama-3.2-1b) or a catalog name")
    p.add_argument("--alpha", type=float)
    p.add_argument("--context", type=float, default=1024)
    p.add_argument("--axis", choices=[*AXES, DRAFTER], default="batch",
                   help="what to sweep (default batch; drafter: with --metric capacity)")
    p.add_argument("--values", help="comma-separated axis values (defaults: batch " + DEFAULT_VALUES["batch"]
                   + "; context " + DEFAULT_VALUES["context"] + "; alpha " + DEFAULT_VALUES["alpha"]
                   + "; k " + DEFAULT_VALUES["k"] + "; qps: the scenario's rate x 1/4 .. x 4; drafter: no default, "
                   + VALUE_FORM + ")")
    p.add_argument("--policies", default="static",
                   help="comma-separated curves besides/instead of static K: static,goodput,adaptive,batch_schedule, "
                        "and the engines' own vllm_dynamic,sglang_adaptive,trtllm_schedule (each under its engine)")
    p.add_argument("--engines", help="comma-separated engines (ideal,vllm,sglang,trtllm): the study under each, "
                   "one plot; an engine not priced in this version is reported and left out")
    p.add_argument("--axis2", choices=AXES, help="second axis: a heatmap of speedup over both axes")
    p.add_argument("--values2", help="comma-separated values of --axis2")
    p.add_argument("--metric", choices=sorted([*METRICS, CAPACITY]), help="speedup metric (default: throughput for "
                   "closed-loop load, tpot_p50 for open-loop); capacity: the highest Poisson rate per GPU within the "
                   "scenario's SLO at each point (axes " + ", ".join(CAPACITY_AXES) + ")")
    p.add_argument("--tolerance", type=float, help=f"relative bracket of a capacity search (--metric capacity: "
                   f"default {TOLERANCE}; the qps axis's capacity line: default {QUICK_TOLERANCE})")
    p.add_argument("--no-capacity", action="store_true",
                   help="qps axis: skip the capacity search beside the speedups (run when the scenario has an SLO)")
    add_set(p, "override a scenario value first (parsed as YAML); repeatable")
    add_grid(p, GRID_HELP)
    p.add_argument("--requests-per-user", type=int, default=REQUESTS_PER_USER,
                   help=f"batch axis: requests per closed-loop user (default {REQUESTS_PER_USER}, at least 24 in all)")
    add_executor(p)
    p.add_argument("--no-plot", action="store_true", help="write the CSV only (no PNGs)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return run_analytic(args) if args.analytic else run_simulated(args)


def run_simulated(args: argparse.Namespace) -> int:
    from ..studies.breakeven.study import breakeven

    if not args.scenario:
        raise SpecsightInputError("scenario", None,
                                  "name a scenario YAML (or pass --analytic with --model/--hardware/--drafter/--alpha)")
    answers = []
    for point, overrides, out_dir in grid_cases(args):
        t0 = time.perf_counter()
        res = breakeven(args.scenario, args.axis, args.values or None, args.k, args.policies, axis2=args.axis2,
                        values2=args.values2 or None, metric=args.metric, requests_per_user=args.requests_per_user,
                        overrides=overrides, store=out_dir / "points.jsonl", workers=args.workers, dask=args.dask,
                        progress=not args.no_progress, engines=args.engines,
                        capacity=False if args.no_capacity else None, tolerance=args.tolerance)
        if args.engines and not res.ran:          # type: ignore[union-attr]
            raise SpecsightInputError("--engines", args.engines, "no engine ran: " + "; ".join(res.skipped))  # type: ignore[union-attr]
        failed = res.frame["error"] != ""
        if len(failed) and failed.all():          # nothing to plot: say why, in one line
            raise SpecsightInputError("scenario", args.scenario,
                                      f"every point failed, e.g. {res.frame['error'].iloc[0]}")
        files = res.write(out_dir, plot=not args.no_plot)
        files["store"] = str(out_dir / "points.jsonl")
        elapsed = time.perf_counter() - t0
        if args.json:
            answers.append({**({"point": point} if point is not None else {}), **res.to_dict(),
                            "elapsed_s": round(elapsed, 2), "files": files})
        else:
            if point is not None:
                from ..studies.shared.overrides import point_label
                print(f"== {point_label(point)}")
            print(format_engines_text(res, files, elapsed) if args.engines  # type: ignore[arg-type]
                  else format_text(res, files, elapsed))  # type: ignore[arg-type]
    if args.json:
        emit_json(answers[0] if not args.grid else {"grid": answers})
    return 0


def run_analytic(args: argparse.Namespace) -> int:
    from ..studies.breakeven.analytic import analytic_breakeven

    for flag, v in (("--model", args.model), ("--hardware", args.hardware), ("--drafter", args.drafter),
                    ("--alpha", args.alpha)):
        if v is None:
            raise SpecsightInputError(flag, None, "required with --analytic")
    if args.grid:
        raise SpecsightInputError("--grid", args.grid[0], "applies to a scenario, not to --analytic")
    res = analytic_breakeven(args.model, args.hardware, args.drafter, args.alpha, args.k, context=args.context,
                             tp=args.tp, dtype=args.dtype)
    files = res.write(args.out)
    summary = {**res.to_dict(), **files}
    if args.json:
        emit_json(summary)
        return 0
    print(f"{summary['hardware_profile']}")
    print(f"{'K':>3}{'speedup@B=1':>14}{'break-even batch':>19}{'max batch in KV memory':>24}")
    for k, be in res.results.items():
        b = "never pays" if be.never_pays else (
            "beyond range" if be.breakeven_batch is None else f"{be.breakeven_batch:.1f}")
        print(f"{k:>3}{be.speedup_at_batch1:>14.3f}{b:>19}{res.max_batch_in_memory[k]:>24.0f}")
    print(f"wrote {files['csv']} and {files['png']}")
    return 0


def _way(cr: list) -> str:
    return {"down": "falls below 1", "up": "rises above 1"}[cr[0]["direction"]] if cr else ""


def format_engines_text(res: EngineBreakevenResult, files: Mapping[str, str], elapsed: float) -> str:
    """The speedup of every engine's lines per point (the best static K's curve in brackets), each
    line's break-even, what did not run, and what was written."""
    axis, meta, lines = res.axis, res.meta, res.lines
    out = [f"{meta['scenario']}: {meta['deployment']}, drafter {meta['drafter']}",
           f"speedup metric: {METRIC_LABELS[res.metric]}", f"engines: {', '.join(res.ran) or 'none ran'}"]
    cols = list(dict.fromkeys(zip(lines["engine"], lines["line"])))
    names = [f"{e}: {ln}" for e, ln in cols]
    width = [max(18 if e == "ideal" else 30, len(n) + 2) for n, (e, _) in zip(names, cols)]
    achieved = {e: r.frame.groupby("batch", sort=True)["base_mean_batch"].first()
                for e, r in res.results.items() if axis == "batch" and "base_mean_batch" in r.frame}
    if cols:
        aw = {e: max(12, len(e) + 13) for e in achieved}
        out.append(f"{axis:>10}" + "".join(f"{'achieved B ' + e:>{aw[e]}}" for e in achieved)
                   + "".join(f"{n:>{w}}" for n, w in zip(names, width)))
        for v, g in lines.groupby(axis, sort=True):
            cells = []
            for e, ran in achieved.items():
                b = float(ran.get(v, math.nan))
                cells.append(f"{b:>{aw[e]}.1f}" if math.isfinite(b) else f"{'-':>{aw[e]}}")
            for (e, ln), w in zip(cols, width):
                r = g[(g["engine"] == e) & (g["line"] == ln)]
                s = float(r["speedup"].iloc[0]) if len(r) else math.nan
                txt = f"{s:.3f}" if math.isfinite(s) else "-"
                band = format_interval(r["speedup_interval"].iloc[0]) if len(r) else ""
                txt += f" {band}" if band else ""
                if len(r) and ln != r["curve"].iloc[0] and r["curve"].iloc[0]:
                    txt += f" ({r['curve'].iloc[0]})"
                flags = ("S" if len(r) and r["saturated"].iloc[0] else "") + \
                    ("M" if len(r) and r["kv_limited"].iloc[0] else "")
                txt += f" {flags}" if flags else ""
                cells.append(f"{txt:>{w}}")
            out.append(f"{as_number(v)!s:>10}" + "".join(cells))
    grid = [float(v) for v in res.values]
    for e, per_line in res.verdict.items():
        for ln, v in per_line.items():
            b, cr = v["breakeven"], v["crossings"]
            past = " past saturation" if cr and cr[0].get("saturated") else ""
            out.append(f"  break-even {e + ': ' + ln:<28} "
                       + (f"{axis} = {b:.4g} (speedup {_way(cr)}{past})" if b is not None else str(v["status"]))
                       + range_text(v.get("breakeven_interval"), cr, v["status"], axis, grid))
    if achieved:
        out.append(f"  {axis}: the closed-loop users asked for, what each break-even is against; achieved B <engine>: "
                   "the mean batch plain decoding ran under that engine (its scheduler, prefill and KV cache can keep "
                   "it lower)")
    for e, cap in res.capacity.items():
        labels = list(dict.fromkeys(res.results[e].frame["curve"]))
        out += [f"  {e}: {line}" for line in capacity_lines(cap, labels)]
    marks = [MARKS[m] for m, col in (("S", "saturated"), ("M", "kv_limited")) if lines[col].astype(bool).any()]
    out += marks + list(res.skipped)
    out += list(dict.fromkeys(group_note(*scenario_group(r.source)) for r in res.results.values()))
    errs = res.frame[res.frame["error"] != ""] if "error" in res.frame else res.frame.iloc[0:0]
    if len(errs):
        out.append(f"{len(errs)} point(s) failed, e.g. {errs['error'].iloc[0]}")
    out.append(simulated_line(res.points_simulated, res.points_total, elapsed))
    out += [f"wrote {p}" for p in files.values()]
    return "\n".join(out)
