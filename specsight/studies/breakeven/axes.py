"""The axes of a break-even study: what a value on each axis changes in the scenario.

| axis    | override                                                            | x scale |
| ------- | ------------------------------------------------------------------- | ------- |
| batch   | closed-loop users = B (num_requests = max(min, requests/user x B))  | log     |
| qps     | Poisson arrivals at this rate (requests/s); a trace keeps its times, rescaled to it | log |
| context | prompt length = c tokens (every decode step then reads c + t)      | log     |
| alpha   | i.i.d. acceptance alpha                                             | linear  |
| k       | num_speculative_tokens = K (curves are policies, not Ks)            | linear  |
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from simulator.common.errors import SpecsightInputError, require_int

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
AXIS_UNITS = {"batch": "sequences", "qps": "requests/s", "context": "tokens"}   # break-even ranges' text
# metric capacity: what an axis value caps where that differs from the axis above
CAPACITY_AXIS_LABELS = {"batch": "batch cap (engine.max_num_seqs; Poisson load searched)"}
MIN_REQUESTS = 24            # batch axis: fewest requests per point (B = 1 still sees 24 requests)
REQUESTS_PER_USER = 4        # batch axis: requests per closed-loop user (steady state, then drain)


def parse_values(field: str, text: str | Sequence[float], axis: str) -> list[float]:
    """Axis values from `1,2,4` text or a sequence of numbers: checked for the axis, sorted,
    duplicates dropped (ints on the batch, context and k axes)."""
    items = str(text).split(",") if isinstance(text, str) else list(text)
    try:
        vals = [float(x) for x in items if str(x).strip()]
    except (TypeError, ValueError):
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
    from simulator.scenario.scenario import load_scenario
    from simulator.workload.workload import arrival_times
    wl = load_scenario(source).workload
    n = wl.n_requests
    t = arrival_times(wl, n, np.random.default_rng(0))      # a trace's own times: nothing is drawn
    if n < 2 or t[-1] <= t[0]:
        raise SpecsightInputError("workload.arrival.path", wl.trace_path, "the qps axis needs a trace spanning > 0 s")
    return (n - 1) / float(t[-1] - t[0]) * wl.time_scale


def arrival_block(source: Mapping[str, Any]) -> Mapping[str, Any]:
    """The scenario's workload.arrival block ({} when it is absent or a flat string form)."""
    arr = (source.get("workload") or {}).get("arrival")
    return arr if isinstance(arr, Mapping) else {}


def default_values(axis: str, source: Mapping[str, Any]) -> str:
    if axis != "qps":
        return DEFAULT_VALUES[axis]
    arr = arrival_block(source)
    q = arr.get("qps")
    if arr.get("process") == "trace":
        t = arr.get("time_scale", 1.0)
        q = trace_qps(source) / float(t if t is not None else 1.0)
    if not q:
        raise SpecsightInputError("--values", None,
                                  "the qps axis needs --values unless the scenario has an arrival rate (qps)")
    return ",".join(f"{float(q) * f:.4g}" for f in (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0))


def axis_overrides(axis: str, value: float, source: Mapping[str, Any], requests_per_user: int,
                   trace_rate: float | None = None) -> dict[str, Any]:
    """The key-path overrides that put the scenario at `value` on `axis`. trace_rate: the
    scenario's trace_qps where the caller has it (a sweep computes it once)."""
    arr = arrival_block(source)
    if axis == "batch":
        b = int(value)
        think_s = float(arr.get("think_time_s", 0.0)) if arr.get("process") == "closed_loop" else 0.0
        out: dict[str, Any] = {"workload.arrival": {"process": "closed_loop", "concurrency": b,
                                                    "think_time_s": think_s},
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
