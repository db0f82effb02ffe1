"""A break-even study's curves run over its axis: each curve (a static K or a policy) with its
overrides, every point simulated with speculation on and off through the point store, and the
result (`BreakevenResult`: the frame, the verdict, the analytic overlay). study.py's `breakeven`
checks the arguments and runs this, or the capacity and per-engine variants built on it."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.common.errors import SpecsightInputError
from simulator.scenario.engine_spec import EngineSpec
from simulator.speculation.policies import ENGINE_RULES

from ..published.answer_intervals import with_speedup_interval
from ..shared.jsonable import json_safe
from ..shared.overrides import describe_scenario, own_policy
from ..shared.points import run_points
from ..shared.saturation import achieved_mean_batch, is_kv_limited, is_saturated, kv_sequences
from .analytic import Analytic
from .axes import (
    ANALYTIC_AXES,
    arrival_block,
    axis_overrides,
    trace_qps,
)
from .crossings import BreakevenVerdict, as_number, ratio, summary_value, verdict

POLICIES = ("static", "goodput", "adaptive", "batch_schedule") + tuple(ENGINE_RULES)


@dataclass(frozen=True)
class Curve:
    label: str                # "K=3" or "policy=goodput"
    k: int | None             # static K (None for a policy curve, or on the k axis)
    policy: str
    overrides: Mapping[str, Any]


@dataclass(frozen=True)
class BreakevenResult:
    """A simulated break-even study. `frame`: one row per (point, curve) with the speedup, the
    analytic model's (NaN where it does not apply), under a real engine its 80 % interval
    (`speedup_interval`, answer_intervals.py), both runs' headline metrics, and whether each
    run saturated or was KV-limited (saturation.py); `verdict`: break-even, crossings, status,
    best K and where the runs saturate (crossings.BreakevenVerdict); `capacity`: on the qps axis,
    each curve's capacity within the SLO (breakeven_capacity.curve_capacities)."""
    axis: str
    axis2: str | None
    values: list[float]
    values2: list[float]
    metric: str
    frame: Any                              # pandas.DataFrame
    verdict: BreakevenVerdict
    curves: list[Curve]
    meta: dict[str, Any]                    # {scenario, deployment, drafter} in words
    schedule: list[list[int]] | None        # the batch_schedule derived from the analytic model
    points_simulated: int
    points_total: int
    source: Mapping[str, Any]
    analytic: Analytic | None = None
    capacity: dict[str, Any] | None = None  # qps axis: each curve's capacity within the SLO (capacity.py)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: what `specsight breakeven --json` prints, less timing and files."""
        keep = [c for c in self.frame.columns if c != "metric"]
        return json_safe({**self.meta, "axis": self.axis, "axis2": self.axis2, "metric": self.metric,
                          "values": [as_number(v) for v in self.values],
                          "values2": [as_number(v) for v in self.values2] or None,
                          **self.verdict.to_dict(), "schedule": self.schedule,
                          "points": self.frame[keep].to_dict("records"), "points_simulated": self.points_simulated,
                          "points_total": self.points_total,
                          **({"capacity": self.capacity} if self.capacity is not None else {})})

    def write(self, out_dir: str | Path, plot: bool = True) -> dict[str, str]:
        """The CSV (and, with `plot`, the PNGs) under out_dir; returns {kind: path}."""
        from .outputs import write_outputs
        return write_outputs(self, Path(out_dir), plot=plot)


def build_curves(axis: str, ks: Sequence[int], policies: Sequence[str], source: Mapping[str, Any],
                 schedule: list[list[int]] | None) -> list[Curve]:
    kmax = max(ks)
    own = own_policy(source)
    curves: list[Curve] = []
    for pol in policies:
        if pol == "static":
            if axis == "k":
                curves.append(Curve("policy=static", None, "static", {"policy": {"kind": "static"}}))
            else:
                curves += [Curve(f"K={k}", k, "static",
                                 {"drafter.num_speculative_tokens": k, "policy": {"kind": "static"}})
                           for k in ks]
            continue
        if pol == "batch_schedule":
            if own.get("kind") == "batch_schedule":
                mapping = dict(own)
            elif schedule:
                mapping = {"kind": "batch_schedule", "schedule": schedule}
            else:
                raise SpecsightInputError("--policies", pol, "batch_schedule needs a schedule in the scenario's policy "
                                          "block (or a roofline scenario, to derive one from the analytic model)")
        else:
            mapping = dict(own) if own.get("kind") == pol else {"kind": pol}
        ov: dict[str, Any] = {"policy": mapping}
        if axis != "k":
            ov["drafter.num_speculative_tokens"] = max(kmax,
                                                       max((r[1] for r in mapping.get("schedule", [])), default=0))
        curves.append(Curve(f"policy={pol}", None, pol, ov))
    return curves


