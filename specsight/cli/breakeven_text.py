"""`specsight breakeven`'s text: the speedup table per --axis2 value with saturated (S) and
KV-limited (M) points marked, the achieved batch on the batch axis, each curve's break-even and
status, where the replica saturates with and without speculation, the capacities within the SLO
(qps axis: beside the speedups; --metric capacity: in the cells), and what was written."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..studies.breakeven.axes import ANALYTIC_AXES, AXIS_UNITS
from ..studies.breakeven.crossings import CAPACITY, METRIC_LABELS, PLAIN, as_number
from ..studies.breakeven.drafters import DRAFTER
from ..studies.published.answer_intervals import format_interval, group_note, scenario_group
from ..studies.published.intervals import LEVEL

if TYPE_CHECKING:
    import pandas as pd

    from ..studies.breakeven.study import BreakevenResult

MARKS = {"S": "S: saturated with or without speculation (the queue grows through the run: no steady state, the "
              "speedup there is not one a replica sustains)",
         "M": "M: KV-limited with or without speculation (the KV cache ran out and preempted)"}


def _flags(r: pd.DataFrame) -> str:
    if "saturated" not in r or not len(r):
        return ""
    row = r.iloc[0]
    return ("S" if row["saturated"] or row["base_saturated"] else "") + \
        ("M" if row["kv_limited"] or row["base_kv_limited"] else "")


def _cell(r: pd.DataFrame, metric: str) -> str:
    if not len(r):
        return "-"
    s, a = float(r["speedup"].iloc[0]), float(r["analytic_speedup"].iloc[0])
    if metric == CAPACITY:
        q = r["spec_capacity_qps_per_gpu"].iloc[0]
        txt = (f"{q:.3g}/s {s:.2f}x" if math.isfinite(s) else f"{q:.3g}/s") if q is not None and q == q else "none"
    else:
        txt = "error" if r["error"].iloc[0] else (f"{s:.3f}" if math.isfinite(s) else "-")
    band = format_interval(r["speedup_interval"].iloc[0]) if "speedup_interval" in r else ""
    txt += f" {band}" if band else ""
    if math.isfinite(a):
        txt += f" ({a:.2f})"
    f = _flags(r)
    return txt + (f" {f}" if f else "")


def _first(m: Mapping[str, Any] | None, key: str, axis: str) -> str:
    v = (m or {}).get(key)
    return "never on these values" if v is None else f"from {axis} = {v}"


def saturation_lines(sat: Mapping[str, Any] | None, kv: Mapping[str, Any] | None, labels: list[str],
                     axis: str, stable: Mapping[str, Any]) -> list[str]:
    """Where plain decoding and each curve first saturate / run out of KV (nothing if never)."""
    out = []
    for name, m in (("saturates (queue grows)", sat), ("is KV-limited", kv)):
        if not m or all(v is None for v in m.values()):
            continue
        below = stable.get(name)
        head = f"  the replica {name}: without speculation {_first(m, PLAIN, axis)}" + (
            f" (stable at {below})" if below is not None else "")
        out.append(head + "; " + "; ".join(f"{lab} {_first(m, lab, axis)}" for lab in labels))
    return out


def _last_stable(sub: pd.DataFrame, axis: str, col: str, first: Any) -> Any:
    if first is None:
        return None
    before = sub[sub[axis] < first][axis]
    return as_number(float(before.max())) if len(before) else None


def range_text(rng: list[float | None] | None, crossed: list[dict[str, Any]], status: str | None, axis: str,
               grid: list[float]) -> str:
    """'; 80 % interval: stops paying between 9.1 and 11.4 requests/s' (an edge past the grid's
    ends: 'below 1.5', 'beyond 24'), or '' without a range."""
    if rng is None or not grid:
        return ""
    way = crossed[0]["direction"] if crossed else ("down" if str(status).startswith("pays") else "up")
    verb = "stops paying" if way == "down" else "starts paying"
    a = f"{rng[0]:.3g}" if rng[0] is not None else f"below {as_number(min(grid))}"
    b = f"{rng[1]:.3g}" if rng[1] is not None else f"beyond {as_number(max(grid))}"
    unit = AXIS_UNITS.get(axis, "")
    past = " (an edge does not cross 1 within the grid)" if None in rng else ""
    return f"; {100 * LEVEL:.0f} % interval: {verb} between {a} and {b}{' ' + unit if unit else ''}{past}"


def capacity_lines(cap: Mapping[str, Any] | None, labels: list[str]) -> list[str]:
    """The qps axis's capacity line: plain decoding's and each curve's rate per GPU within the SLO."""
    if not cap:
        return []
    per = cap["capacities"]

    def one(lab: str) -> str:
        q, v = per[lab]["capacity_qps_per_gpu"], per[lab]["vs_plain"]
        band = format_interval(per[lab].get("capacity_qps_per_gpu_interval"), ".3g")
        vband = format_interval(per[lab].get("vs_plain_interval"))
        return "none meets it" if not q else f"{q:.3g}" + (f" {band}" if band else "") + (
            f" ({v:.2f}x{' ' + vband if vband else ''})" if v and lab != PLAIN else "")
    slo = " and ".join(f"{n} p99 <= {v:g} ms" for n, v in (("TPOT", cap["slo"]["tpot_ms_p99"]),
                                                          ("TTFT", cap["slo"]["ttft_ms_p99"])) if v is not None)
    return [f"capacity within the SLO ({slo}), Poisson requests/s per GPU (tp {cap['tp']}), searched to within "
            f"{cap['tolerance']:.0%} ({cap['probes']} probes, {cap['simulated']} simulated): "
            f"plain decoding {one(PLAIN)}; " + "; ".join(f"{lab} {one(lab)}" for lab in labels if lab in per)
            + (f"; best K by capacity {cap['best_k']}" if cap.get("best_k") is not None else "")]


