"""`specsight breakeven SCENARIO.yaml --axis {batch,qps,context,alpha,k} [--values ...] ...`

Sweeps one axis of a scenario with the simulator and finds where speculation stops paying
(speedup crosses 1). Each curve is one speculation setting: a static K (`--k`) or a policy
(`--policies goodput,adaptive,batch_schedule`). What an axis value changes in the scenario:

| axis    | override                                                            | x scale |
| ------- | ------------------------------------------------------------------- | ------- |
| batch   | closed-loop users = B (num_requests = max(min, requests/user x B))  | log     |
| qps     | Poisson arrivals at this rate (requests/s); a trace keeps its times, rescaled to it | log |
| context | prompt length = c tokens (every decode step then reads c + t)      | log     |
| alpha   | i.i.d. acceptance alpha                                             | linear  |
| k       | num_speculative_tokens = K (curves are policies, not Ks)            | linear  |

Speedup: each (point, curve) is simulated, and so is the point with speculation off (policy
off, same seed, so the same arrivals and lengths: common random numbers). This is what
`simulate(..., baseline=True)` computes; the baseline is shared by every curve of a point rather
than re-run for each. The metric is output-token throughput for closed-loop load (fixed users:
throughput ratio = per-user speedup) and TPOT p50 (plain / speculative) for open-loop load, where
throughput just follows the offered rate below capacity; `--metric` picks another.

Break-even: linear interpolation between adjacent points whose speedups straddle 1, in log x for
batch, qps and context. The analytic model (simulator.analytic.speedup: no queueing, no prefill)
is overlaid on batch, context and alpha axes, at the point's batch (batch axis) or at the
baseline's simulated mean batch (context and alpha axes).
"""
from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from simulator.errors import SpecsightInputError, require_int

from .sweep import default_workers, describe_scenario, open_executor, own_policy, run_points, scenario_source

AXES = ("batch", "qps", "context", "alpha", "k")
LOG_AXES = ("batch", "qps", "context")
ANALYTIC_AXES = ("batch", "context", "alpha")
DEFAULT_VALUES = {"batch": "1,2,4,8,16,32,64,128,256",
                  "context": "1024,4096,16384,32768,65536,131072",
                  "alpha": "0.3,0.4,0.5,0.6,0.7,0.8,0.9",
                  "k": "1,2,3,4,5,6"}
AXIS_LABELS = {"batch": "concurrent sequences B (closed-loop users)",
               "qps": "offered load (requests/s, Poisson arrivals)",
               "context": "prompt length (tokens)",
               "alpha": "per-token acceptance rate alpha (i.i.d.)",
               "k": "draft tokens per round K"}
POLICIES = ("static", "goodput", "adaptive", "batch_schedule")
METRICS = {  # name: (summary key, higher is better) -> speedup = spec/base (throughput) or base/spec (latency)
    "throughput": ("output_tokens_per_s", True),
    "goodput": ("goodput_requests_per_s", True),
    "tpot_p50": ("tpot_ms_p50", False),
    "tpot_p99": ("tpot_ms_p99", False),
    "e2e_p50": ("e2e_ms_p50", False),
    "itl_p50": ("itl_ms_p50", False),
}
METRIC_LABELS = {"throughput": "output tokens/s, speculative / plain",
                 "goodput": "requests/s within SLO, speculative / plain",
                 "tpot_p50": "TPOT p50, plain / speculative", "tpot_p99": "TPOT p99, plain / speculative",
                 "e2e_p50": "E2E latency p50, plain / speculative", "itl_p50": "ITL p50, plain / speculative"}
MIN_REQUESTS = 24            # batch axis: fewest requests per point (B = 1 still sees 24 requests)
REQUESTS_PER_USER = 4        # batch axis: requests per closed-loop user (steady state, then drain)


