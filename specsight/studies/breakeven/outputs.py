"""A break-even study's files: the CSV of its rows (an interval as `speedup_low`, `speedup_high`)
and its plots (speedup against the axis with break-even marked, its interval shaded, the analytic
model dotted, saturated and KV-limited points hollow in a
shaded band, or a heatmap over two axes; TPOT against throughput with and without speculation)."""
from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.common.atomic_files import write_csv

from ..published.answer_intervals import csv_frame
from .axes import ANALYTIC_AXES, AXIS_LABELS, CAPACITY_AXIS_LABELS, LOG_AXES
from .crossings import CAPACITY, METRIC_LABELS
from .drafters import DRAFTER, plot_drafters

LOAD_AXES = ("batch", "qps", "context")     # axes along which a latency-throughput curve is a load curve

if TYPE_CHECKING:
    import pandas as pd

    from .curves import BreakevenResult


def _legend_note(breakeven: Mapping[str, Any], analytic: pd.DataFrame | None) -> str:
    """' (X = break-even, dotted = analytic model)', naming only the marks the plot draws."""
    parts = (["X = break-even"] if any(v is not None for v in breakeven.values()) else []) \
        + (["dotted = analytic model"] if analytic is not None and len(analytic) else [])
    return f" ({', '.join(parts)})" if parts else ""


def write_outputs(res: BreakevenResult, out_dir: Path, plot: bool = True) -> dict[str, str]:
    """breakeven_<axis>[_<axis2>].csv and, with `plot`, the PNGs; returns {kind: path}."""
    from ..shared.best_speedup_plot import plot_best_speedup_lines, plot_speedup_heatmap
    from ..shared.breakeven_plot import plot_breakeven
    from ..shared.latency_plot import plot_latency_throughput

    axis, axis2, df, meta = res.axis, res.axis2, res.frame, res.meta
    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    stem = f"breakeven_{axis}" + (f"_{axis2}" if axis2 else "")
    csv = write_csv(csv_frame(df), out_dir / f"{stem}.csv")
    files["csv"] = str(csv)
    if not plot:
        return files
    summ = res.verdict
    ylabel = f"speedup over plain decoding ({METRIC_LABELS[res.metric]})"
    head = f"{meta['scenario']}: {meta['deployment']}, drafter {meta['drafter']}"
    capacity = res.metric == CAPACITY
    if axis == DRAFTER:
        png = plot_drafters(df, f"{head}\ncapacity within the SLO at each drafter (bars: speedup over plain)",
                            "max Poisson requests/s per GPU within the SLO", out_dir / f"{stem}.png")
        files["plot"] = str(png)
    elif axis2 is None:
        dense = dense_analytic(res)
        what = "capacity speedup (SLO-bound Poisson rate per GPU)" if capacity else "simulated speedup"
        png = plot_breakeven(
            df, x=axis, breakeven=summ.breakeven, analytic=dense,
            title=f"{head}\n{what} vs {axis}" + _legend_note(summ.breakeven, dense),
            xlabel=(CAPACITY_AXIS_LABELS if capacity else {}).get(axis, AXIS_LABELS[axis]), ylabel=ylabel,
            path=out_dir / f"{stem}.png", logx=axis in LOG_AXES,
            capacity=capacity_at(res.capacity, int((res.source.get("hardware") or {}).get("replicas") or 1)),
            ran=ran_batch(res))
        files["plot"] = str(png)
    else:
        best = df.groupby([axis, axis2], sort=True).apply(_best_row, include_groups=False).reset_index()
        png = plot_speedup_heatmap(
            best, x=axis, y=axis2,
            title=f"{head}\nbest simulated speedup over {axis} x {axis2} (cell: speedup, best curve)",
            xlabel=AXIS_LABELS[axis], ylabel=AXIS_LABELS[axis2], path=out_dir / f"{stem}_heatmap.png",
            colorbar_label=ylabel)
        files["heatmap"] = str(png)
        png = plot_best_speedup_lines(
            best, x=axis, group=axis2, title=f"{head}\nbest speedup over the curves vs {axis}, one line per {axis2}",
            xlabel=AXIS_LABELS[axis], ylabel=ylabel, path=out_dir / f"{stem}.png", logx=axis in LOG_AXES)
        files["plot"] = str(png)
    if axis2 is None and not capacity and axis in LOAD_AXES:    # along K or alpha plain decoding stands still
        slo = res.source.get("slo") or {}
        png = plot_latency_throughput(
            df, x_axis=axis,
            title=f"{head}\nlatency vs output throughput, with and without speculation (points: {axis} values)",
            path=out_dir / f"latency_throughput_{axis}.png",
            slo_tpot_ms_p99=slo.get("tpot_ms_p99"), slo_ttft_ms_p99=slo.get("ttft_ms_p99"))
        files["latency_plot"] = str(png)
    return files


def ran_batch(res: BreakevenResult) -> dict[float, float] | None:
    """Batch axis (not capacity): each batch asked for -> the mean batch plain decoding ran there."""
    df = res.frame
    if res.axis != "batch" or res.metric == CAPACITY or "base_mean_batch" not in df or not len(df):
        return None
    return {float(b): float(g["base_mean_batch"].iloc[0]) for b, g in df.groupby("batch", sort=True)}


def capacity_at(capacity: Mapping[str, Any] | None, replicas: int) -> dict[str, float | None] | None:
    """curve_capacities' answer as label -> requests/s on the qps axis (the scenario's replicas
    times one replica's capacity); None when there is none."""
    if not capacity:
        return None
    return {lab: (c["capacity_qps_per_replica"] * replicas if c["capacity_qps_per_replica"] else None)
            for lab, c in capacity["capacities"].items()}


def _best_row(g: pd.DataFrame) -> pd.Series:
    """The best curve of one cell, and its S (saturated) / M (KV-limited) marks."""
    import pandas as pd
    flags = "".join(m for m, cols in (("S", ["saturated", "base_saturated"]), ("M", ["kv_limited", "base_kv_limited"]))
                    if all(c in g for c in cols) and g[cols].astype(bool).to_numpy().any())
    g = g.dropna(subset=["speedup"])
    if not len(g):
        return pd.Series({"speedup": math.nan, "curve": "", "flags": flags})
    j = g["speedup"].idxmax()
    return pd.Series({"speedup": g.loc[j, "speedup"], "curve": g.loc[j, "curve"], "flags": flags})


def dense_analytic(res: BreakevenResult) -> pd.DataFrame | None:
    """Analytic curves on a fine grid through the simulated points (batch axis: each point priced
    by Analytic.point, the function that gives the rows' analytic_speedup, so the curve passes
    through every printed value) or at the simulated points themselves (context, alpha); None
    where the analytic model does not apply."""
    import pandas as pd
    an, axis, df = res.analytic, res.axis, res.frame
    if an is None or axis not in ANALYTIC_AXES:
        return None
    rows = []
    for c in res.curves:
        if c.k is None:
            continue
        if axis == "batch":
            xs = np.union1d(np.geomspace(max(1.0, float(df[axis].min())), float(df[axis].max()), 64),
                            df[axis].astype(float).to_numpy())
            rows += [{axis: float(x), "curve": c.label, "speedup": an.point({axis: float(x)}, c.k)} for x in xs]
        else:
            g = df[df["curve"] == c.label]
            rows += [{axis: float(x), "curve": c.label, "speedup": float(y)}
                     for x, y in zip(g[axis], g["analytic_speedup"])]
    return pd.DataFrame(rows) if rows else None