def format_text(res: BreakevenResult, files: Mapping[str, str], elapsed: float) -> str:
    """The study as a table per --axis2 value, the break-even per curve, saturation, capacity,
    and what was written."""
    axis, axis2 = res.axis, res.axis2
    df, summ, meta = res.frame, res.verdict, res.meta
    lines = [f"{meta['scenario']}: {meta['deployment']}, drafter {meta['drafter']}",
             f"speedup metric: {METRIC_LABELS[df['metric'].iloc[0]]}" if len(df) else ""]
    if res.schedule:
        lines.append(f"batch_schedule (derived from the analytic best K): {res.schedule}")
    labels = list(dict.fromkeys(df["curve"]))
    blocks = [(None, df)] if axis2 is None else [(v2, g) for v2, g in df.groupby(axis2, sort=True)]
    capacity = res.metric == CAPACITY
    achieved = axis == "batch" and not capacity and "base_mean_batch" in df
    for v2, sub in blocks:
        tag = None if v2 is None else f"{axis2}={as_number(v2)}"
        if v2 is not None:
            lines.append(f"-- {axis2} = {as_number(v2)}")
        width = {lab: max(28 if "speedup_interval" in df else 16, len(lab) + 2) for lab in labels}
        extra = f"{'achieved B':>12}" if achieved else (f"{'plain/GPU':>11}" if capacity else "")
        head = max([10, *(len(str(v)) + 1 for v in sub[axis])])
        lines.append(f"{axis:>{head}}" + extra + "".join(f"{lab:>{width[lab]}}" for lab in labels) + f"{'best K':>8}")
        bk = summ.best_k if tag is None else summ.best_k.get(tag, {})
        for v, g in sub.groupby(axis, sort=axis != DRAFTER):      # drafters in the order given
            cells = [f"{_cell(g[g['curve'] == lab], res.metric):>{width[lab]}}" for lab in labels]
            first = g.iloc[0]
            if achieved:
                b = float(first["base_mean_batch"])
                note = " KV" if first["base_kv_limited"] else ""
                cells.insert(0, f"{b:>9.1f}{note:<3}" if math.isfinite(b) else f"{'-':>12}")
            elif capacity:
                q = first["base_capacity_qps_per_gpu"]
                cells.insert(0, f"{q:>11.3g}" if q is not None and q == q else f"{'none':>11}")
            lines.append(f"{as_number(v)!s:>{head}}" + "".join(cells) + f"{str(bk.get(str(as_number(v)), '-')):>8}")
        def pick(m: dict | None, tag: str | None = tag) -> dict:
            return m if tag is None else (m or {}).get(tag, {})
        be, st, cr = pick(summ.breakeven), pick(summ.status), pick(summ.crossings)
        rg = pick(summ.breakeven_interval) or {}
        grid = [float(v) for v in sub[axis].unique()] if axis != DRAFTER else []
        for lab in labels:
            b = be.get(lab)
            c = cr.get(lab) or []
            way = {"down": "falls below 1", "up": "rises above 1"}[c[0]["direction"]] if c else ""
            past = (" past saturation" if c and c[0].get("saturated") else "") + (
                " between KV-limited points (the batch asked for was not reached)" if c and c[0].get("kv_limited")
                else "")
            note = "" if st.get(lab) in ("crosses", None) else f"; {st[lab]}"
            ran = f"; plain decoding ran a mean batch of about {ran_at(sub, b):.3g} there" \
                if achieved and b is not None and math.isfinite(ran_at(sub, b)) else ""
            lines.append(f"  {'status' if axis == DRAFTER else 'break-even'} {lab:<22} "
                         + (f"{axis} = {b:.4g} (speedup {way}{past}){ran}{note}" if b is not None
                            else st.get(lab, "")) + range_text(rg.get(lab), c, st.get(lab), axis, grid))
        sat, kv = pick(summ.saturation), pick(summ.kv_limited)
        stable = {"saturates (queue grows)": _last_stable(sub, axis, "base_saturated", (sat or {}).get(PLAIN)),
                  "is KV-limited": _last_stable(sub, axis, "base_kv_limited", (kv or {}).get(PLAIN))}
        lines += saturation_lines(sat, kv, labels, axis, stable)
        if achieved:
            lines.append(f"  {axis}: the closed-loop users asked for, what the break-even is against; achieved B: the "
                         "mean batch plain decoding ran (its scheduler, prefill and KV cache can keep it lower)")
        if achieved and (kv or {}).get(PLAIN) is not None:
            held = sub["kv_sequences"].dropna()
            if len(held):
                lines.append(f"  plain decoding's KV cache holds about {float(held.iloc[0]):.0f} requests of the mean "
                             "length: a larger B is not reached")
    if "saturated" in df:
        lines += [MARKS["S"]] if (df["saturated"].astype(bool) | df["base_saturated"].astype(bool)).any() else []
        if df["saturated"].isna().all() and df["base_saturated"].isna().all() and len(df):
            lines.append("saturation not judged: trace arrivals are not stationary (a burst near the end is "
                         "no overload); a Poisson rate is (--set 'workload.arrival={process: poisson, qps: Q}')")
        lines += [MARKS["M"]] if (df["kv_limited"] | df["base_kv_limited"]).any() else []
    lines.append(edge_line(df, axis, summ.best_k))
    lines += capacity_lines(res.capacity, labels)
    lines.append(group_note(*scenario_group(res.source), each=axis == DRAFTER))
    if capacity:
        lines.append("cells: speculative capacity (Poisson requests/s per GPU within the SLO) and its speedup "
                     "over plain decoding's (plain/GPU)")
    if axis in ANALYTIC_AXES and df["analytic_speedup"].notna().any():
        lines.append("(parenthesised: the analytic model at the same point)")
    errs = df[df["error"] != ""]
    if len(errs):
        lines.append(f"{len(errs)} point(s) failed, e.g. {errs['error'].iloc[0]}")
    lines.append(simulated_line(res.points_simulated, res.points_total, elapsed))
    lines += [f"wrote {p}" for p in files.values()]
    return "\n".join(x for x in lines if x)


