"""Speedup against an axis, one line per value of a column, each curve's crossing of speedup 1
marked (the analytic break-even, specsight/studies/breakeven/analytic.py)."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from .breakeven_marks import place_marks_and_save
from .figure_file import plt
from .plot_axes import label_axes, log_label


def plot_speedup_curves(df: pd.DataFrame, *, x: str, curve: str, y: str, breakeven: Mapping[str, float | None],
                        title: str, xlabel: str, path: str | Path, logx: bool = False,
                        overlay: pd.DataFrame | None = None, ylabel: str = "speedup over plain decoding (x)",
                        vlines: Mapping[str, float] | None = None) -> Path:
    """One line per value of `curve`; a dashed line at speedup 1; a marker where each curve crosses it.

    `overlay` (same columns) is drawn dotted, e.g. the analytic model beside the simulation."""
    fig, ax = plt.subplots(figsize=(10.5, 5.2), dpi=110)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    marks: list[tuple[float, str]] = []
    for i, (name, g) in enumerate(df.groupby(curve, sort=True)):
        label = f"{curve.upper() if len(curve) == 1 else curve}={name}"
        g = g.sort_values(x)
        c = colors[i % len(colors)]
        be = breakeven.get(label)
        ax.plot(g[x], g[y], marker="o", ms=3, lw=1.8, color=c,
                label=label + (f": speedup 1 at {be:.3g}" if be is not None else ""))
        if overlay is not None and name in set(overlay[curve]):
            o = overlay[overlay[curve] == name].sort_values(x)
            ax.plot(o[x], o[y], ls=":", lw=1.5, color=c, label=f"{label} (analytic)")
        if be is not None:
            ax.axvline(be, color=c, ls="--", lw=0.8, alpha=0.7)
            ax.plot([be], [1.0], marker="X", ms=10, color=c, zorder=5)
            marks.append((be, c))
    ax.axhline(1.0, color="black", lw=1.0, ls="--", label="break-even (speedup 1)")
    if logx:                         # (2^k tick labels here, unlike log2_axis's plain numbers)
        ax.set_xscale("log", base=2)
    for name, xv in (vlines or {}).items():
        if xv is not None and xv > 0:
            left, right = ax.get_xlim()
            ax.axvline(xv, color="grey", lw=2.0, ls="-.", alpha=0.6, label=f"{name} ({xv:.0f})")
            if xv < right:           # the batches past the limit: they do not fit, whatever they would pay
                ax.axvspan(max(xv, left), right, facecolor="grey", alpha=0.15, hatch="xx", edgecolor="grey", lw=0,
                           zorder=0, label=f"beyond the {name}: does not fit")
            ax.set_xlim(left, right)
    label_axes(ax, log_label(xlabel) if logx else xlabel, ylabel, title, logx=False)
    return place_marks_and_save(fig, ax, path, marks)
