"""Break-even plots: speedup against an axis, one curve per K or policy, break-even marked."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from simulator.common.atomic_files import replacing  # noqa: E402

from .plot_labels import has_placed_labels, place_labels  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def _save(fig: Figure, path: str | Path) -> Path:
    """Lay the figure out (unless place_labels did: its labels are placed for that layout), write
    it to `path` and free it."""
    if not has_placed_labels(fig):
        fig.tight_layout()
    path = Path(path)
    try:
        with replacing(path) as tmp:          # whole or not at all (simulator/common/atomic_files.py)
            fig.savefig(tmp)
    finally:
        plt.close(fig)
    return path


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
    if logx:                         # (2^k tick labels here, unlike _log2_axis's plain numbers)
        ax.set_xscale("log", base=2)
    for name, xv in (vlines or {}).items():
        if xv is not None and xv > 0:
            left, right = ax.get_xlim()
            ax.axvline(xv, color="grey", lw=2.0, ls="-.", alpha=0.6, label=f"{name} ({xv:.0f})")
            if xv < right:           # the batches past the limit: they do not fit, whatever they would pay
                ax.axvspan(max(xv, left), right, facecolor="grey", alpha=0.15, hatch="xx", edgecolor="grey", lw=0,
                           zorder=0, label=f"beyond the {name}: does not fit")
            ax.set_xlim(left, right)
    _label_axes(ax, log_label(xlabel) if logx else xlabel, ylabel, title, logx=False)
    return _place_marks_and_save(fig, ax, path, marks)


# ---- simulated break-even (specsight breakeven SCENARIO.yaml) ------------------------------------
def _finish(fig: Figure, ax: Axes, path: str | Path, legend_title: str | None = None) -> Path:
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best", title=legend_title, title_fontsize=8)
    return _save(fig, path)


def _legend_outside(ax: Axes) -> None:
    """The legend to the right of the axes, where it covers no data and no label."""
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _place_marks_and_save(fig: Figure, axes: Axes | Sequence[Axes], path: str | Path,
                          marks: list[tuple[float, str]] | Sequence[list[tuple[float, str]]]) -> Path:
    """Legends outside, then each (x, colour) crossing labelled at speedup 1 where it covers
    nothing (plot_labels.py; the legend names every crossing too), then save. `axes` one axes and
    its marks, or a list of axes and a list of marks each."""
    many = isinstance(axes, Sequence)
    pairs = list(zip(axes, marks)) if many else [(axes, marks)]
    for ax, _ in pairs:
        _legend_outside(ax)
    for ax, ms in pairs:
        for be, c in ms:
            place_labels(ax, [(be, 1.0)], [f"{be:.3g}"], color=c, fontsize=8, fontweight="bold")
    return _save(fig, path)


def _log2_axis(ax: Axes, which: str = "x") -> None:
    """Base-2 log scale labelled with plain numbers (1, 2, 4, ... rather than 2^k)."""
    from matplotlib.ticker import FuncFormatter
    fmt = FuncFormatter(lambda v, _: f"{v:g}")
    if which == "x":
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(fmt)
    else:
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_formatter(fmt)


def _plain_log_ticks(ax: Axes) -> None:
    """Label log axes with plain numbers (1500, 2000) instead of powers of ten."""
    from matplotlib.ticker import FuncFormatter, NullFormatter
    fmt = FuncFormatter(lambda v, _: f"{v:g}")
    for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        axis.set_major_formatter(fmt)
        # label minor ticks only when the axis spans less than a decade (else too crowded)
        axis.set_minor_formatter(fmt if lo > 0 and hi / lo < 10 else NullFormatter())
        axis.set_tick_params(which="minor", labelsize=7)


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
        _below_one(ax)
        _label_axes(ax, xlabel if ax is axes[-1, 0] else "", ylabel, panel.title or "", logx, ticks=panel.df[x])
        ax.tick_params(labelbottom=True)
    if n == 1:
        axes[0, 0].set_title(title, fontsize=10)
    else:
        fig.suptitle(title, fontsize=10)
    for ax, panel in zip(axes[:, 0], panels):
        if _flagged(panel.df) is not None:
            _saturation_bands(ax, panel.df, x)
        _capacity_lines(ax, panel.capacity, {lab: colors[i % len(colors)] for i, lab in enumerate(labels)})
        _ran_axis(ax, panel.ran)
    return _place_marks_and_save(fig, list(axes[:, 0]), path, marks)


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
    flagged = _flagged(df)
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


def _ran_axis(ax: Axes, ran: Mapping[float, float] | None) -> None:
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


def _capacity_lines(ax: Axes, capacity: Mapping[str, float | None] | None, color_of: Mapping[str, str]) -> None:
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


def _below_one(ax: Axes) -> None:
    """The dashed line at speedup 1 and the red shading below it, both named in the legend."""
    ax.axhline(1.0, color="black", lw=1.2, ls="--", label="speedup 1 (break-even)")
    lo, hi = ax.get_ylim()
    ax.set_ylim(min(lo, 0.9), max(hi, 1.1))
    ax.axhspan(ax.get_ylim()[0], 1.0, color="red", alpha=0.06, zorder=0,
               label="speculation slower (below speedup 1)")


def _flagged(df: pd.DataFrame) -> pd.Series | None:
    """Rows whose run, with or without speculation, saturated or ran out of KV (None: unmarked)."""
    cols = ("saturated", "base_saturated", "kv_limited", "base_kv_limited")
    if not all(c in df for c in cols):
        return None
    return df[list(cols)].astype(bool).any(axis=1)


def _saturation_bands(ax: Axes, df: pd.DataFrame, x: str) -> None:
    """Grey from plain decoding's first saturated point to the axis end; hatched from its first
    KV-limited point; each only where there is one (call it once the x limits are final)."""
    left, right = ax.get_xlim()
    if _flagged(df).any():
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


MAX_TICKS = 12      # more simulated values than this: every n-th is labelled (the first and last always)


def _ticks_at(ax: Axes, values: Iterable[float]) -> None:
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


def _label_axes(ax: Axes, xlabel: str, ylabel: str, title: str, logx: bool,
                ticks: Iterable[float] | None = None) -> None:
    """Axis labels, title, (for log axes) a base-2 scale, and ticks at the simulated values if given."""
    if logx:
        _log2_axis(ax)
    if ticks is not None:
        _ticks_at(ax, ticks)
    ax.set_xlabel(log_label(xlabel) if logx and xlabel else xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)


def _label_and_finish(fig: Figure, ax: Axes, path: str | Path, xlabel: str, ylabel: str, title: str,
                      logx: bool, ticks: Iterable[float] | None = None) -> Path:
    """_label_axes, then save."""
    _label_axes(ax, xlabel, ylabel, title, logx, ticks)
    return _finish(fig, ax, path)


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
    return _save(fig, path)


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
    return _label_and_finish(fig, ax, path, xlabel, ylabel, title, logx, ticks=best[x])


LATENCY_PANELS = (("tpot_ms_p50", "TPOT p50 (ms per output token)", None),
                  ("tpot_ms_p99", "TPOT p99 (ms per output token)", "TPOT p99"),
                  ("ttft_ms_p99", "TTFT p99 (ms)", "TTFT p99"))
MERGE_PX = 9.0          # points closer than this on the figure share one label ("12, 18, 24")


def plot_latency_throughput(df: pd.DataFrame, *, x_axis: str, title: str, path: str | Path,
                            slo_tpot_ms_p99: float | None = None, slo_ttft_ms_p99: float | None = None) -> Path:
    """TPOT p50, TPOT p99 and (where the frame has it) TTFT p99 against output tokens/s: plain
    decoding (black) and each speculative curve, the sweep's points joined in axis order; every
    point labelled with its axis value where the label overlaps no other (plot_labels.py; points
    that land on one spot share a label, "12, 18, 24"; speculative labels in their curve's
    colour); each SLO, if set, a red line named in the legend of the panel it bounds; saturated
    runs (columns base_saturated, saturated) hollow. The x axis must be a load (batch, qps,
    context): along K or alpha plain decoding does not move and the curves fold back."""
    panels = [p for p in LATENCY_PANELS if f"base_{p[0]}" in df and f"spec_{p[0]}" in df]
    slos = {"TPOT p99": slo_tpot_ms_p99, "TTFT p99": slo_ttft_ms_p99}
    fig, axes = plt.subplots(1, len(panels), figsize=(6.0 * len(panels), 5.0), dpi=110, sharey=False, squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    base = df.drop_duplicates(subset=[x_axis]).sort_values(x_axis)
    for ax, (col, ylabel, slo_name) in zip(axes[0], panels):
        ax.plot(base["base_output_tokens_per_s"], base[f"base_{col}"], marker="s", ms=4, lw=2.2, color="black",
                label="plain decoding (K=0)")
        if "base_saturated" in base:
            sat = base[base["base_saturated"].astype(bool)]
            ax.plot(sat["base_output_tokens_per_s"], sat[f"base_{col}"], ls="none", marker="s", ms=7,
                    mfc="white", mec="black", mew=1.4, zorder=5, label="hollow: saturated (queue grows)")
        for i, (name, g) in enumerate(df.groupby("curve", sort=False)):
            g = g.sort_values(x_axis)
            ax.plot(g["spec_output_tokens_per_s"], g[f"spec_{col}"], marker="o", ms=3, lw=1.6,
                    color=colors[i % len(colors)], label=f"{name} (speculative)")
            if "saturated" in g:
                sat = g[g["saturated"].astype(bool)]
                ax.plot(sat["spec_output_tokens_per_s"], sat[f"spec_{col}"], ls="none", marker="o", ms=6,
                        mfc="white", mec=colors[i % len(colors)], mew=1.2, zorder=5)
        slo = slos.get(slo_name) if slo_name else None
        if slo is not None:
            ax.axhline(slo, color="red", lw=1.5, ls="--", label=f"SLO: {slo_name} {slo:g} ms")
        ax.set_xlabel("output throughput (tokens/s, one replica)")
        ax.set_ylabel(ylabel)
        ax.set_title(ylabel.split(" (")[0], fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        if ax is axes[0, 0]:
            ax.legend(fontsize=8, loc="upper left", title=f"numbers: {x_axis}", title_fontsize=8)
        elif slo is not None:                      # the SLO line this panel draws, named here
            ax.legend(handles=[h for h, lab in zip(handles, labels) if lab.startswith("SLO")], fontsize=8,
                      loc="upper left")
    fig.suptitle(title, fontsize=10)
    for ax, (col, _, _) in zip(axes[0], panels):
        _label_points(ax, base["base_output_tokens_per_s"], base[f"base_{col}"], base[x_axis], "black")
        for i, (_, g) in enumerate(df.groupby("curve", sort=False)):
            g = g.sort_values(x_axis)
            _label_points(ax, g["spec_output_tokens_per_s"], g[f"spec_{col}"], g[x_axis], colors[i % len(colors)])
    return _save(fig, path)


def _label_points(ax: Axes, xs: Iterable[float], ys: Iterable[float], values: Iterable[float], color: str) -> None:
    """Each point labelled with its value where it covers nothing (plot_labels.place_labels);
    points within MERGE_PX of each other on the figure share one label, their values joined."""
    import math
    if not has_placed_labels(ax.figure):      # the layout place_labels uses: distances measured on it
        ax.figure.tight_layout()
    groups: list[tuple[tuple[float, float], list[str], tuple[float, float]]] = []
    for x, y, v in zip(xs, ys, values):
        if not (math.isfinite(float(x)) and math.isfinite(float(y))):
            continue
        px, py = ax.transData.transform((float(x), float(y)))
        for (gx, gy), names, _ in groups:
            if math.hypot(px - gx, py - gy) <= MERGE_PX:
                names.append(f"{v:g}")
                break
        else:
            groups.append(((px, py), [f"{v:g}"], (float(x), float(y))))
    place_labels(ax, [at for _, _, at in groups], [", ".join(names) for _, names, _ in groups], color=color)


# ---- capacity plan (specsight plan) ---------------------------------------------------------------
def plot_plan_probes(rows: list, *, slo_tpot_ms: float | None, slo_ttft_ms: float | None, path: str | Path,
                     title: str) -> Path:
    """The search's probes: TPOT p99 (left) and TTFT p99 (right) against the offered rate, one colour
    per configuration; filled = within the SLO, hollow = not; the SLO as a red line; each
    configuration's largest passing rate as a dotted vertical line."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.0), dpi=110)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = "osD^v<>"                         # one shape and size per configuration: identical searches stay visible
    for ax, key, slo, name in ((axes[0], "tpot_ms_p99", slo_tpot_ms, "TPOT p99 (ms per output token)"),
                               (axes[1], "ttft_ms_p99", slo_ttft_ms, "TTFT p99 (ms)")):
        for i, r in enumerate(rows):
            c = colors[i % len(colors)]
            pr = sorted((p for p in r["probes"] if p.get(key) is not None), key=lambda p: p["qps"])
            if not pr:
                continue
            ax.plot([p["qps"] for p in pr], [p[key] for p in pr], color=c, lw=1.0, alpha=0.6)
            ok = [p for p in pr if p["pass"]]
            bad = [p for p in pr if not p["pass"]]
            m, size = markers[i % len(markers)], 60 - 12 * (i % 4)
            label = (f"{r['config']}: max {r['max_qps_per_replica']:.3g}/s" if r["max_qps_per_replica"]
                     else f"{r['config']}: none")
            ax.scatter([p["qps"] for p in ok], [p[key] for p in ok], color=c, s=size, marker=m, zorder=4 + i,
                       label=label)
            ax.scatter([p["qps"] for p in bad], [p[key] for p in bad], facecolors="none", edgecolors=c, s=size,
                       marker=m, zorder=4 + i)
            if r["max_qps_per_replica"]:
                ax.axvline(r["max_qps_per_replica"], color=c, ls=":", lw=1.2)
        if slo is not None:
            ax.axhline(slo, color="red", lw=1.5, ls="--", label=f"SLO: {name.split(' (')[0]} {slo:g} ms")
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_log_ticks(ax)
        ax.set_xlabel(log_label("offered load per replica (requests/s, Poisson)"))
        ax.set_ylabel(log_label(name))
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8, loc="best", title="filled: passes the SLO and is stable", title_fontsize=8)
    handles, labels = axes[1].get_legend_handles_labels()
    if any(lab.startswith("SLO") for lab in labels):     # the TTFT panel names the limit it draws
        axes[1].legend(handles=[h for h, lab in zip(handles, labels) if lab.startswith("SLO")], fontsize=8,
                       loc="best")
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)
