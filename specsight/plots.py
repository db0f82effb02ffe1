"""Break-even plots: speedup against an axis, one curve per K or policy, break-even marked."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def plot_speedup_curves(df: pd.DataFrame, *, x: str, curve: str, y: str, breakeven: Mapping[str, float | None],
                        title: str, xlabel: str, path: str | Path, logx: bool = False,
                        overlay: pd.DataFrame | None = None, ylabel: str = "speedup over plain decoding (x)",
                        vlines: Mapping[str, float] | None = None) -> Path:
    """One line per value of `curve`; a dashed line at speedup 1; a marker where each curve crosses it.

    `overlay` (same columns) is drawn dotted, e.g. the analytic model beside the simulation."""
    fig, ax = plt.subplots(figsize=(8.5, 5.2), dpi=110)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, g) in enumerate(df.groupby(curve, sort=True)):
        label = f"{curve.upper() if len(curve) == 1 else curve}={name}"
        g = g.sort_values(x)
        c = colors[i % len(colors)]
        ax.plot(g[x], g[y], marker="o", ms=3, lw=1.8, color=c, label=label)
        if overlay is not None and name in set(overlay[curve]):
            o = overlay[overlay[curve] == name].sort_values(x)
            ax.plot(o[x], o[y], ls=":", lw=1.5, color=c, label=f"{label} (analytic)")
        be = breakeven.get(label)
        if be is not None:
            ax.axvline(be, color=c, ls="--", lw=0.8, alpha=0.7)
            ax.plot([be], [1.0], marker="X", ms=10, color=c, zorder=5)
            ax.annotate(f"{be:.3g}", (be, 1.0), textcoords="offset points", xytext=(4, 8), fontsize=8, color=c)
    ax.axhline(1.0, color="black", lw=1.0, ls="--", label="break-even (speedup 1)")
    for name, xv in (vlines or {}).items():
        if xv is not None and xv > 0:
            ax.axvline(xv, color="grey", lw=2.0, ls="-.", alpha=0.6, label=f"{name} ({xv:.0f})")
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
