"""`specsight breakeven SCENARIO.yaml --axis {batch,qps,context,alpha,k} [--values ...] [--k 1,2,3]`
and `specsight breakeven --analytic --model M --hardware H --drafter D --alpha A`.

The simulated study (specsight.studies.breakeven) sweeps one axis of a scenario and finds where
speculation stops paying (speedup crosses 1), one curve per static K (`--k`) or policy
(`--policies goodput,adaptive,batch_schedule`); `--grid KEY.PATH=V1,V2` runs it at each point of
a grid of scenario overrides. The analytic one (specsight.studies.analytic) sweeps batch size
with the cost model alone. Writes the CSV and plots under --out.
"""
from __future__ import annotations

import argparse
import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from simulator.errors import SpecsightInputError

from ..studies.breakeven_axes import ANALYTIC_AXES, AXES, DEFAULT_VALUES, REQUESTS_PER_USER
from ..studies.crossings import METRIC_LABELS, METRICS, as_number
from .args import GRID_HELP, add_executor, add_grid, add_hardware, add_json, add_k, add_out, add_set, grid_cases
from .emit import emit_json

if TYPE_CHECKING:
    from ..studies.breakeven import BreakevenResult
    from ..studies.breakeven_engines import EngineBreakevenResult

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
    p.add_argument("--axis", choices=AXES, default="batch", help="what to sweep (default batch)")
    p.add_argument("--values", help="comma-separated axis values (defaults: batch " + DEFAULT_VALUES["batch"]
                   + "; context " + DEFAULT_VALUES["context"] + "; alpha " + DEFAULT_VALUES["alpha"]
                   + "; k " + DEFAULT_VALUES["k"] + "; qps: the scenario's rate x 1/4 .. x 4)")
    p.add_argument("--policies", default="static",
                   help="comma-separated curves besides/instead of static K: static,goodput,adaptive,batch_schedule, "
                        "and the engines' own vllm_dynamic,sglang_adaptive,trtllm_schedule (each under its engine)")
    p.add_argument("--engines", help="comma-separated engines (ideal,vllm,sglang,trtllm): the study under each, "
                   "one plot; an engine not priced in this version is reported and left out")
    p.add_argument("--axis2", choices=AXES, help="second axis: a heatmap of speedup over both axes")
    p.add_argument("--values2", help="comma-separated values of --axis2")
    p.add_argument("--metric", choices=sorted(METRICS), help="speedup metric (default: throughput for "
                   "closed-loop load, tpot_p50 for open-loop)")
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
    from ..studies.breakeven import breakeven

    if not args.scenario:
        raise SpecsightInputError("scenario", None,
                                  "name a scenario YAML (or pass --analytic with --model/--hardware/--drafter/--alpha)")
    answers = []
    for point, overrides, out_dir in grid_cases(args):
        t0 = time.perf_counter()
        res = breakeven(args.scenario, args.axis, args.values or None, args.k, args.policies, axis2=args.axis2,
                        values2=args.values2 or None, metric=args.metric, requests_per_user=args.requests_per_user,
                        overrides=overrides, store=out_dir / "points.jsonl", workers=args.workers, dask=args.dask,
                        progress=not args.no_progress, engines=args.engines)
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
                from ..studies.overrides import point_label
                print(f"== {point_label(point)}")
            print(format_engines_text(res, files, elapsed) if args.engines  # type: ignore[arg-type]
                  else format_text(res, files, elapsed))  # type: ignore[arg-type]
    if args.json:
        emit_json(answers[0] if not args.grid else {"grid": answers})
    return 0


def run_analytic(args: argparse.Namespace) -> int:
    from ..studies.analytic import analytic_breakeven

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


