"""Break-even by engine on one plot: one colour per engine, one line style per line (the best static
K solid, each policy dashed or dotted), an X where each line crosses speedup 1; saturated or
KV-limited points hollow."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from .plots import _label_and_finish, plt

STYLES = ("-", "--", ":", "-.")


def plot_engine_breakeven(lines: pd.DataFrame, *, x: str, verdict: Mapping[str, Mapping[str, Mapping[str, Any]]],
                          title: str, xlabel: str, ylabel: str, path: str | Path, logx: bool = False) -> Path:
    """`lines`: columns engine, line, `x`, speedup (breakeven_engines.engine_lines); `verdict`:
    engine -> line -> {breakeven, ...}. Returns the path written."""
    fig, ax = plt.subplots(figsize=(9, 5.4), dpi=110)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    engines = list(dict.fromkeys(lines["engine"]))
    styles = {name: STYLES[i % len(STYLES)] for i, name in enumerate(dict.fromkeys(lines["line"]))}
    n_marked = 0                                   # crossing labels stacked so that close ones stay legible
    for (engine, line), g in lines.groupby(["engine", "line"], sort=False):
        c = colors[engines.index(engine) % len(colors)]
        g = g.sort_values(x)
        ax.plot(g[x], g["speedup"], marker="o", ms=4, lw=2.0, ls=styles[line], color=c, label=f"{engine}: {line}")
        if "saturated" in g:
            h = g[g["saturated"].astype(bool) | g["kv_limited"].astype(bool)]
            ax.plot(h[x], h["speedup"], ls="none", marker="o", ms=7, mfc="white", mec=c, mew=1.6, zorder=5)
        for cr in verdict.get(str(engine), {}).get(str(line), {}).get("crossings", []):
            be = cr["at"]
            ax.plot([be], [1.0], marker="X", ms=11, color=c, markeredgecolor="black", zorder=6)
            ax.annotate(f"{engine} {be:.3g}", (be, 1.0), textcoords="offset points", xytext=(5, -14 - 11 * n_marked),
                        fontsize=8, color=c, fontweight="bold")
            n_marked += 1
    ax.axhline(1.0, color="black", lw=1.2, ls="--", label="speedup 1 (break-even)")
    lo, hi = ax.get_ylim()
    ax.set_ylim(min(lo, 0.9), max(hi, 1.1))
    ax.axhspan(ax.get_ylim()[0], 1.0, color="red", alpha=0.06, zorder=0)
    return _label_and_finish(fig, ax, path, xlabel, ylabel, title, logx)
