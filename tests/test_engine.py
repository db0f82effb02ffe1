"""The serving engine: exact trajectories on tiny fixed-cost scenarios, and invariants on larger ones.

Golden trajectories use step costs that are exact in binary (0.25 s, 0.125 s) so simulated times
compare with ==; each expected list is derived by hand in the comments.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simulator.common.errors import SpecsightInputError
from simulator.run import simulate
from simulator.scenario.scenario import load_scenario

TARGET_S = 0.25    # s per target pass (fixed hardware)
DRAFT_S = 0.125    # s per draft step


def fixed(**sections):
    sc = {"name": "golden", "seed": 0,
          "hardware": {"kind": "fixed", "target_step_s": TARGET_S, "draft_step_s": DRAFT_S}}
    sc.update(sections)
    return sc


def closed(concurrency, num_requests, prompt_len, output_len):
    return {"arrival": {"process": "closed_loop", "concurrency": concurrency}, "num_requests": num_requests,
            "prompt_len": prompt_len, "output_len": output_len}


# ---- golden trajectories ---------------------------------------------------------------------
def test_golden_plain_decode_two_arrivals():
    # Constant arrivals at 1 request/s: t = 0 and t = 1. Prompt 4, output 3, K = 0.
    # req 0: prefill [0, 0.25] -> first token at 0.25; decode [0.25, 0.5], [0.5, 0.75] -> finish 0.75.
    # The replica idles until req 1 arrives at 1.0: prefill [1, 1.25], decode to 1.75.
    r = simulate(fixed(workload={"arrival": {"process": "constant", "qps": 1}, "num_requests": 2,
                                 "prompt_len": 4, "output_len": 3}), trace=True)
    assert r.trace == [(0.0, "arrive", 0), (0.0, "admit", 0), (0.25, "first_token", 0), (0.75, "finish", 0),
                       (1.0, "arrive", 1), (1.0, "admit", 1), (1.25, "first_token", 1), (1.75, "finish", 1)]
    assert r.iterations["start_s"].tolist() == [0.0, 0.25, 0.5, 1.0, 1.25, 1.5]
    assert r.iterations["tokens_emitted"].tolist() == [1, 1, 1, 1, 1, 1]
    assert r.summary["ttft_ms_p50"] == 250.0 and r.summary["tpot_ms_p50"] == 250.0


def test_golden_speculative_rounds_all_accepted():
    # alpha = 1: every draft is accepted, so a K = 2 round emits 3 tokens and costs
    # 0.25 + 2 x 0.125 = 0.5 s. Prompt 4, output 7: prefill [0, 0.25] emits token 1;
    # rounds [0.25, 0.75] and [0.75, 1.25] emit 3 + 3 -> finish at 1.25.
    r = simulate(fixed(drafter={"method": "ngram", "num_speculative_tokens": 2},
                       acceptance={"model": "iid", "alpha": 1.0},
                       workload=closed(1, 1, 4, 7)), trace=True)
    assert r.trace == [(0.0, "arrive", 0), (0.0, "admit", 0), (0.25, "first_token", 0), (1.25, "finish", 0)]
    it = r.iterations
    assert it["k"].tolist() == [0, 2, 2]
    assert it["tokens_emitted"].tolist() == [1, 3, 3]
    assert it["draft_s"].tolist() == [0.0, 0.25, 0.25]
    assert it["verify_s"].tolist() == [0.0, 0.25, 0.25]
    assert it["prefill_s"].tolist() == [0.25, 0.0, 0.0]
    req = r.requests.iloc[0]
    assert (req.rounds, req.accepted_drafts, req.drafted_tokens, req.output_tokens) == (2, 4, 4, 7)


def test_golden_per_position_acceptance_stops_at_the_first_rejection():
    # alphas [1, 0]: draft 1 is always accepted, draft 2 never, so a K = 2 round emits 2 tokens
    # (1 accepted + the recovered token) and costs 0.25 + 2 x 0.125 = 0.5 s. Prompt 4, output 7:
    # prefill [0, 0.25] emits token 1; rounds end at 0.75, 1.25, 1.75 with 3, 5, 7 tokens.
    r = simulate(fixed(drafter={"method": "ngram", "num_speculative_tokens": 2},
                       acceptance={"model": "per_position", "alphas": [1.0, 0.0]},
                       workload=closed(1, 1, 4, 7)), trace=True)
    assert r.trace == [(0.0, "arrive", 0), (0.0, "admit", 0), (0.25, "first_token", 0), (1.75, "finish", 0)]
    assert r.iterations["end_s"].tolist() == [0.25, 0.75, 1.25, 1.75]
    assert r.iterations["tokens_emitted"].tolist() == [1, 2, 2, 2]
    req = r.requests.iloc[0]
    assert (req.rounds, req.accepted_drafts, req.drafted_tokens) == (3, 3, 6)
    s = r.summary
    assert (s["acceptance_rate_pos1"], s["acceptance_rate_pos2"], s["mean_accept_length"]) == (1.0, 0.0, 2.0)


def test_golden_output_cap_truncates_last_round():
    # Output 5 with alpha = 1, K = 2: first token at 0.25, round 1 emits 3 (4 total), round 2
    # could emit 3 but only 1 token remains: it emits 1 and the request finishes at 1.25.
    r = simulate(fixed(drafter={"method": "ngram", "num_speculative_tokens": 2},
                       acceptance={"model": "iid", "alpha": 1.0}, workload=closed(1, 1, 4, 5)))
    assert r.iterations["tokens_emitted"].tolist() == [1, 3, 1]
    assert r.requests["output_tokens"].tolist() == [5]


def test_golden_chunked_prefill_shares_the_token_budget():
    # Two users at t = 0, prompts of 6 tokens, outputs of 2, max_num_batched_tokens = 4.
    # it1 [0, .25]:   req0 prefill chunk 4 (budget spent; req1 waits)
    # it2 [.25, .5]:  req0 last chunk 2, req1 admitted with chunk 2 -> req0 first token at 0.5
    # it3 [.5, .75]:  req0 decodes (1 position), req1 chunk 3 (budget 4 - 1) -> req0 finishes at 0.75
    # it4 [.75, 1]:   req1 last chunk 1 -> first token at 1.0
    # it5 [1, 1.25]:  req1 decodes -> finishes at 1.25
    r = simulate(fixed(engine={"max_num_seqs": 4, "max_num_batched_tokens": 4}, workload=closed(2, 2, 6, 2)),
                 trace=True)
    assert r.trace == [(0.0, "arrive", 0), (0.0, "arrive", 1), (0.0, "admit", 0), (0.25, "admit", 1),
                       (0.5, "first_token", 0), (0.75, "finish", 0), (1.0, "first_token", 1), (1.25, "finish", 1)]
    it = r.iterations
    assert it["num_prefill_tokens"].tolist() == [4, 4, 3, 1, 0]
    assert it["num_decode"].tolist() == [0, 0, 1, 0, 1]
    assert it["batch"].tolist() == [1, 2, 2, 1, 1]
    # a mixed iteration splits the fused pass by tokens: 3 prefill of 4 -> 0.1875 s prefill
    assert it.loc[2, "prefill_s"] == 0.1875 and it.loc[2, "verify_s"] == 0.0625


def test_golden_preemption_by_recompute():
    # block_size 2, 4 blocks (8 KV slots); two users, prompt 2, output 4, K = 0.
    # it1 [0, .25]: both prefill (1 block each) -> first tokens, context 3 each.
    # it2, it3: contexts 3 and 4 need 2 blocks each (4 in all) -> both decode.
    # it4 at .75: contexts 5 need 3 blocks each (6 > 4): req1 (admitted last) is preempted;
    #   req0 emits its 4th token -> finishes at 1.0.
    # it5 at 1.0: req1 re-prefills prompt + 3 generated = 5 tokens (3 blocks), which emits
    #   its 4th token -> finishes at 1.25. Its first-token time stays 0.25.
    r = simulate(fixed(engine={"block_size": 2, "num_gpu_blocks": 4}, workload=closed(2, 2, 2, 4)), trace=True)
    assert r.trace == [(0.0, "arrive", 0), (0.0, "arrive", 1), (0.0, "admit", 0), (0.0, "admit", 1),
                       (0.25, "first_token", 0), (0.25, "first_token", 1), (0.75, "preempt", 1),
                       (1.0, "finish", 0), (1.0, "admit", 1), (1.25, "finish", 1)]
    it = r.iterations
    assert it["kv_used_blocks"].tolist() == [2, 4, 4, 3, 3]
    assert it["preempted"].tolist() == [0, 0, 0, 1, 0]
    assert it["num_prefill_tokens"].tolist() == [4, 0, 0, 0, 5]
    req = r.requests
    assert req["preemptions"].tolist() == [0, 1]
    assert req["first_token_s"].tolist() == [0.25, 0.25]
    assert req["output_tokens"].tolist() == [4, 4]
    assert r.summary["preemptions"] == 1


def test_lookahead_slots_are_reserved():
    # K = 3 lookahead: a context of 15 tokens + 3 slots needs 2 blocks of 16, not 1.
    r = simulate(fixed(drafter={"method": "ngram", "num_speculative_tokens": 3},
                       acceptance={"model": "iid", "alpha": 0.0}, workload=closed(1, 1, 14, 3)))
    # prefill 14 tokens -> 1 block; round 1: context 15 + 3 -> 2 blocks
    assert r.iterations["kv_used_blocks"].tolist()[:2] == [1, 2]


# ---- invariants ------------------------------------------------------------------------------
def busy_scenario(**over):
    sc = {
        "name": "invariants", "seed": 7,
        "hardware": {"kind": "fixed", "target_step_s": 0.02, "draft_step_s": 0.002, "replicas": 2},
        "drafter": {"method": "ngram", "num_speculative_tokens": 4, "match_probability": 0.6},
        "acceptance": {"model": "beta", "alpha": 0.6, "concentration": 4},
        "policy": {"kind": "adaptive"},
        "workload": {"arrival": {"process": "poisson", "qps": 40}, "num_requests": 400,
                     "prompt_len": {"dist": "lognormal", "mean": 300, "sigma": 0.8, "max": 1500},
                     "output_len": {"dist": "lognormal", "mean": 80, "sigma": 0.8, "max": 400}},
        "engine": {"max_num_seqs": 32, "max_num_batched_tokens": 512, "block_size": 16, "num_gpu_blocks": 200,
                   "router": "least_outstanding"},
        "slo": {"tpot_ms_p99": 50, "ttft_ms_p99": 2000},
    }
    sc.update(over)
    return sc


@pytest.fixture(scope="module")
def busy():
    sc = load_scenario(busy_scenario())
    return sc, simulate(sc, trace=True)


def test_no_request_lost_or_duplicated(busy):
    sc, r = busy
    n = sc.workload.n_requests
    req = r.requests
    assert req["id"].tolist() == list(range(n))
    events = pd.DataFrame(r.trace, columns=["t", "event", "rid"])
    for ev in ("arrive", "finish"):
        counts = events[events.event == ev]["rid"].value_counts()
        assert len(counts) == n and (counts == 1).all(), ev
    assert req["finish_s"].notna().all() and req["first_token_s"].notna().all()
    assert (req["arrival_s"] <= req["first_token_s"]).all() and (req["first_token_s"] <= req["finish_s"]).all()
    assert set(req["replica"]) == {0, 1}


def test_every_request_emits_exactly_its_output_length(busy):
    sc, r = busy
    from simulator.workload.workload import generate_requests
    ss = np.random.SeedSequence(sc.seed).spawn(4)
    reqs = generate_requests(sc.workload, np.random.default_rng(ss[0]))
    assert r.requests["output_tokens"].tolist() == reqs.output_len.tolist()
    assert r.requests["prompt_tokens"].tolist() == reqs.prompt_len.tolist()
    assert int(r.iterations["tokens_emitted"].sum()) == int(reqs.output_len.sum())


def test_kv_never_exceeds_capacity_and_preemption_counted(busy):
    _, r = busy
    it = r.iterations
    assert (it["kv_used_blocks"] <= it["kv_capacity_blocks"]).all()
    assert (it["kv_used_blocks"] >= 0).all()
    # the tiny cache forces preemptions; iterations and requests agree on the count
    assert r.summary["preemptions"] > 0
    assert int(it["preempted"].sum()) == int(r.requests["preemptions"].sum()) == r.summary["preemptions"]


def test_batching_limits_hold():
    # vLLM's limits per iteration: at most max_num_seqs sequences (decoding or prefilling) and at most
    # max_num_batched_tokens tokens in the fused pass (prefill chunks + K + 1 positions per decode
    # sequence for a chain drafter, which verifies every sequence every round).
    sc = busy_scenario(drafter={"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 4},
                       acceptance={"model": "iid", "alpha": 0.6},
                       engine={"max_num_seqs": 8, "max_num_batched_tokens": 512, "num_gpu_blocks": 2000})
    r = simulate(sc)
    it = r.iterations
    eng = sc["engine"]
    assert (it["batch"] <= eng["max_num_seqs"]).all() and it["batch"].max() == eng["max_num_seqs"]
    tokens = it["num_prefill_tokens"] + it["num_decode"] * (it["k"] + 1)
    assert (tokens <= eng["max_num_batched_tokens"]).all() and tokens.max() == eng["max_num_batched_tokens"]


def test_time_never_goes_back(busy):
    _, r = busy
    for _, g in r.iterations.groupby("replica"):
        s, e = g["start_s"].to_numpy(), g["end_s"].to_numpy()
        assert (e > s).all()
        assert (s[1:] >= e[:-1] - 1e-12).all()      # one iteration at a time per replica
    t = [x[0] for x in r.trace]
    assert t == sorted(t)


def test_same_seed_same_frames(busy):
    sc, r = busy
    r2 = simulate(sc)
    pd.testing.assert_frame_equal(r.requests, r2.requests)
    pd.testing.assert_frame_equal(r.iterations, r2.iterations)
    r3 = simulate(load_scenario(busy_scenario(seed=8)))
    assert not r3.requests["finish_s"].equals(r.requests["finish_s"])


def test_chunked_prefill_splits_a_long_prompt():
    # A 1000-token prompt with a 256-token budget takes ceil(1000 / 256) = 4 iterations to prefill.
    r = simulate(fixed(engine={"max_num_seqs": 4, "max_num_batched_tokens": 256}, workload=closed(1, 1, 1000, 2)))
    assert r.iterations["num_prefill_tokens"].tolist() == [256, 256, 256, 232, 0]
    assert r.requests["first_token_s"].tolist() == [4 * TARGET_S]


def test_round_robin_alternates_replicas():
    r = simulate(fixed(hardware={"kind": "fixed", "target_step_s": 0.25, "replicas": 3},
                       workload={"arrival": {"process": "constant", "qps": 10}, "num_requests": 7,
                                 "prompt_len": 4, "output_len": 3}))
    assert r.requests["replica"].tolist() == [0, 1, 2, 0, 1, 2, 0]


def test_closed_loop_keeps_concurrency_users_busy():
    # 3 users, think 0.5 s: a user's next request arrives 0.5 s after its previous one finished.
    r = simulate(fixed(workload={"arrival": {"process": "closed_loop", "concurrency": 3, "think_time_s": 0.5},
                                 "num_requests": 9, "prompt_len": 4, "output_len": 3}), trace=True)
    req = r.requests
    assert (req["arrival_s"].iloc[:3] == 0).all()
    finishes = sorted(req["finish_s"])[:6]
    assert sorted(req["arrival_s"].iloc[3:]) == [f + 0.5 for f in finishes]


def test_request_too_long_for_the_cache_is_an_input_error():
    with pytest.raises(SpecsightInputError, match="cannot hold the longest request"):
        simulate(fixed(engine={"block_size": 2, "num_gpu_blocks": 2}, workload=closed(1, 1, 4, 4)))


def test_speculation_counters_add_up(busy):
    _, r = busy
    req, s = r.requests, r.summary
    assert (req["accepted_drafts"] <= req["drafted_tokens"]).all()
    # tokens = first tokens + rounds + accepted drafts, except where the output cap cut a round short
    assert (req["output_tokens"] <= 1 + req["rounds"] + req["accepted_drafts"] + req["preemptions"]).all()
    assert 0 < s["acceptance_rate"] < 1 and s["mean_accept_length"] > 1
    fr = sum(s[f"{k}_time_frac"] for k in ("draft", "verify", "prefill", "overhead"))
    assert fr == pytest.approx(1.0)


# ---- small pieces ------------------------------------------------------------------------------
def test_weighted_percentile_is_the_inverse_cdf():
    from simulator.serving.metrics import weighted_percentile
    v = np.array([30.0, 10.0, 20.0])
    w = np.array([1.0, 2.0, 1.0])            # samples: 10, 10, 20, 30
    assert weighted_percentile(v, w, 50) == 10.0
    assert weighted_percentile(v, w, 51) == 20.0
    assert weighted_percentile(v, w, 100) == 30.0
    assert np.isnan(weighted_percentile(v, np.zeros(3), 50))


def test_speedups_orient_throughput_and_latency():
    from simulator.serving.metrics import LATENCY_SPEEDUP_KEYS, SPEEDUP_KEYS, speedups
    spec = {k: 2.0 for k in SPEEDUP_KEYS} | {k: 10.0 for k in LATENCY_SPEEDUP_KEYS}
    base = {k: 1.0 for k in SPEEDUP_KEYS} | {k: 20.0 for k in LATENCY_SPEEDUP_KEYS}
    s = speedups(spec, base)
    assert s["speedup_output_tokens_per_s"] == 2.0       # spec / base
    assert s["speedup_tpot_p50"] == 2.0                  # base / spec: lower latency is a speedup
    assert s["baseline_tpot_ms_p99"] == 20.0


def test_least_outstanding_router_picks_the_idlest_replica():
    from simulator.serving.router import LeastOutstandingRouter, RoundRobinRouter

    class R:
        def __init__(self, load):
            self.outstanding = load
    assert LeastOutstandingRouter(3).pick([R(2), R(1), R(1)]) == 1
    rr = RoundRobinRouter(2)
    assert [rr.pick([]) for _ in range(4)] == [0, 1, 0, 1]
