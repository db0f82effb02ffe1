"""The simulator against closed forms (Leviathan et al. 2022, arXiv 2211.17192) and the cost model.

Batch 1 on fixed hardware is the setting of Leviathan's analysis: a round costs
target_step_s + K x draft_step_s (c = draft_step_s / target_step_s) and emits
E = (1 - alpha^(K+1)) / (1 - alpha) tokens on average, so the decode speedup is E / (1 + K c).
alpha = 0.7, K = 3, c = 0.05: E = 2.5333, speedup = 2.2029.

Prefill is kept out of the comparison explicitly: prompts are 1 token, and the decode-only
throughput is measured from iterations without prefill tokens. The last round of each request
can be cut short by the output cap; with 5,000-token outputs that is 1 round in ~2,000 and is
left in (it biases E down by < 0.05 %). 11 requests give ~21,700 rounds: the standard error of
E is ~0.35 % of E, so the 1 % tolerance is about 3 standard errors (and the seed is fixed).
"""
from __future__ import annotations

import numpy as np
import pytest

from simulator.costs.cost_model import CostModel
from simulator.hardware.hardware import load_profile
from simulator.models.catalog import load_model
from simulator.run import simulate
from simulator.speculation.analytic import plain_step_time_s, spec_step_time_s
from simulator.speculation.drafters import Drafter
from simulator.speculation.spec_math import accept_length_distribution, expected_tokens_per_round, speedup_batch1

ALPHA, K, C = 0.7, 3, 0.05
TARGET_S = 0.02
OUTPUT = 5000


