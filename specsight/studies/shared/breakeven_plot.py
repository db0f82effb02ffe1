"""Break-even plots: simulated speedup against an axis, one curve per K or policy, the analytic
model dotted, an X where each curve crosses speedup 1, its interval shaded; one panel or several
(one per engine) under one title."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from .breakeven_marks import below_one, capacity_lines, flagged_rows, place_marks_and_save, ran_axis, saturation_bands
from .figure_file import plt
from .plot_axes import label_axes

if TYPE_CHECKING:
    from matplotlib.axes import Axes


@dataclass(frozen=True)
class BreakevenPanel:
    """One panel of a break-even plot: `df` (columns `x`, `curve`, `y`, and where they are marked
    saturated, base_saturated, kv_limited, base_kv_limited), each curve's first crossing of 1
    (`breakeven`, by curve label), the analytic model's curves (same columns) or None, and the
    capacity within the SLO (`capacity`: label -> requests/s on the x axis, plain decoding as
    "plain"; None where not searched); on the batch axis `ran`, each batch asked for -> the mean
    batch plain decoding ran there (a second axis along the top)."""
    df: pd.DataFrame
    breakeven: Mapping[str, float | None]
    title: str | None = None
    analytic: pd.DataFrame | None = None
    capacity: Mapping[str, float | None] | None = None
    ran: Mapping[float, float] | None = None


def plot_breakeven(df: pd.DataFrame, *, x: str, breakeven: Mapping[str, float | None], title: str, xlabel: str,
                   ylabel: str, path: str | Path, logx: bool = False, analytic: pd.DataFrame | None = None,
                   y: str = "speedup", curve: str = "curve", capacity: Mapping[str, float | None] | None = None,
                   ran: Mapping[float, float] | None = None) -> Path:
    """Simulated speedup against `x`, one line per `curve` label ("K=3", "policy=goodput"); the
    analytic model dotted in the same colour; X where each curve crosses 1; shading where
    speculation loses. Where `df` marks them (columns saturated, base_saturated, kv_limited,
    base_kv_limited), saturated or KV-limited points are hollow, and a grey band runs from the
    first point where plain decoding saturates (a hatched one from where it is KV-limited).
    `capacity` (qps axis): plain decoding's and the best curve's rate within the SLO as vertical
    lines; `ran` (batch axis): the batch plain decoding ran at each batch asked, along the top."""
    return plot_breakeven_panels([BreakevenPanel(df, breakeven, None, analytic, capacity, ran)], x=x, title=title,
                                 xlabel=xlabel, ylabel=ylabel, path=path, logx=logx, y=y, curve=curve)


def plot_breakeven_panels(panels: Sequence[BreakevenPanel], *, x: str, title: str, xlabel: str, ylabel: str,
                          path: str | Path, logx: bool = False, y: str = "speedup", curve: str = "curve") -> Path:
    """plot_breakeven's panel once per BreakevenPanel (one above the other, the same x and y
    scales, each with its own legend, bands and crossings; one colour per curve label across
    panels), under one title."""
    n = len(panels)
    fig, axes = plt.subplots(n, 1, figsize=(12, 5.4 if n == 1 else 4.3 * n), dpi=110, sharex=True, sharey=True,
                             squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    labels = list(dict.fromkeys(str(c) for p in panels for c in p.df[curve]))
    marks = []
    for ax, panel in zip(axes[:, 0], panels):
        marks.append(_draw_breakeven(ax, panel, x, y, curve, {lab: colors[i % len(colors)]
                                                              for i, lab in enumerate(labels)}))
    for ax, panel in zip(axes[:, 0], panels):
        below_one(ax)
        label_axes(ax, xlabel if ax is axes[-1, 0] else "", ylabel, panel.title or "", logx, ticks=panel.df[x])
        ax.tick_params(labelbottom=True)
    if n == 1:
        axes[0, 0].set_title(title, fontsize=10)
    else:
        fig.suptitle(title, fontsize=10)
    for ax, panel in zip(axes[:, 0], panels):
        if flagged_rows(panel.df) is not None:
            saturation_bands(ax, panel.df, x)
        capacity_lines(ax, panel.capacity, {lab: colors[i % len(colors)] for i, lab in enumerate(labels)})
        ran_axis(ax, panel.ran)
    return place_marks_and_save(fig, list(axes[:, 0]), path, marks)


BAND_LABEL = "shaded: 80 % interval (published residuals)"


def _interval_band(ax: Axes, g: pd.DataFrame, x: str, col: str, color: str) -> None:
    """A curve's interval (`col`: [low, high] per point) shaded in its colour; the legend names
    the first band drawn on the axes."""
    ok = [(float(xv), iv) for xv, iv in zip(g[x], g[col]) if isinstance(iv, (list, tuple)) and len(iv) == 2
          and all(v is not None for v in iv)]
    if not ok:
        return
    ax.fill_between([p[0] for p in ok], [float(p[1][0]) for p in ok], [float(p[1][1]) for p in ok], color=color,
                    alpha=0.15, lw=0, label=None if BAND_LABEL in ax.get_legend_handles_labels()[1] else BAND_LABEL)


def _draw_breakeven(ax: Axes, panel: BreakevenPanel, x: str, y: str, curve: str,
                    color_of: Mapping[str, str]) -> list[tuple[float, str]]:
    """One panel's curves, hollow points, analytic overlay and crossings; returns the crossings
    to label, (x, colour)."""
    df, analytic = panel.df, panel.analytic
    marks: list[tuple[float, str]] = []         # break-even labels, placed once the axes are final
    flagged = flagged_rows(df)
    drawn: dict[str, tuple[list[float], list[float]]] = {}
    for name, g in df.groupby(curve, sort=False):
        g = g.sort_values(x)
        c = color_of[str(name)]
        ls = "-" if str(name).startswith("K=") else "--"
        be = panel.breakeven.get(str(name))
        xy = (g[x].astype(float).tolist(), g[y].astype(float).tolist())
        twin = next((lab for lab, other in drawn.items() if other == xy), None)
        drawn[str(name)] = xy
        style = {"marker": "o", "ms": 4, "lw": 2.0, "ls": ls} if twin is None else \
            {"marker": "D", "ms": 8, "mfc": "none", "mew": 1.5, "lw": 1.2, "ls": ":"}  # on top of its twin, visibly
        ax.plot(g[x], g[y], color=c, **style,
                label=f"{name} (simulated)" + (f", the same as {twin}" if twin else "")
                + (f": speedup 1 at {be:.3g}" if be is not None else ""))
        if f"{y}_interval" in g:
            _interval_band(ax, g, x, f"{y}_interval", c)
        if flagged is not None and flagged[g.index].any():
            h = g[flagged[g.index]]
            ax.plot(h[x], h[y], ls="none", marker="o", ms=7, mfc="white", mec=c, mew=1.6, zorder=5)
        if analytic is not None and len(analytic) and name in set(analytic[curve]):
            o = analytic[analytic[curve] == name].sort_values(x)
            ax.plot(o[x], o[y], ls=":", lw=1.4, color=c, alpha=0.9, label=f"{name} (analytic)")
        if be is not None:
            ax.plot([be], [1.0], marker="X", ms=11, color=c, markeredgecolor="black", zorder=6)
            marks.append((be, c))
    return marks