def baseline_overrides(axis_ov: Mapping[str, Any]) -> dict[str, Any]:
    """Speculation off at this point; drafter, acceptance and K do not matter then, so alpha, k
    and drafter points share one baseline."""
    ov = {k: v for k, v in axis_ov.items() if k not in ("drafter", "acceptance", "drafter.num_speculative_tokens")}
    ov["policy"] = {"kind": "off"}
    return ov


def curve_point(axis: str, ov: Mapping[str, Any], c: Curve, axis2: str | None = None) -> dict[str, Any]:
    """A curve's overrides at a point (the point's `ov` first; where an axis sets K, the curve
    must not override it)."""
    p = dict(ov)
    p.update(c.overrides)
    if axis == "k" or axis2 == "k":
        p["drafter.num_speculative_tokens"] = ov["drafter.num_speculative_tokens"]
    return p


def comma_names(flag: str, names: Sequence[str] | str, allowed: Sequence[str]) -> list[str]:
    """'a,b' or ["a", "b"] -> the names, in order, each once; each must be one of `allowed`."""
    text = names if isinstance(names, str) else ",".join(names)
    out = list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    for p in out:
        if p not in allowed:
            raise SpecsightInputError(flag, p, "comma-separated, from " + ", ".join(allowed))
    if not out:
        raise SpecsightInputError(flag, text, "at least one of " + ", ".join(allowed))
    return out


def study_curves(source: Mapping[str, Any], axis: str, ks: Sequence[int],
                 policies: Sequence[str]) -> tuple[list[Curve], list[list[int]] | None, Analytic | None]:
    """A study's curves, the batch schedule derived for a batch_schedule curve (or None) and the
    analytic overlay (roofline scenarios; None elsewhere)."""
    if source.get("drafter") is None:
        raise SpecsightInputError("drafter", None,
                                  "breakeven needs a scenario with a drafter (what would it speculate with?)")
    roofline = (source.get("hardware") or {}).get("kind", "roofline") == "roofline"
    analytic = _analytic_or_none(source) if roofline else None
    derive = (analytic is not None and "batch_schedule" in policies
              and own_policy(source).get("kind") != "batch_schedule")
    schedule = analytic.batch_schedule(max(ks)) if derive else None    # type: ignore[union-attr]
    return build_curves(axis, ks, policies, source, schedule), schedule, analytic


def run_study(source: Mapping[str, Any], axis: str, values: Sequence[float], ks: Sequence[int], policies: Sequence[str],
         axis2: str | None, values2: Sequence[float], metric: str | None, requests_per_user: int,
         store_path: Path | None, executor: Any, progress: bool) -> BreakevenResult:
    import pandas as pd

    if axis2 is not None:
        groups = {"batch": "arrival", "qps": "arrival"}
        if axis2 == axis or groups.get(axis2, axis2) == groups.get(axis, axis):
            raise SpecsightInputError("--axis2", axis2, f"must change something other than --axis {axis}")
    curves, schedule, analytic = study_curves(source, axis, ks, policies)
    if axis2 == "k":
        curves = [c for c in curves if c.k is None]
        if not curves:
            raise SpecsightInputError("--axis2", axis2, "with --axis2 k, pass --policies with at least one curve")
    grid2: list[float | None] = list(values2) if axis2 else [None]

    trace = "qps" in (axis, axis2) and arrival_block(source).get("process") == "trace"
    rate = trace_qps(source) if trace else None          # the scenario's, the same at every cell
    cells = []          # (v, v2, axis overrides)
    for v2 in grid2:
        for v in values:
            ov = axis_overrides(axis, v, source, requests_per_user, rate)
            if axis2 is not None and v2 is not None:
                ov.update(axis_overrides(axis2, v2, source, requests_per_user, rate))
            cells.append((v, v2, ov))
    spec_pts, base_pts = [], []
    for _v, _v2, ov in cells:
        base_pts.append(baseline_overrides(ov))
        spec_pts += [curve_point(axis, ov, c, axis2) for c in curves]
    uniq_base = list({_freeze(b): b for b in base_pts}.values())
    recs = run_points(source, spec_pts + uniq_base, store_path, executor, progress=progress,
                      desc=f"breakeven {axis}")
    by_key = {_freeze(p): r for p, r in zip(spec_pts + uniq_base, recs)}

    rows = []
    i = 0
    block_size = int((source.get("engine") or {}).get("block_size") or EngineSpec.block_size)
    for v, v2, ov in cells:
        base = by_key[_freeze(baseline_overrides(ov))]
        process = ov.get("workload.arrival", source["workload"].get("arrival", {})).get("process")
        m = metric or ("throughput" if process == "closed_loop" else "tpot_p50")
        for c in curves:
            rec = by_key[_freeze(spec_pts[i])]
            i += 1
            rows.append(_row(axis, v, axis2, v2, c, ov, m, rec, base, analytic, block_size, process))
    meta = describe_scenario(source)
    df = pd.DataFrame(rows)
    df.insert(0, "engine", meta["engine"])       # the engine every number of the row was priced under
    df = with_speedup_interval(df, source)
    return BreakevenResult(axis, axis2, list(values), list(values2), df["metric"].iloc[0] if len(df) else "throughput",
                           df, verdict(df, axis, axis2), curves, meta, schedule,
                           sum(1 for r in recs if not r["cached"]), len(recs), source, analytic)


