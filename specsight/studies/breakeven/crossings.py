"""Break-even verdicts: speedup ratios, where a curve crosses 1, and the best K per point.

Break-even: linear interpolation between adjacent points whose speedups straddle 1, in log x
for the batch, qps and context axes. `verdict(frame, axis, axis2)` reads a break-even study's
rows (one per point and curve) and returns a `BreakevenVerdict`.

Where a study marks saturated points (columns `saturated`, `base_saturated`: saturation.py), a
curve's status is judged on the points where neither run saturates ("pays below saturation"
rather than "pays throughout" when the load outgrows the replica), each crossing says whether
it lies next to a saturated point, and the verdict names the first saturated (and KV-limited)
axis value with and without speculation.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .axes import LOG_AXES

if TYPE_CHECKING:
    import pandas as pd

METRICS = {  # name: (summary key, higher is better) -> speedup = spec/base (throughput) or base/spec (latency)
    "throughput": ("output_tokens_per_s", True),
    "goodput": ("goodput_requests_per_s", True),
    "tpot_p50": ("tpot_ms_p50", False),
    "tpot_p99": ("tpot_ms_p99", False),
    "e2e_p50": ("e2e_ms_p50", False),
    "itl_p50": ("itl_ms_p50", False),
}
CAPACITY = "capacity"       # not a summary key: the SLO-bound rate per GPU, searched (capacity.py)
METRIC_LABELS = {CAPACITY: "max Poisson requests/s per GPU within the SLO, speculative / plain",
                 "throughput": "output tokens/s, speculative / plain",
                 "goodput": "requests/s within SLO, speculative / plain",
                 "tpot_p50": "TPOT p50, plain / speculative", "tpot_p99": "TPOT p99, plain / speculative",
                 "e2e_p50": "E2E latency p50, plain / speculative", "itl_p50": "ITL p50, plain / speculative"}


def crossings(xs: Sequence[float], ys: Sequence[float], log: bool = False) -> list[dict[str, Any]]:
    """Where y crosses 1 between adjacent finite points: [{at, direction: 'down' | 'up'}], x
    interpolated linearly (in log x when `log`)."""
    pts = sorted((float(x), float(y)) for x, y in zip(xs, ys) if y is not None and math.isfinite(float(y)))
    out: list[dict[str, Any]] = []
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        d0, d1 = y0 - 1.0, y1 - 1.0
        if d0 == 0.0 or d0 * d1 >= 0.0 and d1 != 0.0:
            continue
        t = d0 / (d0 - d1)
        at = math.exp(math.log(x0) + t * (math.log(x1) - math.log(x0))) if log and x0 > 0 else x0 + t * (x1 - x0)
        out.append({"at": at, "direction": "down" if d0 > 0 else "up"})
    return out


def status(ys: Sequence[float]) -> str:
    """'pays throughout', 'never pays', 'crosses' (some speedups above 1, some below), 'pays or
    ties' / 'ties at best' (touches 1 without crossing it: an exact tie, as a coarse capacity
    search gives) or 'no data' for a curve's speedups."""
    v = [float(y) for y in ys if y is not None and math.isfinite(float(y))]
    if not v:
        return "no data"
    if min(v) > 1.0:
        return "pays throughout"
    if max(v) < 1.0:
        return "never pays"
    if min(v) < 1.0 < max(v):
        return "crosses"
    return "pays or ties" if max(v) > 1.0 else "ties at best"


SATURATED_STATUS = {"pays throughout": "pays below saturation", "never pays": "never pays below saturation",
                    "crosses": "crosses", "pays or ties": "pays or ties below saturation",
                    "ties at best": "ties at best below saturation", "no data": "saturated throughout"}
PLAIN = "plain"             # the runs without speculation, in the saturation and kv_limited mappings


def as_number(v: float | str) -> Any:
    """An axis value as it is shown and keyed: int when integral, else float (a drafter axis's
    label stays as it is)."""
    if isinstance(v, str):
        return v
    return int(v) if float(v).is_integer() else float(v)


def summary_value(summary: Mapping[str, Any] | None, key: str) -> float:
    """summary[key] as a float (NaN when the summary or the key is missing)."""
    if not summary:
        return math.nan
    v = summary.get(key)
    return math.nan if v is None else float(v)


def ratio(spec: Mapping[str, Any] | None, base: Mapping[str, Any] | None, metric: str) -> float:
    """Speedup of `spec` over `base` on `metric` (spec/base, or base/spec for a latency)."""
    key, higher = METRICS[metric]
    a, b = summary_value(spec, key), summary_value(base, key)
    if not (math.isfinite(a) and math.isfinite(b)) or (a if not higher else b) == 0:
        return math.nan
    return a / b if higher else b / a


