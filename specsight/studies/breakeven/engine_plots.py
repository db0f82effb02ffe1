"""Break-even by engine: one panel per engine, each the single-engine plot of that engine's study
(shared/breakeven_plot.py, plot_breakeven_panels): every K's curve and each policy's, an X where each crosses speedup
1 with its value labelled where it covers nothing, saturated or KV-limited points hollow with
the legend saying so, plain decoding's saturation band, and (qps axis, with an SLO) the capacity
within the SLO of plain decoding and of the highest curve as vertical lines. One colour per
curve across panels; the same axes scales, so engines compare by eye; the
analytic model (the ideal engine's passes alone) dotted in ideal's panel only."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..shared.breakeven_plot import BreakevenPanel, plot_breakeven_panels
from .outputs import capacity_at, dense_analytic, ran_batch


def plot_engine_breakeven(results: Mapping[str, Any], capacity: Mapping[str, Any], *, x: str, title: str,
                          xlabel: str, ylabel: str, path: str | Path, logx: bool = False, replicas: int = 1) -> Path:
    """`results`: engine -> its BreakevenResult; `capacity`: engine -> curve_capacities' answer
    (an engine without one draws no capacity line). Returns the path written."""
    panels = [BreakevenPanel(r.frame, r.verdict.breakeven, f"engine {r.meta['engine']}",
                             dense_analytic(r) if e == "ideal" else None, capacity_at(capacity.get(e), replicas),
                             ran_batch(r))
              for e, r in results.items()]
    return plot_breakeven_panels(panels, x=x, title=title, xlabel=xlabel, ylabel=ylabel, path=path, logx=logx)
