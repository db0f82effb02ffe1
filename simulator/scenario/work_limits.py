"""Work limits: a scenario whose run would take more memory or time than stated is refused before
it runs, with the limit it exceeds and how to raise it.

    limits:                       # the scenario's own block (or --set limits.max_tokens=...)
      max_requests: 2000000       # requests per run: memory grows about 5 kB per request
                                  # (benchmarks/results/simulator_cpu.md: 100,000 requests, 0.53 GB peak)
      max_tokens: 2000000000      # num_requests x (mean prompt_len + mean output_len): the run's work
                                  # (the simulator covers 10^5-10^7 tokens per CPU-second)
      max_batch_slots: 10000000   # replicas x engine.max_num_seqs: arrays every replica holds
      max_replicas: 10000         # hardware.replicas: about 100 kB each (2,000 replicas: 186 MB peak)

The defaults (LIMITS below) fit a laptop; a fleet study raises them, up to
the schema's maxima (docs/schema.md). A closed loop's `concurrency` costs nothing by itself:
users are created as their first request is issued (simulator/serving/engine.py).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..common.errors import SpecsightInputError
from ..common.limits import MAX_REPLICAS, MAX_REQUESTS, MAX_SEQS, MAX_TOKENS
from ..common.schema import Int, Section


def limit(source: Any, key: str) -> int:
    """The scenario's limit `key` (its `limits:` block, else the default)."""
    block = source.get("limits") if hasattr(source, "get") else None
    v = (block or {}).get(key)
    return int(LIMITS.keys[key].default if v is None else v)


def mean_tokens(dist: Any, trace_column: np.ndarray | None) -> float:
    """Mean length (tokens) a LengthDist draws, clipped to its bounds; a trace column's mean."""
    if dist is None:
        return float(np.mean(trace_column)) if trace_column is not None and len(trace_column) else 0.0
    hi = dist.max_len if dist.max_len is not None else MAX_TOKENS
    return float(min(max(dist.mean_estimate, dist.min_len, 1), hi))


def _refuse(field: str, value: Any, what: str, key: str, lim: int) -> SpecsightInputError:
    return SpecsightInputError(field, value, f"{what} exceeds limits.{key} = {lim:,}; raise it in the scenario "
                                             f"(limits: {{{key}: ...}}) or with --set limits.{key}=N")


def check_work_limits(sc: Any) -> None:
    """Refuse a scenario (a built simulator.scenario.scenario.Scenario) beyond its limits."""
    wl, src = sc.workload, sc.source
    n = int(wl.n_requests)
    lim = limit(src, "max_requests")
    if n > lim:
        raise _refuse("workload.num_requests", n, f"{n:,} requests (about 5 kB of memory each)", "max_requests", lim)
    trace = wl._trace or {}
    per_request = mean_tokens(wl.prompt_len, trace.get("num_prefill_tokens", np.zeros(0))[:n]) + \
        mean_tokens(wl.output_len, trace.get("num_decode_tokens", np.zeros(0))[:n])
    total = n * per_request
    lim = limit(src, "max_tokens")
    if total > lim:
        raise _refuse("workload", f"{n:,} requests x {per_request:,.0f} tokens",
                      f"{total:.3g} tokens to simulate", "max_tokens", lim)
    lim = limit(src, "max_replicas")
    if sc.hardware.replicas > lim:
        raise _refuse("hardware.replicas", sc.hardware.replicas, f"{sc.hardware.replicas:,} replicas (about 100 kB "
                      "of memory each)", "max_replicas", lim)
    slots = int(sc.hardware.replicas) * int(sc.engine.max_num_seqs)
    lim = limit(src, "max_batch_slots")
    if slots > lim:
        raise _refuse("engine.max_num_seqs", sc.engine.max_num_seqs,
                      f"hardware.replicas x max_num_seqs = {slots:,} batch slots", "max_batch_slots", lim)


# ---- the scenario's `limits:` block (composed into the scenario schema)
LIMITS = Section(doc="work limits checked before a run (simulator/scenario/work_limits.py)", nullable=True, keys={
    "max_requests": Int(doc="requests per run (memory: about 5 kB each)", lo=1, hi=MAX_REQUESTS,
                        default=2_000_000),
    "max_tokens": Int(doc="num_requests x (mean prompt_len + mean output_len)", unit="tokens", lo=1,
                      hi=10 ** 15, default=2 * 10 ** 9),
    "max_batch_slots": Int(doc="replicas x max_num_seqs (per-slot arrays)", lo=1, hi=MAX_SEQS * MAX_REPLICAS,
                           default=10 ** 7),
    "max_replicas": Int(doc="hardware.replicas (memory: about 100 kB each)", lo=1, hi=MAX_REPLICAS, default=10_000),
})
