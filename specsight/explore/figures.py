"""The explorer's figures as plotly.js figure dicts, built from the closed-form curves
(priced.py), the round timeline (timeline.py), the accepted-length distribution and the
simulated study's rows.

NOTE: plain dicts, not plotly.graph_objects: the objects validate every property and deep-copy
their template, ~100 ms a figure on a 2-core machine, the whole redraw budget; plotly.js reads
the same JSON."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .priced import ALPHAS, BATCHES, Curves
from .timeline import PLAIN, SPEC, Bar

COLORS = {"target": "#1f77b4", "draft": "#ff7f0e", "host": "#7f7f7f", "sync": "#d62728"}
K_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")
AXIS = {"gridcolor": "#e5e5e5", "zeroline": False, "linecolor": "#444", "showline": True}
Figure = dict[str, Any]
CURVE_AXES = {"batch": ("batch (sequences)", True), "k": ("K (drafts per round)", False),   # x title, log x
              "alpha": ("alpha (per-draft acceptance)", False)}


def _list(a: Any) -> list[float]:
    return [float(x) for x in np.asarray(a, dtype=float)]


def _layout(title: str, xtitle: str, ytitle: str, logx: bool = False, height: int = 320) -> dict[str, Any]:
    return {"title": {"text": title, "font": {"size": 13}}, "height": height,
            "margin": {"l": 55, "r": 10, "t": 40, "b": 45}, "plot_bgcolor": "white", "paper_bgcolor": "white",
            "xaxis": {**AXIS, "title": {"text": xtitle}, **({"type": "log"} if logx else {})},
            "yaxis": {**AXIS, "title": {"text": ytitle}}, "legend": {"font": {"size": 10}, "x": 1.01, "y": 1},
            "shapes": [], "annotations": []}


def _hline(layout: dict[str, Any], y: float) -> None:
    layout["shapes"].append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": y, "y1": y,
                             "line": {"color": "black", "width": 1, "dash": "dot"}})


def _vline(layout: dict[str, Any], x: float, color: str = "black", label: str | None = None) -> None:
    """A vertical line at data value x (NOTE: plotly.js places a shape on a log axis at its data
    value but an annotation at its log10)."""
    layout["shapes"].append({"type": "line", "yref": "paper", "y0": 0, "y1": 1, "xref": "x", "x0": x, "x1": x,
                             "line": {"color": color, "width": 1.5, "dash": "dash"}})
    if label:
        at = float(np.log10(x)) if layout["xaxis"].get("type") == "log" else x
        layout["annotations"].append({"x": at, "xref": "x", "y": 1, "yref": "paper", "text": label,
                                      "showarrow": False, "xanchor": "right", "yanchor": "top",
                                      "font": {"color": color, "size": 11}})


def speedup_layout(title: str, xtitle: str, logx: bool = False) -> dict[str, Any]:
    lay = _layout(title, xtitle, "speedup (x plain)", logx)
    _hline(lay, 1.0)
    return lay


def batch_figure(c: Curves) -> Figure:
    """Speedup against batch, one curve per K (the chosen K bold), the KV limit and the chosen batch."""
    lay = speedup_layout(f"analytic speedup vs batch (alpha {c.alpha:.2f} at K={c.k})", *CURVE_AXES["batch"])
    data = []
    for i, (k, y) in enumerate(c.by_batch.items()):
        bold = k == c.k
        data.append({"type": "scatter", "mode": "lines", "name": f"K={k}", "x": _list(BATCHES), "y": _list(y),
                     "line": {"width": 3.5 if bold else 1.2, "color": K_COLORS[i % len(K_COLORS)]},
                     "opacity": 1.0 if bold else 0.5})
    if np.isfinite(c.kv_limit) and c.kv_limit >= 1:
        _vline(lay, c.kv_limit, "#d62728", "KV memory limit")
    data.append({"type": "scatter", "mode": "markers", "name": "this batch", "x": [c.batch], "y": [c.at_point],
                 "marker": {"size": 11, "color": "black", "symbol": "diamond"}})
    return {"data": data, "layout": lay}


def k_figure(c: Curves) -> Figure:
    lay = speedup_layout(f"analytic speedup vs K at batch {c.batch:g}", *CURVE_AXES["k"])
    _vline(lay, c.k)
    return {"data": [{"type": "scatter", "mode": "lines+markers", "name": "speedup", "x": list(c.ks),
                      "y": _list(c.by_k)}], "layout": lay}


def alpha_figure(c: Curves) -> Figure:
    lay = speedup_layout(f"analytic speedup vs alpha at batch {c.batch:g}, K={c.k}", *CURVE_AXES["alpha"])
    _vline(lay, c.alpha)
    return {"data": [{"type": "scatter", "mode": "lines", "name": "speedup", "x": _list(ALPHAS),
                      "y": _list(c.by_alpha)}], "layout": lay}


def timeline_figure(bars: Sequence[Bar], batch: int, tokens_per_round: float, engine: str) -> Figure:
    """A Gantt of one plain step and one speculative round (ms), each bar its pass or host time."""
    data, seen = [], set()
    for b in bars:
        data.append({"type": "bar", "orientation": "h", "y": [b.row], "x": [b.duration_s * 1e3],
                     "base": [b.start_s * 1e3], "name": b.kind, "legendgroup": b.kind,
                     "showlegend": b.kind not in seen,
                     "marker": {"color": COLORS.get(b.kind, "#999"), "line": {"color": "white", "width": 1}},
                     "text": [b.name], "textposition": "inside", "insidetextanchor": "middle",
                     "hovertext": [f"{b.name}: {b.duration_s * 1e3:.3f} ms<br>{b.detail}"], "hoverinfo": "text"})
        seen.add(b.kind)
    plain = sum(b.duration_s for b in bars if b.row == PLAIN) * 1e3
    spec = sum(b.duration_s for b in bars if b.row == SPEC) * 1e3
    lay = _layout(f"one round at batch {batch} ({engine}): plain {plain:.2f} ms for 1 token/seq, speculative "
                  f"{spec:.2f} ms for {tokens_per_round:.2f} tokens/seq", "ms", "", height=260)
    lay["barmode"] = "overlay"
    lay["yaxis"].update(categoryorder="array", categoryarray=[SPEC, PLAIN])
    return {"data": data, "layout": lay}


def accepted_figure(probs: np.ndarray, k: int) -> Figure:
    """P(a drafts accepted), a = 0..K, and the mean tokens a round emits."""
    mean = float(np.dot(np.arange(len(probs)), probs)) + 1.0
    lay = _layout(f"accepted drafts per round at K={k} (mean tokens emitted {mean:.2f})", "drafts accepted",
                  "probability")
    return {"data": [{"type": "bar", "x": list(range(len(probs))), "y": _list(probs), "name": "P"}], "layout": lay}


def simulated_figure(c: Curves | None, rows: Sequence[Mapping[str, Any]], k: int, breakeven: Any) -> Figure:
    """The simulated speedup against batch over the analytic curve: filled points ran unsaturated,
    hollow ones saturated (the queue grows), crosses ran out of KV; a band where rows carry an
    interval (`speedup_interval`: [low, high])."""
    title = f"simulated speedup vs batch, K={k}" + (f": break-even at batch {breakeven:.3g}"
                                                     if isinstance(breakeven, (int, float)) else "")
    lay = speedup_layout(title, "batch (sequences)", True)
    data: list[dict[str, Any]] = []
    if c is not None and k in c.by_batch:
        data.append({"type": "scatter", "mode": "lines", "name": "analytic", "x": _list(BATCHES),
                     "y": _list(c.by_batch[k]), "line": {"color": "#999", "dash": "dash"}})
    ok = [r for r in rows if r.get("speedup") is not None and not r.get("error")]
    band = [r.get("speedup_interval") for r in ok]
    if ok and all(isinstance(v, Sequence) and len(v) == 2 for v in band):
        xs = [float(r["batch"]) for r in ok]
        data.append({"type": "scatter", "mode": "lines", "fill": "toself", "name": "interval",
                     "x": xs + xs[::-1], "y": [float(v[1]) for v in band] + [float(v[0]) for v in band][::-1],
                     "line": {"width": 0}, "fillcolor": "rgba(31,119,180,0.15)"})

    def mark(r: Mapping[str, Any]) -> tuple[str, str]:
        kv = bool(r.get("kv_limited") or r.get("base_kv_limited"))
        sat = bool(r.get("saturated") or r.get("base_saturated"))
        return ("x" if kv else "circle-open" if sat else "circle"), (" (KV-limited)" if kv else "") + \
            (" (saturated)" if sat else "")
    marks = [mark(r) for r in ok]
    data.append({"type": "scatter", "mode": "lines+markers", "name": "simulated", "x": [r["batch"] for r in ok],
                 "y": [float(r["speedup"]) for r in ok], "line": {"color": "#1f77b4"},
                 "marker": {"size": 10, "symbol": [m[0] for m in marks]},
                 "hovertext": [f"batch {r['batch']}: {float(r['speedup']):.3f}x{m[1]}" for r, m in zip(ok, marks)],
                 "hoverinfo": "text"})
    return {"data": data, "layout": lay}
