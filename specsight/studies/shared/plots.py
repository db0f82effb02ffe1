"""The study plots' figures, each from the module of its concept (the import point docs/api.md
names, and `specsight.studies.plots` still gives for one release: specsight/studies/moved.py):

    breakeven_plot.py       break-even: speedup against an axis, one curve per K or policy, crossings marked
    speedup_curves_plot.py  speedup curves with their crossings (the analytic break-even)
    best_speedup_plot.py    the best speedup over a grid of two axes: heatmap and lines
    latency_plot.py         latency against output throughput, with and without speculation
    breakeven_marks.py      speedup 1, saturation bands, capacity lines, the batch ran, crossing labels
    plot_axes.py            log scales, ticks at the simulated values, labels, legends
    figure_file.py          matplotlib on Agg; a figure written whole, then freed
"""
from __future__ import annotations

from .best_speedup_plot import plot_best_speedup_lines, plot_speedup_heatmap
from .breakeven_plot import BAND_LABEL, BreakevenPanel, plot_breakeven, plot_breakeven_panels
from .latency_plot import LATENCY_PANELS, MERGE_PX, plot_latency_throughput
from .plot_axes import MAX_TICKS, log_label
from .speedup_curves_plot import plot_speedup_curves

__all__ = ["BAND_LABEL", "LATENCY_PANELS", "MAX_TICKS", "MERGE_PX", "BreakevenPanel", "log_label",
           "plot_best_speedup_lines", "plot_breakeven", "plot_breakeven_panels", "plot_latency_throughput",
           "plot_speedup_curves", "plot_speedup_heatmap"]
