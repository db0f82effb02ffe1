"""Acceptance from an SGLang server's Prometheus `/metrics` scrape, read as `acceptance: {model:
trace, path: FILE}` (acceptance_trace.py picks the format).

Names as SGLang 0.5.23 writes them (the `sglang` 0.5.23 wheel's sglang/srt/observability/
metrics_collector.py; the counters are added to once per finished request, in
TokenizerMetricsCollector.observe_one_finished_request):

    sglang:spec_verify_calls_total      verify rounds (req.spec_verify_ct: one per round of a request)
    sglang:generation_tokens_total      output tokens (labelled is_streaming: both series summed)
    sglang:num_requests_total           finished requests
    sglang:spec_num_steps               gauge: the active speculative_num_steps (K of a chain)

SGLang exports no per-position counters: its acceptance figures are the mean accepted length and
rate (gauges sglang:spec_accept_length and sglang:spec_accept_rate, of the last logging window
only, so not read here) and, per request in a response's meta_info, a histogram that does not
reach /metrics. What the counters give is the mean tokens a verify round commits: each request's
first token comes from its prefill, every round after it commits the accepted drafts plus one,

    tau = (generation_tokens - num_requests) / spec_verify_calls

(SGLang's own per-request accept length, completion_tokens / spec_verify_ct, counts the prefill's
token as well). specsight takes the i.i.d. per-position rate alpha whose expected tokens at K
equal tau (acceptance_presets.alpha_for_tau): an assumption, not a measurement of how acceptance
falls with the position; a vLLM scrape or a CSV of accept lengths measures that. K is the
spec_num_steps gauge, else the `k` of the trace block, else the drafter's K. Series of several
engines are summed. A scrape counts from the server's start: scrape a server that ran only the
load you mean to model.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..common.errors import SpecsightInputError
from .acceptance_presets import alpha_for_tau
from .acceptance_vllm import SAMPLE

VERIFY, GENERATED, REQUESTS, STEPS = ("sglang:spec_verify_calls", "sglang:generation_tokens",
                                      "sglang:num_requests", "sglang:spec_num_steps")


def is_sglang_prometheus(text: str) -> bool:
    """A Prometheus exposition carrying SGLang's samples (names prefixed `sglang:`)."""
    return any(line.startswith("sglang:") for line in text.lstrip().splitlines()[:400])


def rates_from_sglang(text: str, field: str, path: Path, k: int | None) -> tuple[np.ndarray, int]:
    """(the i.i.d. rate at each of K positions, verify rounds) from an SGLang /metrics scrape."""
    sums: dict[str, float] = {}
    for line in text.splitlines():
        m = SAMPLE.match(line.strip())
        if m is None or line.startswith("#"):
            continue
        name = m.group(1).removesuffix("_total")
        if name not in (VERIFY, GENERATED, REQUESTS, STEPS):
            continue
        try:
            v = float(m.group(3))
        except ValueError:
            raise SpecsightInputError(field, str(path), f"{m.group(1)}: {m.group(3)!r} is not a number") from None
        sums[name] = max(sums.get(name, 0.0), v) if name == STEPS else sums.get(name, 0.0) + v
    missing = [f"{n}_total" for n in (VERIFY, GENERATED, REQUESTS) if n not in sums]
    if missing:
        raise SpecsightInputError(field, str(path), f"an SGLang scrape without {', '.join(missing)}: was the server "
                                                    "started with --enable-metrics and a --speculative-algorithm?")
    rounds, tokens = sums[VERIFY], sums[GENERATED] - sums[REQUESTS]
    if rounds <= 0:
        raise SpecsightInputError(field, str(path), f"{VERIFY}_total is {rounds:g}: no speculative rounds")
    steps = int(sums[STEPS]) if sums.get(STEPS) else k
    if steps is None or steps < 1:
        raise SpecsightInputError(field, str(path), f"no {STEPS} gauge in the scrape: give the K it ran as the "
                                                    "trace block's k")
    tau = tokens / rounds
    if not 1.0 <= tau <= steps + 1:
        raise SpecsightInputError(field, str(path), f"(generation tokens - requests) / verify rounds = {tau:.4g}, "
                                                    f"impossible with K = {steps} (needs 1 .. {steps + 1})")
    return np.full(steps, alpha_for_tau(tau, steps)), int(rounds)