def format_text(res: BreakevenResult, files: Mapping[str, str], elapsed: float) -> str:
    """The study as a table per --axis2 value, the break-even per curve, and what was written."""
    axis, axis2 = res.axis, res.axis2
    df, summ, meta = res.frame, res.verdict, res.meta
    lines = [f"{meta['scenario']}: {meta['deployment']}, drafter {meta['drafter']}",
             f"speedup metric: {METRIC_LABELS[df['metric'].iloc[0]]}" if len(df) else ""]
    if res.schedule:
        lines.append(f"batch_schedule (derived from the analytic best K): {res.schedule}")
    labels = list(dict.fromkeys(df["curve"]))
    blocks = [(None, df)] if axis2 is None else [(v2, g) for v2, g in df.groupby(axis2, sort=True)]
    for v2, sub in blocks:
        if v2 is not None:
            lines.append(f"-- {axis2} = {as_number(v2)}")
        width = {lab: max(16, len(lab) + 2) for lab in labels}
        hdr = f"{axis:>10}" + "".join(f"{lab:>{width[lab]}}" for lab in labels) + f"{'best K':>8}"
        lines.append(hdr)
        bk = summ.best_k if axis2 is None else summ.best_k.get(f"{axis2}={as_number(v2)}", {})
        for v, g in sub.groupby(axis, sort=True):
            cells = []
            for lab in labels:
                r = g[g["curve"] == lab]
                s = float(r["speedup"].iloc[0]) if len(r) else math.nan
                a = float(r["analytic_speedup"].iloc[0]) if len(r) else math.nan
                txt = "error" if len(r) and r["error"].iloc[0] else (f"{s:.3f}" if math.isfinite(s) else "-")
                if math.isfinite(a):
                    txt += f" ({a:.2f})"
                cells.append(f"{txt:>{width[lab]}}")
            lines.append(f"{as_number(v)!s:>10}" + "".join(cells) + f"{str(bk.get(str(as_number(v)), '-')):>8}")
        be = summ.breakeven if axis2 is None else summ.breakeven.get(f"{axis2}={as_number(v2)}", {})
        st = summ.status if axis2 is None else summ.status.get(f"{axis2}={as_number(v2)}", {})
        cr = summ.crossings if axis2 is None else summ.crossings.get(f"{axis2}={as_number(v2)}", {})
        for lab in labels:
            b = be.get(lab)
            way = {"down": "falls below 1", "up": "rises above 1"}[cr[lab][0]["direction"]] if cr.get(lab) else ""
            lines.append(f"  break-even {lab:<22} "
                         + (f"{axis} = {b:.4g} (speedup {way})" if b is not None else st.get(lab, "")))
    if axis in ANALYTIC_AXES and df["analytic_speedup"].notna().any():
        lines.append("(parenthesised: the analytic model at the same point)")
    errs = df[df["error"] != ""]
    if len(errs):
        lines.append(f"{len(errs)} point(s) failed, e.g. {errs['error'].iloc[0]}")
    lines.append(_simulated_line(res.points_simulated, res.points_total, elapsed))
    lines += [f"wrote {p}" for p in files.values()]
    return "\n".join(x for x in lines if x)


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
    width = [max(18, len(n) + 2) for n in names]
    if cols:
        out.append(f"{axis:>10}" + "".join(f"{n:>{w}}" for n, w in zip(names, width)))
        for v, g in lines.groupby(axis, sort=True):
            cells = []
            for (e, ln), w in zip(cols, width):
                r = g[(g["engine"] == e) & (g["line"] == ln)]
                s = float(r["speedup"].iloc[0]) if len(r) else math.nan
                txt = f"{s:.3f}" if math.isfinite(s) else "-"
                if len(r) and ln != r["curve"].iloc[0] and r["curve"].iloc[0]:
                    txt += f" ({r['curve'].iloc[0]})"
                cells.append(f"{txt:>{w}}")
            out.append(f"{as_number(v)!s:>10}" + "".join(cells))
    for e, per_line in res.verdict.items():
        for ln, v in per_line.items():
            b = v["breakeven"]
            out.append(f"  break-even {e + ': ' + ln:<28} "
                       + (f"{axis} = {b:.4g} (speedup {_way(v['crossings'])})" if b is not None else v["status"]))
    out += list(res.skipped)
    errs = res.frame[res.frame["error"] != ""] if "error" in res.frame else res.frame.iloc[0:0]
    if len(errs):
        out.append(f"{len(errs)} point(s) failed, e.g. {errs['error'].iloc[0]}")
    out.append(_simulated_line(res.points_simulated, res.points_total, elapsed))
    out += [f"wrote {p}" for p in files.values()]
    return "\n".join(out)


def _simulated_line(simulated: int, total: int, elapsed_s: float) -> str:
    from_store = f" ({total - simulated} from the store)" if simulated < total else ""
    return f"simulated {simulated} of {total} points{from_store} in {elapsed_s:.1f} s"