def ran_at(sub: pd.DataFrame, batch: float) -> float:
    """The mean batch plain decoding ran at a batch asked for, interpolated in log batch between
    the simulated batches (NaN outside them)."""
    import numpy as np
    g = sub.groupby("batch", sort=True)["base_mean_batch"].first().dropna()
    if not len(g) or not g.index.min() <= batch <= g.index.max():
        return math.nan
    return float(np.interp(math.log(batch), np.log(g.index.to_numpy(dtype=float)), g.to_numpy(dtype=float)))


def edge_line(df: pd.DataFrame, axis: str, best_k: Mapping[str, Any]) -> str:
    """'' unless the best K at some point is the largest static K tried (of two or more): then where,
    and which flag tries a larger one (a best K at the grid's edge is not known to be the best)."""
    ks = sorted({int(k) for k in df.loc[df["policy"] == "static", "k"].dropna()}) if len(df) else []
    if len(ks) < 2:
        return ""
    flat = {f"{v} ({tag})": k for tag, sub in best_k.items() for v, k in sub.items()} \
        if any(isinstance(b, Mapping) for b in best_k.values()) else best_k
    at = [str(v) for v, k in flat.items() if k == ks[-1]]
    if not at:
        return ""
    where = "over the whole axis" if axis == "k" else f"at {axis} = {', '.join(at)}"
    return (f"best K {where} is the largest K tried (K={ks[-1]}): a larger K may pay more; extend "
            f"{'--values' if axis == 'k' else '--k'}")


def simulated_line(simulated: int, total: int, elapsed_s: float) -> str:
    from_store = f" ({total - simulated} from the store)" if simulated < total else ""
    return f"simulated {simulated} of {total} points{from_store} in {elapsed_s:.1f} s"