@dataclass(frozen=True)
class BreakevenVerdict:
    """Per curve: the first break-even (None when none), every crossing and a status ('pays
    throughout', 'never pays', 'crosses', 'no data'); per point: the best static K (0: none
    pays). With a second axis each mapping is keyed by `axis2=value` first.
    analytic_breakeven: the analytic model's first crossing per curve (one axis only).
    saturation, kv_limited: per curve and for `plain` (no speculation), the first axis value
    whose run is saturated / KV-limited (None: none is); None for a study that does not mark them
    (saturation: or whose arrivals it does not judge, a trace's).
    breakeven_interval: where the rows carry `speedup_interval` (a real engine), per curve the
    range breakeven_range gives (None: neither edge crosses 1); None under ideal."""
    breakeven: dict[str, Any]
    crossings: dict[str, Any]
    status: dict[str, Any]
    best_k: dict[str, Any]
    analytic_breakeven: dict[str, Any] | None = None
    saturation: dict[str, Any] | None = None
    kv_limited: dict[str, Any] | None = None
    breakeven_interval: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"breakeven": self.breakeven, "crossings": self.crossings, "status": self.status, "best_k": self.best_k}
        if self.breakeven_interval is not None:
            out["breakeven_interval"] = self.breakeven_interval
        if self.analytic_breakeven is not None:
            out["analytic_breakeven"] = self.analytic_breakeven
        if self.saturation is not None:
            out["saturation"] = self.saturation
            out["kv_limited"] = self.kv_limited
        return out


def verdict(df: pd.DataFrame, axis: str, axis2: str | None) -> BreakevenVerdict:
    """The verdict of a break-even study's rows (columns: axis[, axis2], curve, policy, k,
    speedup, analytic_speedup)."""
    log = axis in LOG_AXES

    marked = "saturated" in df.columns

    banded = "speedup_interval" in df.columns

    def ranges(sub: pd.DataFrame) -> dict[str, Any]:
        out = {}
        for label, g in sub.groupby("curve", sort=False):
            g = g.sort_values(axis)
            lows, highs = interval_edges(g["speedup_interval"])
            out[label] = breakeven_range(g[axis].tolist(), g["speedup"].tolist(), lows, highs, log)
        return out

    def one(sub: pd.DataFrame) -> tuple[dict, dict, dict]:
        be, cr, st = {}, {}, {}
        for label, g in sub.groupby("curve", sort=False):
            g = g.sort_values(axis)
            flagged = (g["saturated"].astype(bool) | g["base_saturated"].astype(bool)).tolist() if marked else None
            kv = ((g["kv_limited"].astype(bool) | g["base_kv_limited"].astype(bool)).tolist()
                  if marked and "kv_limited" in g else None)
            v = line_verdict(g[axis].tolist(), g["speedup"].tolist(), log, flagged, kv)
            be[label], cr[label], st[label] = v["breakeven"], v["crossings"], v["status"]
        return be, cr, st

    def first(sub: pd.DataFrame, col: str, base_col: str) -> dict[str, Any] | None:
        if not marked or (sub[col].isna().all() and sub[base_col].isna().all()):     # not judged
            return None
        out = {PLAIN: _first_true(sub, axis, base_col)}
        for label, g in sub.groupby("curve", sort=False):
            out[str(label)] = _first_true(g, axis, col)
        return out

    def best_k(sub: pd.DataFrame) -> dict[str, int | None]:
        res: dict[str, int | None] = {}
        st = sub[sub["policy"] == "static"].dropna(subset=["speedup"])
        if axis == "k":        # one static K per point: the best K is the best over the whole axis
            if not len(st):
                return res
            j = st["speedup"].idxmax()
            best = int(st.loc[j, "k"]) if st.loc[j, "speedup"] > 1.0 else 0
            return {str(as_number(v)): best for v in sorted(st[axis].unique())}
        for v, g in st.groupby(axis, sort=True):
            if g["k"].isna().all():
                continue
            j = g["speedup"].idxmax()
            res[str(as_number(v))] = int(g.loc[j, "k"]) if g.loc[j, "speedup"] > 1.0 else 0
        return res

    if axis2 is None:
        be, cr, st = one(df)
        analytic = None
        an = df.dropna(subset=["analytic_speedup"])
        if len(an):
            analytic = {label: (lambda c: c[0]["at"] if c else None)(
                crossings(g.sort_values(axis)[axis].tolist(), g.sort_values(axis)["analytic_speedup"].tolist(), log))
                for label, g in an.groupby("curve", sort=False)}
        return BreakevenVerdict(be, cr, st, best_k(df), analytic, first(df, "saturated", "base_saturated"),
                                first(df, "kv_limited", "base_kv_limited"), ranges(df) if banded else None)
    be, cr, st, bk, sat, kv, rg = {}, {}, {}, {}, {}, {}, {}
    for v2, sub in df.groupby(axis2, sort=True):
        tag = f"{axis2}={as_number(v2)}"
        be[tag], cr[tag], st[tag] = one(sub)
        bk[tag] = best_k(sub)
        sat[tag], kv[tag] = first(sub, "saturated", "base_saturated"), first(sub, "kv_limited", "base_kv_limited")
        rg[tag] = ranges(sub) if banded else None
    return BreakevenVerdict(be, cr, st, bk, None, sat if marked else None, kv if marked else None,
                            rg if banded else None)


