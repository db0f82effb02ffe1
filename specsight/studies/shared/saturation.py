"""Is a simulated run past what its replica can serve? The one rule every study uses.

*Saturated*: the queue grows through the run. Requests are split into quarters by arrival time
(`queue_stats`, stored with every point's summary); under a load the replica sustains, the last
quarter waits about as long for its first token as the first quarter; past capacity the backlog,
and with it the wait, grows with every arrival. A run under stationary open-loop arrivals (Poisson, gamma, constant)
is saturated when

    mean TTFT(last quarter) > GROWTH x mean TTFT(first quarter) + E2E_SLACK x median E2E latency.

The slack term keeps a light load (first-quarter TTFT near zero) from tripping on noise: a wait
under a quarter of one request's service time is no backlog. Closed-loop load never saturates
this way: its users wait for their answers, so the requests in the system never outnumber them
(past what the replica holds, its batch is capped instead: max_num_seqs, or the KV cache). A
trace is not judged (None): its arrivals are not stationary, so its first and last quarters may
differ by design (a burst near its end is not an overload).
`specsight plan` counts a rate
whose queue grows as failing; `simulate --json` reports it as `saturated`; `breakeven` marks it.

*KV-limited*: the KV cache ran out: the scheduler preempted a running sequence (vLLM's
recompute preemption, simulator/serving/scheduler.py) because the blocks its next tokens need were not
free. The batch it holds is then set by memory, not by the load or max_num_seqs asked for.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

STATIONARY = ("poisson", "gamma", "constant")   # arrival processes the rule judges
GROWTH = 2.0        # last-quarter TTFT over first-quarter TTFT that counts as a growing queue
E2E_SLACK = 0.25    # x median E2E: the wait forgiven on top (a quarter of one request's service)


def _num(summary: Mapping[str, Any], key: str) -> float:
    v = summary.get(key)
    return math.nan if v is None else float(v)


def queue_stats(requests: pd.DataFrame) -> dict[str, float]:
    """The rule's inputs: mean TTFT (s) of the first and the last quarter of requests by arrival
    time (`ttft_first_quarter_s`, `ttft_last_quarter_s`)."""
    import numpy as np
    r = requests.sort_values("arrival_s", kind="stable")
    ttft = (r["first_token_s"] - r["arrival_s"]).to_numpy()
    n = len(ttft)
    q = max(1, n // 4)
    return {"ttft_first_quarter_s": float(np.nanmean(ttft[:q])) if n else math.nan,
            "ttft_last_quarter_s": float(np.nanmean(ttft[-q:])) if n else math.nan}


def queue_growth(summary: Mapping[str, Any]) -> tuple[bool, str]:
    """(growing, reason) from a summary carrying `ttft_first_quarter_s`, `ttft_last_quarter_s`
    and `e2e_ms_p50`; a summary without the quarters is not judged growing."""
    early, late = _num(summary, "ttft_first_quarter_s"), _num(summary, "ttft_last_quarter_s")
    e2e_s = _num(summary, "e2e_ms_p50") / 1e3
    if math.isfinite(late) and not late <= GROWTH * early + E2E_SLACK * (e2e_s if math.isfinite(e2e_s) else 0.0):
        return True, f"queue growing (TTFT {early:.2f} s -> {late:.2f} s)"
    return False, "ok"


def judges(process: str | None) -> bool:
    """Whether the rule applies to an arrival process: stationary open-loop arrivals only."""
    return process in STATIONARY


def is_saturated(summary: Mapping[str, Any] | None, process: str | None = "poisson") -> bool | None:
    """The queue grows through the run under `process` arrivals (False for a missing summary:
    nothing to judge; False under closed-loop load, where the requests in the system never
    outnumber the users; None for a trace: not judged)."""
    if process == "closed_loop" or not summary:
        return False
    if not judges(process):
        return None
    return queue_growth(summary)[0]


def is_kv_limited(summary: Mapping[str, Any] | None) -> bool:
    """The KV cache ran out during the run: at least one sequence was preempted."""
    return bool(summary) and _num(summary, "preemptions") > 0   # type: ignore[arg-type]


def achieved_mean_batch(summary: Mapping[str, Any] | None) -> float:
    """Sequences per engine iteration, averaged over the run's iterations (the summary's
    `mean_batch`): the batch the scheduler reached, whatever concurrency was asked for."""
    return _num(summary, "mean_batch") if summary else math.nan


def kv_sequences(summary: Mapping[str, Any] | None, block_size: int) -> float:
    """Requests of the run's mean length (prompt + output) that the replica's KV cache holds at
    once: capacity blocks x block size / mean tokens per request, and at most the sliding-window
    slots where the model has them (`kv_sliding_slots`); NaN without the figures."""
    if not summary:
        return math.nan
    n = _num(summary, "num_requests")
    tokens = (_num(summary, "prompt_tokens") + _num(summary, "output_tokens")) / n if n > 0 else math.nan
    cap = _num(summary, "kv_capacity_blocks") * block_size
    held = cap / tokens if math.isfinite(tokens) and tokens > 0 else math.nan
    slots = summary.get("kv_sliding_slots")
    return min(held, float(slots)) if slots and math.isfinite(held) else held


def run_flags(summary: Mapping[str, Any], requests: pd.DataFrame, process: str | None) -> dict[str, Any]:
    """What `simulate --json` adds to a run's summary: `saturated`, `kv_limited` and
    `achieved_mean_batch` (the queue statistics come from the request table)."""
    judged = {**summary, **queue_stats(requests)}
    return {"saturated": is_saturated(judged, process), "kv_limited": is_kv_limited(summary),
            "achieved_mean_batch": achieved_mean_batch(summary)}


def result_flags(result: Any) -> dict[str, Any]:
    """`run_flags` of a simulator.run.result.SimResult, and of its baseline as `baseline_saturated`,
    `baseline_kv_limited` and `baseline_achieved_mean_batch` when it has one: what
    `simulate --json` adds to the summary (the summary itself stays the simulator's)."""
    process = result.scenario.workload.arrival
    out = run_flags(result.summary, result.requests, process)
    if result.baseline is not None:
        base = run_flags(result.baseline.summary, result.baseline.requests, process)
        out.update({f"baseline_{k}": v for k, v in base.items()})
    return out