def add_scenario_args(p: argparse.ArgumentParser) -> None:
    """Flags of the simulated mode (cli.py already defines scenario, --k, --out, --json)."""
    p.add_argument("--axis", choices=AXES, default="batch", help="what to sweep (default batch)")
    p.add_argument("--values", help="comma-separated axis values (defaults: batch " + DEFAULT_VALUES["batch"]
                   + "; context " + DEFAULT_VALUES["context"] + "; alpha " + DEFAULT_VALUES["alpha"]
                   + "; k " + DEFAULT_VALUES["k"] + "; qps: the scenario's rate x 1/4 .. x 4)")
    p.add_argument("--policies", default="static",
                   help="comma-separated curves besides/instead of static K: static,goodput,adaptive,batch_schedule")
    p.add_argument("--axis2", choices=AXES, help="second axis: a heatmap of speedup over both axes")
    p.add_argument("--values2", help="comma-separated values of --axis2")
    p.add_argument("--metric", choices=sorted(METRICS), help="speedup metric (default: throughput for "
                   "closed-loop load, tpot_p50 for open-loop)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a scenario value first (parsed as YAML); repeatable")
    p.add_argument("--requests-per-user", type=int, default=REQUESTS_PER_USER,
                   help=f"batch axis: requests per closed-loop user (default {REQUESTS_PER_USER}, at least {MIN_REQUESTS} in all)")
    p.add_argument("--workers", type=int, help="local processes (default: CPU count; 1 = in this process)")
    p.add_argument("--dask", metavar="ADDRESS", help="run the points on a dask.distributed scheduler, e.g. tcp://host:8786")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--no-plot", action="store_true", help="write the CSV only (no PNGs)")


