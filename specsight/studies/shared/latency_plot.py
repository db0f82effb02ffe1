"""Latency against output throughput, with and without speculation: TPOT p50, TPOT p99 and TTFT
p99 panels, every point labelled with its axis value where the label covers nothing."""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from .figure_file import plt, save_figure
from .plot_labels import has_placed_labels, place_labels

if TYPE_CHECKING:
    from matplotlib.axes import Axes


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
    return save_figure(fig, path)


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
