"""Acceptance read from what SGLang writes (simulator/speculation/acceptance_sglang.py): a
Prometheus /metrics scrape whose speculative series are named and labelled as SGLang 0.5.23
declares them, written by prometheus_client from seeded rounds (scripts/sglang_spec_decode_files.py).
SGLang's counters give the mean tokens per verify round; the rate taken is the i.i.d. one that
reproduces it."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_acceptance_vllm import BASE  # the same fixed-cost scenario as vLLM's files

from simulator.common.errors import SpecsightInputError
from simulator.scenario.scenario import load_scenario
from simulator.speculation.acceptance import expected_tokens

DATA = Path(__file__).resolve().parent / "data" / "sglang"
ROUNDS = json.loads((DATA / "rounds.json").read_text())


def _trace(path: Path, **extra):
    return load_scenario({**BASE, "acceptance": {"model": "trace", "path": str(path), **extra}}).acceptance


def test_the_scrape_gives_the_rate_whose_mean_tokens_are_the_rounds():
    """tau = (generation tokens - requests) / verify rounds is the rounds' own mean tokens (each
    round commits its accepted drafts plus one); the rate taken reproduces it at K = 3 (the
    spec_num_steps gauge), and the draws' per-token rate 0.7 lies within 3.3 standard errors of
    it (two-sided p < 0.001 under the i.i.d. draws)."""
    acc = _trace(DATA / "metrics_spec_decode.txt")
    counts = np.asarray(ROUNDS["rounds_accepting"])
    rounds = int(counts.sum())
    tau = float((counts * (np.arange(len(counts)) + 1)).sum()) / rounds
    assert acc.format == "sglang_prometheus" and acc.rounds == rounds
    rates = acc.alphas(3)
    assert np.ptp(rates) == 0.0                                     # one rate at every position: i.i.d.
    assert float(expected_tokens(rates)) == pytest.approx(tau, rel=1e-9)
    # per-position rates of the draws: position j attempted when j-1 were accepted
    attempts = counts.sum() + counts[1:].sum() + counts[2:].sum()
    hits = counts[1:].sum() + counts[2:].sum() + counts[3:].sum()
    se = math.sqrt(0.7 * 0.3 / attempts)
    assert abs(rates[0] - 0.7) < 3.3 * se and abs(hits / attempts - 0.7) < 3.3 * se


def test_the_windowed_gauge_is_not_read(tmp_path):
    """sglang:spec_accept_length is the last logging window's figure: changing it changes nothing."""
    text = (DATA / "metrics_spec_decode.txt").read_text()
    moved = tmp_path / "metrics.txt"
    moved.write_text("\n".join(ln.rsplit(" ", 1)[0] + " 3.9" if ln.startswith("sglang:spec_accept_length{") else ln
                               for ln in text.splitlines()) + "\n")
    assert _trace(moved).alphas(3).tolist() == _trace(DATA / "metrics_spec_decode.txt").alphas(3).tolist()


def test_without_its_k_gauge_the_trace_blocks_k_is_used_and_else_asked_for(tmp_path):
    text = (DATA / "metrics_spec_decode.txt").read_text()
    bare = tmp_path / "metrics.txt"
    bare.write_text("\n".join(ln for ln in text.splitlines() if "spec_num_steps" not in ln) + "\n")
    assert _trace(bare, k=3).alphas(3).tolist() == _trace(DATA / "metrics_spec_decode.txt").alphas(3).tolist()
    with pytest.raises(SpecsightInputError, match="give the K it ran as the trace block's k"):
        _trace(bare)


def test_a_scrape_without_speculation_says_what_is_missing(tmp_path):
    text = (DATA / "metrics_spec_decode.txt").read_text()
    plain = tmp_path / "metrics.txt"
    plain.write_text("\n".join(ln for ln in text.splitlines() if "spec_" not in ln) + "\n")
    with pytest.raises(SpecsightInputError, match="without sglang:spec_verify_calls_total: was the server started"):
        _trace(plain)
