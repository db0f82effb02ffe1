"""Break-even by engine on one plot: one colour per engine, one line style per line (the best static
K solid, each policy dashed or dotted), an X where each line crosses speedup 1; saturated or
KV-limited points hollow; each crossing's value labelled where it covers nothing (plot_labels.py) and
named in the legend."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from ..shared.plots import _below_one, _label_axes, _place_marks_and_save, plt

STYLES = ("-", "--", ":", "-.")


def plot_engine_breakeven(lines: pd.DataFrame, *, x: str, verdict: Mapping[str, Mapping[str, Mapping[str, Any]]],
                          title: str, xlabel: str, ylabel: str, path: str | Path, logx: bool = False) -> Path:
    """`lines`: columns engine, line, `x`, speedup (breakeven_engines.engine_lines); `verdict`:
    engine -> line -> {breakeven, ...}. Returns the path written."""
    fig, ax = plt.subplots(figsize=(12, 5.4), dpi=110)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    engines = list(dict.fromkeys(lines["engine"]))
    styles = {name: STYLES[i % len(STYLES)] for i, name in enumerate(dict.fromkeys(lines["line"]))}
    marks: list[tuple[float, str]] = []
    names: list[str] = []
    for (engine, line), g in lines.groupby(["engine", "line"], sort=False):
        c = colors[engines.index(engine) % len(colors)]
        g = g.sort_values(x)
        crossings = [cr["at"] for cr in verdict.get(str(engine), {}).get(str(line), {}).get("crossings", [])]
        at = ", ".join(f"{be:.3g}" for be in crossings)
        ax.plot(g[x], g["speedup"], marker="o", ms=4, lw=2.0, ls=styles[line], color=c,
                label=f"{engine}: {line}" + (f": speedup 1 at {at}" if at else ""))
        if "saturated" in g:
            h = g[g["saturated"].astype(bool) | g["kv_limited"].astype(bool)]
            ax.plot(h[x], h["speedup"], ls="none", marker="o", ms=7, mfc="white", mec=c, mew=1.6, zorder=5)
        for be in crossings:
            ax.plot([be], [1.0], marker="X", ms=11, color=c, markeredgecolor="black", zorder=6)
            marks.append((be, c))
            names.append(f"{engine} ")
    _below_one(ax)
    _label_axes(ax, xlabel, ylabel, title, logx)
    return _place_marks_and_save(fig, ax, path, marks, prefix=names)