def line_verdict(xs: Sequence[float], ys: Sequence[float], log: bool,
                 flagged: Sequence[bool] | None = None, kv_flagged: Sequence[bool] | None = None) -> dict[str, Any]:
    """{breakeven, crossings, status} of one line. `flagged` (one per point: saturated with or
    without speculation): status judged on the other points, each crossing marked `saturated`
    when a point beside it is flagged; `kv_flagged` (KV-limited with or without speculation)
    marks a crossing `kv_limited` the same way (the axis value there was not the one reached)."""
    c = crossings(xs, ys, log)
    if kv_flagged is not None:
        kv_hit = [x for x, f in zip(xs, kv_flagged) if f]
        c = [{**x, "kv_limited": _next_to(x["at"], kv_hit, xs)} for x in c]
    out = {"breakeven": c[0]["at"] if c else None, "crossings": c, "status": status(ys)}
    if flagged is None:
        return out
    hit = [x for x, f in zip(xs, flagged) if f]
    out["crossings"] = [{**x, "saturated": _next_to(x["at"], hit, xs)} for x in c]
    st = status([y for y, f in zip(ys, flagged) if not f])
    out["status"] = SATURATED_STATUS[st] if hit else st
    return out


def interval_edges(intervals: Sequence[Any]) -> tuple[list[float], list[float]]:
    """The low and the high edge of per-point [low, high] intervals (NaN where a point has none)."""
    ivs = [v if isinstance(v, (list, tuple)) else (math.nan, math.nan) for v in intervals]
    return [v[0] for v in ivs], [v[1] for v in ivs]


def breakeven_range(xs: Sequence[float], ys: Sequence[float], lows: Sequence[float], highs: Sequence[float],
                    log: bool = False) -> list[float | None] | None:
    """[from, to] along the axis: where the speedup interval's edges (`lows`, `highs`, one per
    point) cross 1 in the direction of the point curve's first crossing (else of the edges' first:
    a curve that pays throughout may stop paying within its interval). Each edge gives the
    crossing nearest the point's; an edge that does not cross lies past one end of the grid:
    None at `from` is below the first value, None at `to` beyond the last (an edge past the same
    end as the other gives that end's value). None when neither edge crosses 1 (the interval
    agrees with the status)."""
    point = crossings(xs, ys, log)
    lo_c, hi_c = crossings(xs, lows, log), crossings(xs, highs, log)
    first = point or lo_c or hi_c
    if not first:
        return None
    way = first[0]["direction"]
    at = first[0]["at"]
    grid = sorted(float(x) for x in xs)
    ends = []
    for edge, cr in ((lows, lo_c), (highs, hi_c)):
        same = [c["at"] for c in cr if c["direction"] == way]
        if same:
            ends.append(min(same, key=lambda a: abs(a - at)))
            continue
        vals = [float(y) for _, y in sorted(zip(xs, edge)) if y is not None and math.isfinite(float(y))]
        after = bool(vals) and ((vals[0] < 1.0) if way == "down" else (vals[0] > 1.0))
        ends.append(-math.inf if after else math.inf)
    a, b = sorted(ends)
    return [None if a == -math.inf else (grid[-1] if a == math.inf else a),
            None if b == math.inf else (grid[0] if b == -math.inf else b)]


def _first_true(g: pd.DataFrame, axis: str, col: str) -> Any:
    """The smallest axis value whose row has `col` true (None: no row has)."""
    hit = g[g[col].astype(bool)]
    return as_number(float(hit[axis].min())) if len(hit) else None


def _next_to(at: float, flagged: Sequence[float], xs: Sequence[float]) -> bool:
    """Whether either axis value around a crossing at `at` is flagged."""
    below = [x for x in xs if x <= at]
    above = [x for x in xs if x >= at]
    near = ([max(below)] if below else []) + ([min(above)] if above else [])
    return any(x in flagged for x in near)
