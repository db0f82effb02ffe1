"""The best speedup over the curves on a grid of two axes: a heatmap centred on speedup 1, and
one line per value of the second axis."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .figure_file import plt, save_figure
from .plot_axes import label_and_finish


def plot_speedup_heatmap(best: pd.DataFrame, *, x: str, y: str, title: str, xlabel: str, ylabel: str,
                         path: str | Path, colorbar_label: str = "speedup") -> Path:
    """Best speedup over the curves on an x-by-y grid: diverging colours centred on 1 (red: slower,
    blue: faster), each cell labelled with its speedup and the curve that achieves it."""
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm
    xs = sorted(best[x].unique())
    ys = sorted(best[y].unique())
    grid = np.full((len(ys), len(xs)), np.nan)
    label = [["" for _ in xs] for _ in ys]
    for _, r in best.iterrows():
        i, j = ys.index(r[y]), xs.index(r[x])
        grid[i, j] = r["speedup"]
        label[i][j] = str(r["curve"]).replace("policy=", "") + (f" {r['flags']}" if r.get("flags") else "")
    fig, ax = plt.subplots(figsize=(max(6.5, 1.0 * len(xs) + 3), max(4.2, 0.65 * len(ys) + 2.2)), dpi=110)
    finite = grid[np.isfinite(grid)]
    vmin = min(0.5, float(finite.min())) if finite.size else 0.5
    vmax = max(1.5, float(finite.max())) if finite.size else 1.5
    im = ax.imshow(grid, origin="lower", aspect="auto", cmap="RdBu", norm=TwoSlopeNorm(1.0, vmin, vmax))
    for i in range(len(ys)):
        for j in range(len(xs)):
            v = grid[i, j]
            txt = "fail" if not np.isfinite(v) else f"{v:.2f}\n{label[i][j]}"
            ax.text(j, i, txt, ha="center", va="center", fontsize=7.5,
                    color="white" if np.isfinite(v) and abs(v - 1.0) > 0.45 * (vmax - 1.0) else "black")
    if np.isfinite(grid).sum() >= 4 and len(xs) > 1 and len(ys) > 1:
        ax.contour(np.arange(len(xs)), np.arange(len(ys)), np.nan_to_num(grid, nan=1.0), levels=[1.0],
                   colors="black", linewidths=1.5, linestyles="--")
    ax.set_xticks(range(len(xs)), [f"{v:g}" for v in xs])
    ax.set_yticks(range(len(ys)), [f"{v:g}" for v in ys])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    marks = "; S: saturated, M: KV-limited" if "flags" in best and best["flags"].astype(bool).any() else ""
    ax.set_title(title + f"\n(dashed contour: speedup 1{marks})", fontsize=10)
    cb = fig.colorbar(im, ax=ax)
    cb.set_label(colorbar_label, fontsize=8)
    return save_figure(fig, path)


def plot_best_speedup_lines(best: pd.DataFrame, *, x: str, group: str, title: str, xlabel: str, ylabel: str,
                            path: str | Path, logx: bool = False) -> Path:
    """Best speedup over the curves against x, one line per value of `group` (the second axis)."""
    fig, ax = plt.subplots(figsize=(9, 5.4), dpi=110)
    cmap = plt.get_cmap("viridis")
    groups = sorted(best[group].unique())
    for i, gv in enumerate(groups):
        g = best[best[group] == gv].sort_values(x)
        ax.plot(g[x], g["speedup"], marker="o", ms=4, lw=2.0, color=cmap(i / max(1, len(groups) - 1)),
                label=f"{group} = {gv:g}")
    ax.axhline(1.0, color="black", lw=1.2, ls="--", label="speedup 1 (break-even)")
    return label_and_finish(fig, ax, path, xlabel, ylabel, title, logx, ticks=best[x])
