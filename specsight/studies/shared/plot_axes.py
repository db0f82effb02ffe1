"""Axes of the study plots: base-2 and plain-number log scales, ticks at the simulated values,
labels and title, the legend (inside, or outside to the right), and saving (figure_file.py)."""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from .figure_file import save_figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def finish_axes(fig: Figure, ax: Axes, path: str | Path, legend_title: str | None = None) -> Path:
    """A grid and the legend inside the axes (titled `legend_title`), then save."""
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best", title=legend_title, title_fontsize=8)
    return save_figure(fig, path)


def legend_outside(ax: Axes) -> None:
    """The legend to the right of the axes, where it covers no data and no label."""
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def log2_axis(ax: Axes, which: str = "x") -> None:
    """Base-2 log scale labelled with plain numbers (1, 2, 4, ... rather than 2^k)."""
    from matplotlib.ticker import FuncFormatter
    fmt = FuncFormatter(lambda v, _: f"{v:g}")
    if which == "x":
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(fmt)
    else:
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_formatter(fmt)


def plain_log_ticks(ax: Axes) -> None:
    """Label log axes with plain numbers (1500, 2000) instead of powers of ten."""
    from matplotlib.ticker import FuncFormatter, NullFormatter
    fmt = FuncFormatter(lambda v, _: f"{v:g}")
    for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        axis.set_major_formatter(fmt)
        # label minor ticks only when the axis spans less than a decade (else too crowded)
        axis.set_minor_formatter(fmt if lo > 0 and hi / lo < 10 else NullFormatter())
        axis.set_tick_params(which="minor", labelsize=7)


MAX_TICKS = 12      # more simulated values than this: every n-th is labelled (the first and last always)


def ticks_at(ax: Axes, values: Iterable[float]) -> None:
    """x ticks at the simulated values (plain numbers), no others."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    xs = sorted({float(v) for v in values if pd.notna(v)})
    if not xs:
        return
    if len(xs) > MAX_TICKS:
        step = -(-(len(xs) - 1) // (MAX_TICKS - 1))
        xs = xs[::step] if (len(xs) - 1) % step == 0 else xs[::step] + [xs[-1]]
    ax.xaxis.set_major_locator(FixedLocator(xs))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())


def log_label(label: str) -> str:
    """An axis label saying its scale is logarithmic."""
    return label if "log scale" in label else f"{label} (log scale)"


def label_axes(ax: Axes, xlabel: str, ylabel: str, title: str, logx: bool,
               ticks: Iterable[float] | None = None) -> None:
    """Axis labels, title, (for log axes) a base-2 scale, and ticks at the simulated values if given."""
    if logx:
        log2_axis(ax)
    if ticks is not None:
        ticks_at(ax, ticks)
    ax.set_xlabel(log_label(xlabel) if logx and xlabel else xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)


def label_and_finish(fig: Figure, ax: Axes, path: str | Path, xlabel: str, ylabel: str, title: str,
                     logx: bool, ticks: Iterable[float] | None = None) -> Path:
    """label_axes, then save."""
    label_axes(ax, xlabel, ylabel, title, logx, ticks)
    return finish_axes(fig, ax, path)
