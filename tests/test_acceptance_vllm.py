"""Acceptance read from what vLLM writes (simulator/speculation/acceptance_vllm.py): a Prometheus /metrics
scrape and a `vllm bench serve` result JSON, both made by vLLM 0.32.0's own code from seeded
rounds (scripts/vllm_spec_decode_files.py). vLLM's per-position figures are cumulative; the
conditional rates specsight takes must be those of the rounds themselves."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from simulator.common.errors import SpecsightInputError
from simulator.scenario.scenario import load_scenario

DATA = Path(__file__).resolve().parent / "data" / "vllm"
DRAWS = json.loads((DATA / "accepted.json").read_text())
BASE = {"name": "vllm-acceptance", "seed": 1,
        "hardware": {"kind": "fixed", "target_step_s": 0.02, "draft_step_s": 0.002},
        "drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3},
        "workload": {"arrival": {"process": "closed_loop", "concurrency": 1}, "num_requests": 2,
                     "prompt_len": 8, "output_len": 8}}


def _trace(path: Path):
    return load_scenario({**BASE, "acceptance": {"model": "trace", "path": str(path)}}).acceptance


def _rates_of_the_rounds() -> np.ndarray:
    """alpha_j = rounds accepting j or more drafts / rounds accepting j - 1 or more (the closed form)."""
    a = np.asarray(DRAWS["accepted"])
    return np.array([np.count_nonzero(a >= j) / np.count_nonzero(a >= j - 1) for j in range(1, DRAWS["k"] + 1)])


@pytest.mark.parametrize("name, fmt", [("metrics_spec_decode.txt", "vllm_prometheus"),
                                       ("bench_serve_result.json", "vllm_bench_json")])
def test_vllms_files_give_the_conditional_rates_of_the_rounds(name, fmt):
    acc = _trace(DATA / name)
    assert acc.format == fmt and acc.rounds == len(DRAWS["accepted"])       # both engines' series summed
    np.testing.assert_allclose(acc.alphas(3), _rates_of_the_rounds(), rtol=1e-12)


def test_the_cumulative_figures_are_converted_not_taken_as_conditional():
    bench = json.loads((DATA / "bench_serve_result.json").read_text())
    cumulative = np.asarray(bench["spec_decode_per_position_acceptance_rates"])
    acc = _trace(DATA / "bench_serve_result.json").alphas(3)
    assert acc[0] == pytest.approx(cumulative[0])
    np.testing.assert_allclose(np.cumprod(acc), cumulative, rtol=1e-12)     # P(first j accepted)
    assert acc[1] > cumulative[1] + 0.1
    # the accept length vLLM reports is the one the rates reproduce: 1 + sum of the cumulative rates
    assert 1 + np.cumprod(acc).sum() == pytest.approx(bench["spec_decode_acceptance_length"], rel=1e-12)


def test_a_scrape_or_result_without_speculation_says_what_is_missing(tmp_path):
    plain = tmp_path / "metrics.txt"
    plain.write_text("\n".join(ln for ln in (DATA / "metrics_spec_decode.txt").read_text().splitlines()
                               if "spec_decode" not in ln) + "\n")
    with pytest.raises(SpecsightInputError, match="without vllm:spec_decode_num_drafts_total"):
        _trace(plain)
    result = tmp_path / "result.json"
    result.write_text(json.dumps({"request_throughput": 3.2}))
    with pytest.raises(SpecsightInputError, match="needs spec_decode_num_drafts and "
                                                  "spec_decode_per_position_acceptance_rates"):
        _trace(result)