def _analytic_or_none(source: Mapping[str, Any]) -> Analytic | None:
    """The analytic overlay, or None where the deployment cannot be built (the simulated points
    then report why, each in its error column)."""
    try:
        return Analytic(source)
    except SpecsightInputError:
        return None


def _row(axis: str, v: float, axis2: str | None, v2: float | None, c: Curve, ov: Mapping[str, Any], m: str,
         rec: Mapping[str, Any], base: Mapping[str, Any], analytic: Analytic | None, block_size: int,
         process: str | None) -> dict[str, Any]:
    s, bsum = rec["summary"], base["summary"]
    k = c.k if c.k is not None else (
        int(ov["drafter.num_speculative_tokens"]) if "drafter.num_speculative_tokens" in ov else None)
    row: dict[str, Any] = {axis: as_number(v)}
    if axis2:
        row[axis2] = as_number(v2)   # type: ignore[arg-type]
    row.update({"curve": c.label, "k": k, "policy": c.policy, "metric": m, "speedup": ratio(s, bsum, m),
                "analytic_speedup": math.nan,
                "spec_output_tokens_per_s": summary_value(s, "output_tokens_per_s"),
                "base_output_tokens_per_s": summary_value(bsum, "output_tokens_per_s"),
                "spec_tpot_ms_p50": summary_value(s, "tpot_ms_p50"),
                "spec_tpot_ms_p99": summary_value(s, "tpot_ms_p99"),
                "base_tpot_ms_p50": summary_value(bsum, "tpot_ms_p50"),
                "base_tpot_ms_p99": summary_value(bsum, "tpot_ms_p99"),
                "spec_ttft_ms_p99": summary_value(s, "ttft_ms_p99"),
                "base_ttft_ms_p99": summary_value(bsum, "ttft_ms_p99"),
                "mean_batch": achieved_mean_batch(s), "base_mean_batch": achieved_mean_batch(bsum),
                "saturated": is_saturated(s, process), "base_saturated": is_saturated(bsum, process),
                "kv_limited": is_kv_limited(s), "base_kv_limited": is_kv_limited(bsum),
                "kv_sequences": kv_sequences(bsum, block_size),
                "mean_k": summary_value(s, "mean_k"),
                "mean_tokens_per_round": summary_value(s, "mean_tokens_per_round"),
                "num_requests": summary_value(s, "num_requests"),
                "error": rec["error"] or base["error"] or ""})
    if analytic is not None and c.k is not None and axis in ANALYTIC_AXES and (axis2 is None or axis2 in ANALYTIC_AXES):
        swept = {axis: v, **({axis2: v2} if axis2 is not None else {})}
        row["analytic_speedup"] = analytic.point(swept, c.k, row["base_mean_batch"])
    return row


def _freeze(d: Mapping[str, Any]) -> str:
    return json.dumps(d, sort_keys=True, default=str)
