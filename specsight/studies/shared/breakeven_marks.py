"""What a speedup plot marks besides its curves: the line at speedup 1 and the shading below it,
each crossing labelled where it covers nothing, plain decoding's saturated and KV-limited bands,
the capacity within the SLO, and the batch plain decoding ran (a second axis along the top)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from .figure_file import save_figure
from .plot_axes import legend_outside
from .plot_labels import place_labels

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def place_marks_and_save(fig: Figure, axes: Axes | Sequence[Axes], path: str | Path,
                         marks: list[tuple[float, str]] | Sequence[list[tuple[float, str]]]) -> Path:
    """Legends outside, then each (x, colour) crossing labelled at speedup 1 where it covers
    nothing (plot_labels.py; the legend names every crossing too), then save. `axes` one axes and
    its marks, or a list of axes and a list of marks each."""
    many = isinstance(axes, Sequence)
    pairs = list(zip(axes, marks)) if many else [(axes, marks)]
    for ax, _ in pairs:
        legend_outside(ax)
    for ax, ms in pairs:
        for be, c in ms:
            place_labels(ax, [(be, 1.0)], [f"{be:.3g}"], color=c, fontsize=8, fontweight="bold")
    return save_figure(fig, path)


def ran_axis(ax: Axes, ran: Mapping[float, float] | None) -> None:
    """Along the top, at each batch asked for, the mean batch plain decoding ran there (its
    scheduler, KV cache and prefill can keep it below what was asked)."""
    import math
    if not ran:
        return
    from matplotlib.ticker import NullLocator
    pts = sorted((float(a), float(r)) for a, r in ran.items() if math.isfinite(float(r)))
    if not pts:
        return
    top = ax.secondary_xaxis("top")
    top.set_xticks([a for a, _ in pts], labels=[f"{r:.3g}" for _, r in pts], fontsize=8)
    top.xaxis.set_minor_locator(NullLocator())
    top.set_xlabel("mean batch plain decoding ran (bottom: the batch asked for, closed-loop users)", fontsize=8)


def capacity_lines(ax: Axes, capacity: Mapping[str, float | None] | None, color_of: Mapping[str, str]) -> None:
    """Plain decoding's capacity within the SLO (grey) and the highest curve's (its colour), as
    vertical dash-dot lines named in the legend (where they fall inside the axis)."""
    if not capacity:
        return
    left, right = ax.get_xlim()
    ranked = [(q, -i, lab) for i, (lab, q) in enumerate(capacity.items()) if lab != "plain" and q]
    best = max(ranked, default=None)                    # the first of a tie, as curve_capacities' best_k
    best = None if best is None else (best[0], best[2])
    shown = [("plain", capacity.get("plain"), "grey", "plain decoding")]
    if best is not None:
        shown.append((best[1], best[0], color_of.get(best[1], "black"), f"{best[1]} (the highest)"))
    for _, q, c, who in shown:
        if q and left < q < right:
            ax.axvline(q, color=c, ls="-.", lw=1.6, alpha=0.8, zorder=1,
                       label=f"capacity within the SLO, {who}: {q:.3g} requests/s")
        elif not q:
            ax.plot([], [], ls="none", label=f"capacity within the SLO, {who}: no rate meets it")
    ax.set_xlim(left, right)


def below_one(ax: Axes) -> None:
    """The dashed line at speedup 1 and the red shading below it, both named in the legend."""
    ax.axhline(1.0, color="black", lw=1.2, ls="--", label="speedup 1 (break-even)")
    lo, hi = ax.get_ylim()
    ax.set_ylim(min(lo, 0.9), max(hi, 1.1))
    ax.axhspan(ax.get_ylim()[0], 1.0, color="red", alpha=0.06, zorder=0,
               label="speculation slower (below speedup 1)")


def flagged_rows(df: pd.DataFrame) -> pd.Series | None:
    """Rows whose run, with or without speculation, saturated or ran out of KV (None: unmarked)."""
    cols = ("saturated", "base_saturated", "kv_limited", "base_kv_limited")
    if not all(c in df for c in cols):
        return None
    return df[list(cols)].astype(bool).any(axis=1)


def saturation_bands(ax: Axes, df: pd.DataFrame, x: str) -> None:
    """Grey from plain decoding's first saturated point to the axis end; hatched from its first
    KV-limited point; each only where there is one (call it once the x limits are final)."""
    left, right = ax.get_xlim()
    if flagged_rows(df).any():
        ax.plot([], [], ls="none", marker="o", ms=7, mfc="white", mec="grey", mew=1.6,
                label="hollow: saturated or KV-limited (with or without speculation)")
    for col, style, text in (("base_saturated", {"color": "grey", "alpha": 0.15},
                              "plain decoding saturated (queue grows)"),
                             ("base_kv_limited", {"facecolor": "none", "edgecolor": "grey", "hatch": "//",
                                                  "alpha": 0.5}, "plain decoding KV-limited (preempts)")):
        hit = df[df[col].astype(bool)]
        if len(hit):
            ax.axvspan(float(hit[x].min()), right, zorder=0, lw=0, label=text, **style)
    ax.set_xlim(left, right)