# ---- parsing --------------------------------------------------------------------------------------
def parse_values(field: str, text: str, axis: str) -> list[float]:
    try:
        vals = [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise SpecsightInputError(field, text, "a comma-separated list of numbers, e.g. 1,2,4,8") from None
    if not vals:
        raise SpecsightInputError(field, text, "at least one value")
    for v in vals:
        if not math.isfinite(v):
            raise SpecsightInputError(field, v, "finite numbers only")
        if axis in ("batch", "context", "k"):
            require_int(field, v, lo=1)
        elif axis == "qps" and v <= 0:
            raise SpecsightInputError(field, v, "request rates must be > 0")
        elif axis == "alpha" and not 0.0 <= v <= 1.0:
            raise SpecsightInputError(field, v, "acceptance rates lie in [0, 1]")
    vals = sorted(set(vals))
    return [int(v) for v in vals] if axis in ("batch", "context", "k") else vals


def trace_qps(source: Mapping[str, Any]) -> float:
    """Requests/s of a trace workload replayed at time_scale 1 (over the rows the scenario replays)."""
    from simulator.scenario import load_scenario
    from simulator.workload import arrival_times
    wl = load_scenario(source).workload
    n = wl.n_requests
    t = arrival_times(wl, n, np.random.default_rng(0))      # a trace's own times: nothing is drawn
    if n < 2 or t[-1] <= t[0]:
        raise SpecsightInputError("workload.arrival.path", wl.trace_path, "the qps axis needs a trace spanning > 0 s")
    return (n - 1) / float(t[-1] - t[0]) * wl.time_scale


def _arrival(source: Mapping[str, Any]) -> Mapping[str, Any]:
    """The scenario's workload.arrival block ({} when it is absent or a flat string form)."""
    arr = (source.get("workload") or {}).get("arrival")
    return arr if isinstance(arr, Mapping) else {}


def default_values(axis: str, source: Mapping[str, Any]) -> str:
    if axis != "qps":
        return DEFAULT_VALUES[axis]
    arr = _arrival(source)
    q = arr.get("qps")
    if arr.get("process") == "trace":
        t = arr.get("time_scale", 1.0)
        q = trace_qps(source) / float(t if t is not None else 1.0)
    if not q:
        raise SpecsightInputError("--values", None, "the qps axis needs --values unless the scenario has an arrival rate (qps)")
    return ",".join(f"{float(q) * f:.4g}" for f in (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0))


# ---- points ----------------------------------------------------------------------------------------
def axis_overrides(axis: str, value: float, source: Mapping[str, Any], requests_per_user: int,
                   trace_rate: float | None = None) -> dict[str, Any]:
    """The key-path overrides that put the scenario at `value` on `axis`. trace_rate: the
    scenario's trace_qps where the caller has it (a sweep computes it once)."""
    arr = _arrival(source)
    if axis == "batch":
        b = int(value)
        out: dict[str, Any] = {"workload.arrival": {"process": "closed_loop", "concurrency": b,
                                                    "think_time_s": float(arr.get("think_time_s", 0.0)) if arr.get("process") == "closed_loop" else 0.0},
                               "workload.num_requests": max(MIN_REQUESTS, requests_per_user * b)}
        eng = source.get("engine") or {}
        if b > int(eng.get("max_num_seqs", 256)):    # the engine limit would cap the batch below B
            out["engine.max_num_seqs"] = b
            out["engine.max_num_batched_tokens"] = max(b, int(eng.get("max_num_batched_tokens", 8192)))
        return out
    if axis == "qps":
        proc = arr.get("process")
        if proc == "trace":     # keep the trace's lengths and burstiness; rescale its clock to this rate
            rate = trace_rate if trace_rate is not None else trace_qps(source)
            return {"workload.arrival": {**arr, "time_scale": rate / float(value)}}
        new = {"process": proc, "qps": float(value)} if proc in ("poisson", "gamma", "constant") else \
            {"process": "poisson", "qps": float(value)}
        if proc == "gamma":
            new["cv"] = arr.get("cv")
        return {"workload.arrival": new}
    if axis == "context":
        return {"workload.prompt_len": int(value)}
    if axis == "alpha":
        return {"acceptance": {"model": "iid", "alpha": float(value)}}
    if axis == "k":
        return {"drafter.num_speculative_tokens": int(value)}
    raise SpecsightInputError("--axis", axis, "one of " + ", ".join(AXES))


@dataclass(frozen=True)
class Curve:
    label: str                # "K=3" or "policy=goodput"
    k: int | None             # static K (None for a policy curve, or on the k axis)
    policy: str
    overrides: Mapping[str, Any]


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
                curves += [Curve(f"K={k}", k, "static", {"drafter.num_speculative_tokens": k, "policy": {"kind": "static"}})
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
            ov["drafter.num_speculative_tokens"] = max(kmax, max((r[1] for r in mapping.get("schedule", [])), default=0))
        curves.append(Curve(f"policy={pol}", None, pol, ov))
    return curves


def baseline_overrides(axis_ov: Mapping[str, Any]) -> dict[str, Any]:
    """Speculation off at this point; acceptance and K do not matter then, so alpha and k points
    share one baseline."""
    ov = {k: v for k, v in axis_ov.items() if k not in ("acceptance", "drafter.num_speculative_tokens")}
    ov["policy"] = {"kind": "off"}
    return ov


# ---- analytic --------------------------------------------------------------------------------------
class Analytic:
    """The scenario's cost model and drafter for simulator.analytic (roofline hardware only)."""

    def __init__(self, source: Mapping[str, Any]):
        from simulator.cost_model import CostModel
        from simulator.drafters import Drafter
        from simulator.hardware import load_profile
        from simulator.model_spec import load_model
        from simulator.scenario import load_scenario
        from simulator.workload import generate_requests

        sc = load_scenario(source)
        self.scenario = sc
        hw = sc.hardware
        target = load_model(sc.model)    # type: ignore[arg-type]
        self.cm = CostModel(target, load_profile(hw.profile or hw.gpu), tp=int(hw.tp), dtype=hw.dtype,   # type: ignore[arg-type]
                            kv_dtype=hw.kv_dtype)
        self.drafter = Drafter(sc.drafter, target, self.cm)   # type: ignore[arg-type]
        reqs = generate_requests(sc.workload, np.random.default_rng(sc.seed))
        self.mean_prompt = float(np.mean(reqs.prompt_len))
        self.mean_output = float(np.mean(reqs.output_len))

    @property
    def mean_context(self) -> float:
        """Mean tokens cached during decode: the prompt plus half the output."""
        return self.mean_prompt + self.mean_output / 2.0

    def alpha(self, k: int) -> float:
        """The i.i.d. alpha giving the scenario's acceptance model's expected tokens at K."""
        from simulator.acceptance import expected_tokens
        from simulator.acceptance_presets import alpha_for_tau
        from simulator.spec_math import candidate_alpha
        tau = expected_tokens(self.scenario.acceptance.alphas(k))
        alpha = float(alpha_for_tau(min(tau, k + 1.0), k))
        s = self.drafter.spec
        if self.scenario.acceptance.per_depth and s.branches > 1:
            # the preset's rates already count a depth as accepted when any branch is: hand the
            # analytic model the per-candidate alpha, which it turns back into this per-depth rate
            alpha = candidate_alpha(alpha, s.branches)
        return alpha

    def speedup(self, batch, context, k: int, alpha: float):
        from simulator.analytic import speedup
        return speedup(self.cm, self.drafter, np.asarray(batch, dtype=float), np.asarray(context, dtype=float), k, alpha)

    def best_k(self, batch: float, context: float, kmax: int) -> int:
        s = [float(self.speedup(batch, context, k, self.alpha(k))) for k in range(1, kmax + 1)]
        i = int(np.argmax(s))
        return i + 1 if s[i] > 1.0 else 0

    def batch_schedule(self, kmax: int, max_batch: int = 1024) -> list[list[int]]:
        """vLLM / TensorRT-LLM style [[max_batch, k], ...] from the analytic best K at each power of 2."""
        rows: list[list[int]] = []
        b = 1
        while b <= max_batch:
            k = self.best_k(b, self.mean_context, kmax)
            if rows and rows[-1][1] == k:
                rows[-1][0] = b
            else:
                rows.append([b, k])
            b *= 2
        if rows and rows[-1][1] == 0:   # past the last row K is 0 anyway
            rows.pop()
        return rows or [[1, 0]]


# ---- break-even ------------------------------------------------------------------------------------
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
    v = [float(y) for y in ys if y is not None and math.isfinite(float(y))]
    if not v:
        return "no data"
    if min(v) > 1.0:
        return "pays throughout"
    if max(v) < 1.0:
        return "never pays"
    return "crosses"


def _num(v: float) -> Any:
    return int(v) if float(v).is_integer() else float(v)


def _get(summary: Mapping[str, Any] | None, key: str) -> float:
    if not summary:
        return math.nan
    v = summary.get(key)
    return math.nan if v is None else float(v)


def ratio(spec: Mapping[str, Any] | None, base: Mapping[str, Any] | None, metric: str) -> float:
    key, higher = METRICS[metric]
    a, b = _get(spec, key), _get(base, key)
    if not (math.isfinite(a) and math.isfinite(b)) or (a if not higher else b) == 0:
        return math.nan
    return a / b if higher else b / a


# ---- the run ---------------------------------------------------------------------------------------
def breakeven_table(scenario: Any, axis: str, values: Sequence[float], ks: Sequence[int], policies: Sequence[str],
                    *, axis2: str | None = None, values2: Sequence[float] = (), metric: str | None = None,
                    requests_per_user: int = REQUESTS_PER_USER, store_path: str | Path | None = None,
                    executor: Any = None, progress: bool = True) -> dict[str, Any]:
    """Simulate the sweep and return {"rows": DataFrame, "meta": {...}} (nothing is written but the store)."""
    import pandas as pd

    source = scenario_source(scenario)
    if source.get("drafter") is None:
        raise SpecsightInputError("drafter", None, "breakeven needs a scenario with a drafter (what would it speculate with?)")
    if axis2 is not None:
        groups = {"batch": "arrival", "qps": "arrival"}
        if axis2 == axis or groups.get(axis2, axis2) == groups.get(axis, axis):
            raise SpecsightInputError("--axis2", axis2, f"must change something other than --axis {axis}")
    roofline = (source.get("hardware") or {}).get("kind", "roofline") == "roofline"
    analytic = Analytic(source) if roofline else None
    derive = analytic is not None and "batch_schedule" in policies and own_policy(source).get("kind") != "batch_schedule"
    schedule = analytic.batch_schedule(max(ks)) if derive else None    # type: ignore[union-attr]
    curves = build_curves(axis, ks, policies, source, schedule)
    if axis2 == "k":
        curves = [c for c in curves if c.k is None]
        if not curves:
            raise SpecsightInputError("--axis2", axis2, "with --axis2 k, pass --policies with at least one curve")
    grid2: list[float | None] = list(values2) if axis2 else [None]

    trace = "qps" in (axis, axis2) and _arrival(source).get("process") == "trace"
    rate = trace_qps(source) if trace else None          # the scenario's, the same at every cell
    cells = []          # (v, v2, axis overrides)
    for v2 in grid2:
        for v in values:
            ov = axis_overrides(axis, v, source, requests_per_user, rate)
            if axis2 is not None and v2 is not None:
                ov.update(axis_overrides(axis2, v2, source, requests_per_user, rate))
            cells.append((v, v2, ov))
    spec_pts, base_pts = [], []
    for v, v2, ov in cells:
        base_pts.append(baseline_overrides(ov))
        for c in curves:
            p = dict(ov)
            p.update(c.overrides)
            if axis == "k" or axis2 == "k":           # the axis sets K: a curve must not override it
                p["drafter.num_speculative_tokens"] = ov["drafter.num_speculative_tokens"]
            spec_pts.append(p)
    uniq_base = list({_freeze(b): b for b in base_pts}.values())
    recs = run_points(source, spec_pts + uniq_base, store_path, executor, progress=progress,
                      desc=f"breakeven {axis}")
    by_key = {_freeze(p): r for p, r in zip(spec_pts + uniq_base, recs)}

    rows = []
    i = 0
    for v, v2, ov in cells:
        base = by_key[_freeze(baseline_overrides(ov))]
        bsum = base["summary"]
        closed = ov.get("workload.arrival", source["workload"].get("arrival", {})).get("process") == "closed_loop"
        m = metric or ("throughput" if closed else "tpot_p50")
        for c in curves:
            rec = by_key[_freeze(spec_pts[i])]
            i += 1
            s = rec["summary"]
            k = c.k if c.k is not None else (int(ov["drafter.num_speculative_tokens"]) if "drafter.num_speculative_tokens" in ov else None)
            row = {axis: _num(v)}
            if axis2:
                row[axis2] = _num(v2)   # type: ignore[arg-type]
            row.update({"curve": c.label, "k": k, "policy": c.policy, "metric": m, "speedup": ratio(s, bsum, m),
                        "analytic_speedup": math.nan,
                        "spec_output_tokens_per_s": _get(s, "output_tokens_per_s"),
                        "base_output_tokens_per_s": _get(bsum, "output_tokens_per_s"),
                        "spec_tpot_ms_p50": _get(s, "tpot_ms_p50"), "spec_tpot_ms_p99": _get(s, "tpot_ms_p99"),
                        "base_tpot_ms_p50": _get(bsum, "tpot_ms_p50"), "base_tpot_ms_p99": _get(bsum, "tpot_ms_p99"),
                        "spec_ttft_ms_p99": _get(s, "ttft_ms_p99"), "base_ttft_ms_p99": _get(bsum, "ttft_ms_p99"),
                        "mean_batch": _get(s, "mean_batch"), "base_mean_batch": _get(bsum, "mean_batch"),
                        "mean_k": _get(s, "mean_k"), "mean_tokens_per_round": _get(s, "mean_tokens_per_round"),
                        "num_requests": _get(s, "num_requests"),
                        "error": rec["error"] or base["error"] or ""})
            if analytic is not None and c.k is not None and axis in ANALYTIC_AXES and (axis2 is None or axis2 in ANALYTIC_AXES):
                row["analytic_speedup"] = _analytic_point(analytic, axis, v, axis2, v2, c.k, row["base_mean_batch"])
            rows.append(row)
    df = pd.DataFrame(rows)
    sc_meta = describe_scenario(source)
    return {"rows": df, "curves": curves, "analytic": analytic, "source": source, "meta": sc_meta,
            "points_simulated": sum(1 for r in recs if not r["cached"]), "points_total": len(recs),
            "schedule": schedule}


def _analytic_point(an: Analytic, axis: str, v: float, axis2: str | None, v2: float | None, k: int, sim_batch: float) -> float:
    vals = {axis: v}
    if axis2 is not None:
        vals[axis2] = v2   # type: ignore[assignment]
    batch = vals.get("batch", sim_batch if math.isfinite(sim_batch) else 1.0)
    ctx = vals["context"] + an.mean_output / 2.0 if "context" in vals else an.mean_context
    alpha = vals["alpha"] if "alpha" in vals else an.alpha(k)
    return float(an.speedup(batch, ctx, k, alpha))


def _freeze(d: Mapping[str, Any]) -> str:
    import json
    return json.dumps(d, sort_keys=True, default=str)


def summarize_curves(df, axis: str, axis2: str | None) -> dict[str, Any]:
    """break-even per curve (first crossing, None when none), all crossings, status and best K per point."""
    log = axis in LOG_AXES
    out: dict[str, Any] = {}

    def one(sub) -> tuple[dict, dict, dict]:
        be, cr, st = {}, {}, {}
        for label, g in sub.groupby("curve", sort=False):
            g = g.sort_values(axis)
            c = crossings(g[axis].tolist(), g["speedup"].tolist(), log)
            cr[label] = c
            be[label] = c[0]["at"] if c else None
            st[label] = status(g["speedup"].tolist())
        return be, cr, st

    def best_k(sub) -> dict[str, int | None]:
        res: dict[str, int | None] = {}
        st = sub[sub["policy"] == "static"].dropna(subset=["speedup"])
        if axis == "k":        # one static K per point: the best K is the best over the whole axis
            if not len(st):
                return res
            j = st["speedup"].idxmax()
            best = int(st.loc[j, "k"]) if st.loc[j, "speedup"] > 1.0 else 0
            return {str(_num(v)): best for v in sorted(st[axis].unique())}
        for v, g in st.groupby(axis, sort=True):
            if g["k"].isna().all():
                continue
            j = g["speedup"].idxmax()
            res[str(_num(v))] = int(g.loc[j, "k"]) if g.loc[j, "speedup"] > 1.0 else 0
        return res

    if axis2 is None:
        out["breakeven"], out["crossings"], out["status"] = one(df)
        out["best_k"] = best_k(df)
        an = df.dropna(subset=["analytic_speedup"])
        if len(an):
            out["analytic_breakeven"] = {label: (lambda c: c[0]["at"] if c else None)(
                crossings(g.sort_values(axis)[axis].tolist(), g.sort_values(axis)["analytic_speedup"].tolist(), log))
                for label, g in an.groupby("curve", sort=False)}
        return out
    out["breakeven"], out["crossings"], out["status"], out["best_k"] = {}, {}, {}, {}
    for v2, sub in df.groupby(axis2, sort=True):
        tag = f"{axis2}={_num(v2)}"
        out["breakeven"][tag], out["crossings"][tag], out["status"][tag] = one(sub)
        out["best_k"][tag] = best_k(sub)
    return out


def _legend_note(breakeven: Mapping[str, Any], analytic) -> str:
    """' (X = break-even, dotted = analytic model)', naming only the marks the plot draws."""
    parts = (["X = break-even"] if any(v is not None for v in breakeven.values()) else []) \
        + (["dotted = analytic model"] if analytic is not None and len(analytic) else [])
    return f" ({', '.join(parts)})" if parts else ""


def write_outputs(res: dict[str, Any], axis: str, axis2: str | None, out_dir: Path, metric_name: str,
                  plot: bool = True) -> dict[str, str]:
    from . import plots

    out_dir.mkdir(parents=True, exist_ok=True)
    df = res["rows"]
    meta = res["meta"]
    files: dict[str, str] = {}
    stem = f"breakeven_{axis}" + (f"_{axis2}" if axis2 else "")
    csv = out_dir / f"{stem}.csv"
    df.to_csv(csv, index=False)
    files["csv"] = str(csv)
    summ = summarize_curves(df, axis, axis2)
    res["summary"] = summ
    if not plot:
        return files
    ylabel = f"speedup over plain decoding ({METRIC_LABELS[metric_name]})"
    head = f"{meta['scenario']}: {meta['deployment']}, drafter {meta['drafter']}"
    if axis2 is None:
        dense = _dense_analytic(res, axis, df)
        png = plots.plot_breakeven(
            df, x=axis, breakeven=summ["breakeven"], analytic=dense,
            title=f"{head}\nsimulated speedup vs {axis}" + _legend_note(summ["breakeven"], dense),
            xlabel=AXIS_LABELS[axis], ylabel=ylabel, path=out_dir / f"{stem}.png", logx=axis in LOG_AXES)
        files["plot"] = str(png)
    else:
        best = df.groupby([axis, axis2], sort=True).apply(_best_row, include_groups=False).reset_index()
        png = plots.plot_speedup_heatmap(
            best, x=axis, y=axis2, title=f"{head}\nbest simulated speedup over {axis} x {axis2} (cell: speedup, best curve)",
            xlabel=AXIS_LABELS[axis], ylabel=AXIS_LABELS[axis2], path=out_dir / f"{stem}_heatmap.png",
            colorbar_label=ylabel)
        files["heatmap"] = str(png)
        png = plots.plot_best_speedup_lines(
            best, x=axis, group=axis2, title=f"{head}\nbest speedup over the curves vs {axis}, one line per {axis2}",
            xlabel=AXIS_LABELS[axis], ylabel=ylabel, path=out_dir / f"{stem}.png", logx=axis in LOG_AXES)
        files["plot"] = str(png)
    if axis2 is None:
        png = plots.plot_latency_throughput(
            df, x_axis=axis, title=f"{head}\nTPOT vs output throughput, with and without speculation (points: {axis} values)",
            path=out_dir / f"latency_throughput_{axis}.png")
        files["latency_plot"] = str(png)
    return files


def _best_row(g):
    import pandas as pd
    g = g.dropna(subset=["speedup"])
    if not len(g):
        return pd.Series({"speedup": math.nan, "curve": ""})
    j = g["speedup"].idxmax()
    return pd.Series({"speedup": g.loc[j, "speedup"], "curve": g.loc[j, "curve"]})


def _dense_analytic(res: dict[str, Any], axis: str, df):
    """Analytic curves on a fine grid (batch axis) or at the simulated points (context, alpha)."""
    import pandas as pd
    an: Analytic | None = res["analytic"]
    if an is None or axis not in ANALYTIC_AXES:
        return None
    rows = []
    for c in res["curves"]:
        if c.k is None:
            continue
        if axis == "batch":
            xs = np.geomspace(max(1.0, float(df[axis].min())), float(df[axis].max()), 64)
            ys = an.speedup(xs, an.mean_context, c.k, an.alpha(c.k))
            rows += [{axis: float(x), "curve": c.label, "speedup": float(y)} for x, y in zip(xs, ys)]
        else:
            g = df[df["curve"] == c.label]
            rows += [{axis: float(x), "curve": c.label, "speedup": float(y)} for x, y in zip(g[axis], g["analytic_speedup"])]
    return pd.DataFrame(rows) if rows else None


def format_text(res: dict[str, Any], axis: str, axis2: str | None, files: Mapping[str, str], elapsed: float) -> str:
    df, summ, meta = res["rows"], res["summary"], res["meta"]
    lines = [f"{meta['scenario']}: {meta['deployment']}, drafter {meta['drafter']}",
             f"speedup metric: {METRIC_LABELS[df['metric'].iloc[0]]}" if len(df) else ""]
    if res.get("schedule"):
        lines.append(f"batch_schedule (derived from the analytic best K): {res['schedule']}")
    labels = list(dict.fromkeys(df["curve"]))
    blocks = [(None, df)] if axis2 is None else [(v2, g) for v2, g in df.groupby(axis2, sort=True)]
    for v2, sub in blocks:
        if v2 is not None:
            lines.append(f"-- {axis2} = {_num(v2)}")
        width = {lab: max(16, len(lab) + 2) for lab in labels}
        hdr = f"{axis:>10}" + "".join(f"{lab:>{width[lab]}}" for lab in labels) + f"{'best K':>8}"
        lines.append(hdr)
        bk = summ["best_k"] if axis2 is None else summ["best_k"].get(f"{axis2}={_num(v2)}", {})
        for v, g in sub.groupby(axis, sort=True):
            cells = []
            for lab in labels:
                r = g[g["curve"] == lab]
                s = float(r["speedup"].iloc[0]) if len(r) else math.nan
                a = float(r["analytic_speedup"].iloc[0]) if len(r) else math.nan
                txt = "error" if len(r) and r["error"].iloc[0] else (f"{s:.3f}" if math.isfinite(s) else "-")
                if math.isfinite(a):
                    txt += f" ({a:.2f})"
                cells.append(f"{txt:>{width[lab]}}")
            lines.append(f"{_num(v)!s:>10}" + "".join(cells) + f"{str(bk.get(str(_num(v)), '-')):>8}")
        be = summ["breakeven"] if axis2 is None else summ["breakeven"].get(f"{axis2}={_num(v2)}", {})
        st = summ["status"] if axis2 is None else summ["status"].get(f"{axis2}={_num(v2)}", {})
        cr = summ["crossings"] if axis2 is None else summ["crossings"].get(f"{axis2}={_num(v2)}", {})
        for lab in labels:
            b = be.get(lab)
            way = {"down": "falls below 1", "up": "rises above 1"}[cr[lab][0]["direction"]] if cr.get(lab) else ""
            lines.append(f"  break-even {lab:<22} " + (f"{axis} = {b:.4g} (speedup {way})" if b is not None else st.get(lab, "")))
    if axis in ANALYTIC_AXES and df["analytic_speedup"].notna().any():
        lines.append("(parenthesised: the analytic model at the same point)")
    errs = df[df["error"] != ""]
    if len(errs):
        lines.append(f"{len(errs)} point(s) failed, e.g. {errs['error'].iloc[0]}")
    lines.append(f"simulated {res['points_simulated']} of {res['points_total']} points (the rest from the store) "
                 f"in {elapsed:.1f} s")
    lines += [f"wrote {p}" for p in files.values()]
    return "\n".join(x for x in lines if x)


def run(args: argparse.Namespace) -> int:
    from .foundation_cmds import emit_json, parse_int_list

    if not args.scenario:
        raise SpecsightInputError("scenario", None, "name a scenario YAML (or pass --analytic with --model/--gpu/--drafter/--alpha)")
    t0 = time.perf_counter()
    source = scenario_source(args.scenario, args.overrides)
    values = parse_values("--values", args.values or default_values(args.axis, source), args.axis)
    ks = parse_int_list("k", args.k, lo=1)
    policies = [p.strip() for p in str(args.policies).split(",") if p.strip()]
    for p in policies:
        if p not in POLICIES:
            raise SpecsightInputError("--policies", p, "comma-separated, from " + ", ".join(POLICIES))
    if not policies:
        raise SpecsightInputError("--policies", args.policies, "at least one of " + ", ".join(POLICIES))
    values2: list[float] = []
    if args.axis2:
        if not args.values2 and args.axis2 != "qps":
            values2 = parse_values("--values2", DEFAULT_VALUES[args.axis2], args.axis2)
        else:
            values2 = parse_values("--values2", args.values2 or default_values("qps", source), args.axis2)
    elif args.values2:
        raise SpecsightInputError("--values2", args.values2, "only with --axis2")
    if args.requests_per_user < 1:
        raise SpecsightInputError("--requests-per-user", args.requests_per_user, "must be an integer >= 1")
    out_dir = Path(args.out)
    n_guess = len(values) * max(1, len(values2)) * (len(ks) + len(policies))
    workers = args.workers if args.workers is not None else default_workers(n_guess)
    with open_executor(workers, args.dask) as ex:
        res = breakeven_table(source, args.axis, values, ks, policies, axis2=args.axis2, values2=values2,
                              metric=args.metric, requests_per_user=args.requests_per_user,
                              store_path=out_dir / "points.jsonl", executor=ex, progress=not args.no_progress)
    failed = res["rows"]["error"] != ""
    if len(failed) and failed.all():          # nothing to plot: say why, in one line
        raise SpecsightInputError("scenario", args.scenario, f"every point failed, e.g. {res['rows']['error'].iloc[0]}")
    metric_name = res["rows"]["metric"].iloc[0] if len(res["rows"]) else "throughput"
    files = write_outputs(res, args.axis, args.axis2, out_dir, metric_name, plot=not args.no_plot)
    files["store"] = str(out_dir / "points.jsonl")
    elapsed = time.perf_counter() - t0
    if args.json:
        df = res["rows"]
        obj = {**res["meta"], "axis": args.axis, "axis2": args.axis2, "metric": metric_name,
               "values": [_num(v) for v in values], "values2": [_num(v) for v in values2] or None,
               **res["summary"], "schedule": res["schedule"],
               "points": _records(df), "points_simulated": res["points_simulated"],
               "points_total": res["points_total"], "elapsed_s": round(elapsed, 2), "files": files}
        emit_json(_clean(obj))
    else:
        print(format_text(res, args.axis, args.axis2, files, elapsed))
    return 0


def _records(df) -> list[dict[str, Any]]:
    keep = [c for c in df.columns if c not in ("metric",)]
    return [_clean(r) for r in df[keep].to_dict("records")]


def _clean(v: Any) -> Any:
    from .sweep import json_safe
    return json_safe(v)