def leviathan_scenario(alpha=ALPHA, k=K):
    return {"name": "leviathan", "seed": 1,
            "hardware": {"kind": "fixed", "target_step_s": TARGET_S, "draft_step_s": C * TARGET_S},
            "drafter": {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": k},
            "acceptance": {"model": "iid", "alpha": alpha},
            "workload": {"arrival": {"process": "closed_loop", "concurrency": 1}, "num_requests": 11,
                         "prompt_len": 1, "output_len": OUTPUT}}


@pytest.fixture(scope="module")
def leviathan():
    return simulate(leviathan_scenario(), baseline=True)


def decode_throughput(it):
    d = it[it["num_prefill_tokens"] == 0]
    return d["tokens_emitted"].sum() / (d["end_s"] - d["start_s"]).sum(), d


def test_mean_tokens_per_round_matches_closed_form(leviathan):
    expected = expected_tokens_per_round(ALPHA, K)                 # 2.5333
    tput, d = decode_throughput(leviathan.iterations)
    assert len(d) >= 20_000
    assert d["tokens_emitted"].mean() == pytest.approx(expected, rel=0.01)
    assert leviathan.summary["mean_tokens_per_round"] == pytest.approx(expected, rel=0.01)
    for j in range(1, K + 1):                                     # conditional per-position rates
        assert leviathan.summary[f"acceptance_rate_pos{j}"] == pytest.approx(ALPHA, abs=0.015)


def test_decode_speedup_matches_leviathan(leviathan):
    expected = speedup_batch1(ALPHA, K, C)                         # 2.2029
    assert expected == pytest.approx(2.20, abs=0.005)
    spec, _ = decode_throughput(leviathan.iterations)
    base, _ = decode_throughput(leviathan.baseline.iterations)
    assert base == pytest.approx(1 / TARGET_S)                     # one token per target step
    assert spec / base == pytest.approx(expected, rel=0.01)
    # end to end (one 20 ms prefill per 5,000-token request) it is within 1 % as well
    assert leviathan.summary["speedup_output_tokens_per_s"] == pytest.approx(expected, rel=0.01)


def test_baseline_sees_the_same_requests(leviathan):
    a, b = leviathan.requests, leviathan.baseline.requests
    assert a["prompt_tokens"].tolist() == b["prompt_tokens"].tolist()
    assert a["output_tokens"].tolist() == b["output_tokens"].tolist()
    assert (b["drafted_tokens"] == 0).all() and (leviathan.baseline.iterations["k"] == 0).all()


def test_roofline_decode_iteration_costs_match_the_analytic_model():
    # Batch 1 on an H100 with Llama-3.1-8B: each plain decode iteration must cost exactly the
    # analytic plain step at that context (the cost model's fast path + iteration overhead),
    # and each speculative round (alpha = 1, so every round emits K + 1 tokens) the analytic
    # speculative step with the drafter catching up on the K + 1 tokens of the previous round.
    cm = CostModel(load_model("llama-3.1-8b"), load_profile("h100-sxm"), tp=1)
    sc = {"hardware": {"gpu": "h100-sxm"}, "model": "llama-3.1-8b",
          "drafter": {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 2},
          "acceptance": {"model": "iid", "alpha": 1.0},
          "workload": {"arrival": {"process": "closed_loop", "concurrency": 1}, "num_requests": 1,
                       "prompt_len": 100, "output_len": 31}}
    r = simulate(sc, baseline=True)
    drafter = Drafter(r.scenario.drafter, cm.model, cm)

    base = r.baseline.iterations
    dec = base[base["num_prefill_tokens"] == 0]
    ctx = 100 + np.arange(1, len(dec) + 1) - 1          # cached tokens before each decode pass
    expected = [float(plain_step_time_s(cm, 1.0, float(c))) for c in ctx]
    np.testing.assert_allclose((dec["end_s"] - dec["start_s"]).to_numpy(), expected, rtol=1e-9)

    it = r.iterations
    rounds = it[it["num_prefill_tokens"] == 0]
    assert (rounds["tokens_emitted"] == 3).all() and len(rounds) == 10
    # round i (from 0) starts with 100 + 1 + 3 i tokens in context, 1 + 3 i - 1 of them generated
    for i, row in enumerate(rounds.itertuples()):
        c = 100 + 1 + 3 * i - 1                          # cached before the verify pass
        w = 3
        t_verify = float(cm.time_s(w, c, w * c + w * (w + 1) / 2, w))
        catchup = 101 if i == 0 else 3                   # the prompt + first token, then K + 1
        t_draft = float(drafter.propose_time_s(1, 2, c, catchup))
        assert row.verify_s == pytest.approx(t_verify, rel=1e-12)
        assert row.draft_s == pytest.approx(t_draft, rel=1e-12)
        assert row.overhead_s == pytest.approx(cm.iteration_overhead_s)
    # analytic step time with the steady-state catch-up (E[tokens] = K + 1 at alpha = 1)
    last = rounds.iloc[-1]
    c_last = 100 + 1 + 3 * 9 - 1
    assert last.end_s - last.start_s == pytest.approx(
        float(spec_step_time_s(cm, drafter, 1.0, float(c_last), 2, 0.999999)), rel=1e-3)


def test_tree_drafter_with_a_per_depth_preset_reproduces_its_figure():
    # eagle3-llama-3.1-8b-mtbench: tau = 6.13 tokens per round at tree depth 7, measured on a
    # tree, so the per-depth alpha (0.922) already counts a depth as accepted when any branch is.
    # A 4-branch tree must emit 6.13 per round; folding the branches in again would give
    # 1 - 0.078^4 = 0.99996 per depth and ~8.0 per round. Rounds: ~3,900 (SE ~ 0.4 % of tau).
    k = 7
    sc = leviathan_scenario(k=k)
    sc["drafter"] = {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": k,
                     "tree": True, "tree_nodes": 31, "tree_branches": 4}
    sc["acceptance"] = {"model": "preset", "name": "eagle3-llama-3.1-8b-mtbench"}
    sc["workload"] = sc["workload"] | {"num_requests": 5}
    r = simulate(sc)
    d = r.iterations[r.iterations["num_prefill_tokens"] == 0]
    alpha = r.scenario.acceptance.alphas(k)
    p = accept_length_distribution(alpha)                          # P(A = a), a = 0..7
    var = float((p * np.arange(k + 1) ** 2).sum() - (p * np.arange(k + 1)).sum() ** 2)
    se = np.sqrt(var / len(d))
    assert len(d) > 3000
    assert abs(d["tokens_emitted"].mean() - 6.13) < 4 * se + 6.13 / OUTPUT   # + the last cut-short rounds
