"""The engines' own dynamic-K rules (simulator/speculation/engine_policies.py): K choice on synthetic batch
sizes and accept-length streams against closed forms, the hooks the replica feeds them, and the
engine.kind each needs."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from simulator.common.errors import SpecsightInputError
from simulator.run import simulate
from simulator.scenario.scenario import load_scenario
from simulator.speculation.engine_policies import (
    SglangAdaptivePolicy,
    VllmDynamicPolicy,
    sglang_spec_cuda_graph_bs,
)
from simulator.speculation.policies import PolicyState
from simulator.speculation.policy_spec import PolicySpec

BASE = {"name": "engine-rules", "seed": 3,
        "hardware": {"kind": "fixed", "target_step_s": 0.01, "draft_step_s": 0.001},
        "drafter": {"method": "eagle3", "model": "x", "num_speculative_tokens": 4},
        "acceptance": {"model": "iid", "alpha": 0.7},
        "workload": {"arrival": {"process": "poisson", "qps": 40.0}, "num_requests": 150,
                     "prompt_len": 64, "output_len": 40},
        "engine": {"max_num_seqs": 64, "max_num_batched_tokens": 4096}}


def build(policy: dict, k_max: int = 4):
    return PolicySpec.from_mapping(policy, k_max=k_max)


def counts(scheduled: int = 0, active: int = 0) -> PolicyState:
    return PolicyState(scheduled_requests=scheduled, active_requests=active)


def run_with(policy, **changes):
    """Simulate BASE (engine.kind ideal) with `policy` put in after loading: the rule's hooks in the
    replica, priced by the ideal engine (simulate refuses the real engines on this branch)."""
    sc = load_scenario({**BASE, **changes})
    return simulate(dataclasses.replace(sc, policy=policy))


# ---- vLLM num_speculative_tokens_per_batch_size -------------------------------------------------
def test_vllm_ranges_gaps_tail_and_cap():
    p = build({"kind": "vllm_dynamic", "num_speculative_tokens_per_batch_size": [[9, 16, 1], [1, 4, 6], [33, 64, 0]]})
    assert isinstance(p, VllmDynamicPolicy)
    got = {c: p.choose_k(1, counts(scheduled=c)) for c in (1, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65, 1000)}
    # 1-4: 6 capped at num_speculative_tokens 4; 5-8 inherit 4 (the K before the gap, capped);
    # 17-32 inherit 1; past the last range its K holds
    assert got == {1: 4, 4: 4, 5: 4, 8: 4, 9: 1, 16: 1, 17: 1, 32: 1, 33: 0, 64: 0, 65: 0, 1000: 0}
    assert p.choose_k(7, counts(scheduled=0)) == 4          # nothing scheduled yet: the static K
    assert p.reads_request_counts and p.reserves_k_max and not p.k_by_batch


def test_vllm_needs_its_ranges():
    with pytest.raises(SpecsightInputError, match="num_speculative_tokens_per_batch_size=None: required"):
        build("vllm_dynamic")


@pytest.mark.parametrize("rows, text", [([[2, 4, 1]], "start at 1"), ([[1, 4, 2], [4, 8, 1]], "overlap"),
                                        ([[1, 4, 2], [8, 5, 1]], "start must be <= end")])
def test_vllm_schedule_refused_as_vllm_refuses(rows, text):
    with pytest.raises(SpecsightInputError, match=text):
        build({"kind": "vllm_dynamic", "num_speculative_tokens_per_batch_size": rows})


def test_vllm_keys_on_the_previous_iterations_scheduled_requests():
    rows = [[1, 3, 4], [4, 10, 2], [11, 64, 1]]
    pol = VllmDynamicPolicy(4, rows)
    it = run_with(pol).iterations
    prev = it["batch"].shift(1).fillna(0).astype(int)       # requests the previous iteration scheduled
    dec = it["num_decode"] > 0
    want = np.array([pol.k_for_scheduled(c) for c in prev[dec]])
    assert (it["k"][dec].to_numpy() == want).all()
    # prefills count: somewhere the decode batch alone would have given another K
    alone = np.array([pol.k_for_scheduled(n) for n in it["num_decode"][dec].shift(1).fillna(0).astype(int)])
    assert (alone != want).any()


def test_vllm_keeps_lookahead_kv_at_the_static_k():
    """K = 0 for every count: the same rounds as plain decoding, each sequence still holding
    num_speculative_tokens lookahead slots."""
    dyn = run_with(VllmDynamicPolicy(4, [[1, 64, 0]])).iterations
    off = run_with(PolicySpec.from_mapping("off", k_max=4)).iterations
    assert (dyn["k"] == 0).all()
    same = [c for c in dyn.columns if c != "kv_used_blocks"]
    assert dyn[same].equals(off[same])
    assert (dyn["kv_used_blocks"] >= off["kv_used_blocks"]).all()
    assert (dyn["kv_used_blocks"] > off["kv_used_blocks"]).any()


# ---- SGLang adaptive speculation ----------------------------------------------------------------
def feed(p: SglangAdaptivePolicy, batch: int, accepted_mean: float, batches: int) -> list[int]:
    """K chosen before each of `batches` rounds of `batch` requests, each accepting accepted_mean
    drafts per request (0 accepted on plain rounds)."""
    ks = []
    for _ in range(batches):
        k = p.choose_k(batch, PolicyState())
        ks.append(k)
        if k:
            p.observe(k, np.full(batch, accepted_mean))
        else:
            p.observe_plain(batch)
    return ks


def test_sglang_ema_warmup_and_interval_closed_form():
    """Key 1, steps [1, 3, 5, 7], start 7 (the drafter's K), EMA from 6: after m batches accepting
    a each, ema = a + (6 - a) 0.8^m. Batches 1-10 warm up; batch 15 is the first update: with
    a = 1, ema = 1 + 5 (0.8^15) = 1.176, below 5 - 0.75 and 3 - 0.75 but not 1 - 0.75: steps 3."""
    p = build({"kind": "sglang_adaptive"}, k_max=7)
    ks = feed(p, 1, 1.0, 15)
    assert ks == [7] * 15
    slot = p.slots[0]
    assert slot.ema == pytest.approx(1.0 + 5.0 * 0.8 ** 15)
    assert p.choose_k(1, PolicyState()) == 3
    # next updates every 5 batches: ema -> 1 never drops below 1 - 0.5 - 0.25; it rises past
    # 3 - 0.5 only with more accepted drafts
    assert feed(p, 1, 1.0, 10) == [3] * 10 and p.choose_k(1, PolicyState()) == 3
    feed(p, 1, 4.0, 5)
    e = slot.ema
    assert e > 2.5 and p.choose_k(1, PolicyState()) == (5 if e <= 4.5 else 7)


def test_sglang_step_to_zero_and_probe_back():
    """Key 8 ([0, 1, 3], hysteresis 0): the drop to 0 needs ema <= 0.5; at 0 the EMA stays put
    and each update probes the next step."""
    p = build({"kind": "sglang_adaptive"}, k_max=3)
    ks = feed(p, 8, 0.0, 15)        # ema = 2 (0.8^15) = 0.07 at batch 15: 3 -> 1 -> 0 in one update
    assert ks == [3] * 15 and p.choose_k(8, PolicyState()) == 0
    ema = p.slots[1].ema
    assert feed(p, 8, 0.0, 5) == [0] * 5                    # 5 plain batches: EMA frozen, then a probe
    assert p.slots[1].ema == ema and p.choose_k(8, PolicyState()) == 1
    assert p.choose_k(1, PolicyState()) == 3                # key 1's slot is its own


def test_sglang_hysteresis_and_routing():
    cfg = {"kind": "sglang_adaptive", "warmup_batches": 0, "update_interval": 1,
           "adaptive_config": [{"batch_size": 1, "candidate_steps": [1, 2, 3], "up_hysteresis": 0.3,
                                "down_hysteresis": -0.3}]}
    p = build(cfg, k_max=3)
    assert p.choose_k(1, PolicyState()) == 3
    p.slots[0].ema = 1.25      # a step down needs ema <= 2 - 0.5 - 0.3 = 1.2
    feed(p, 1, 1.25, 1)
    assert p.choose_k(1, PolicyState()) == 3
    feed(p, 1, 0.0, 1)         # ema = 0.8 x 1.25 = 1.0: <= 1.2 (to 2), not <= 0.2 (to 1)
    assert p.slots[0].ema == pytest.approx(1.0) and p.choose_k(1, PolicyState()) == 2
    feed(p, 1, 2.0, 1)         # ema = 1.2: up needs > 2 - 0.5 + 0.3 = 1.8; down needs <= 0.2
    assert p.choose_k(1, PolicyState()) == 2
    graph = sglang_spec_cuda_graph_bs()
    d = build({"kind": "sglang_adaptive"}, k_max=4)
    # batch padded to a graph size first: 9 -> 10 (key 8), 31 -> 32 (key 32), 61 -> 64 (key 64)
    assert [d.entries[d.key_index(b)][0] for b in (1, 7, 8, 9, 31, 33, 61, 1000)] == [1, 1, 8, 8, 32, 32, 64, 64]
    assert graph[:9] == (1, 2, 3, 4, 5, 6, 7, 8, 10) and 64 in graph and 63 not in graph
    assert [e[1] for e in d.entries] == [(1, 3), (0, 1, 3), (0, 1), (0,)]   # steps above K = 4 dropped


def test_sglang_refuses_steps_above_the_drafters_k():
    with pytest.raises(SpecsightInputError, match="num_speculative_tokens"):
        build({"kind": "sglang_adaptive", "adaptive_config": [{"batch_size": 1, "candidate_steps": [1, 5]}]})


def test_sglang_runs_in_the_replica():
    pol = build({"kind": "sglang_adaptive"}, k_max=4)
    it = run_with(pol, acceptance={"model": "iid", "alpha": 0.05}).iterations
    k = it["k"][it["num_decode"] > 0].to_numpy()
    assert k[0] in (3, 1, 0) and (k < 3).any()              # low acceptance steps K down from 3


# ---- TensorRT-LLM draft_len_schedule, max_concurrency, acceptance window ------------------------
def test_trtllm_schedule_and_max_concurrency():
    p = build({"kind": "trtllm_schedule", "draft_len_schedule": [[4, 4], [8, 2], [32, 1]]})
    assert [p.choose_k(1, counts(active=a)) for a in (1, 4, 5, 8, 9, 32, 33, 500)] == [4, 4, 2, 2, 1, 1, 0, 0]
    m = build({"kind": "trtllm_schedule", "max_concurrency": 8})
    assert [m.choose_k(1, counts(active=a)) for a in (1, 8, 9)] == [4, 4, 0]
    s = build({"kind": "trtllm_schedule"})
    assert s.k_by_batch and s.choose_k(100, PolicyState()) == 4
    with pytest.raises(SpecsightInputError, match="mutually exclusive"):
        build({"kind": "trtllm_schedule", "draft_len_schedule": [[4, 4]], "max_concurrency": 8})
    with pytest.raises(SpecsightInputError, match="must equal max_draft_len"):
        build({"kind": "trtllm_schedule", "draft_len_schedule": [[4, 3], [8, 2]]})
    with pytest.raises(SpecsightInputError, match="<= max_draft_len"):
        build({"kind": "trtllm_schedule", "draft_len_schedule": [[4, 4], [8, 5]]})


def test_trtllm_acceptance_window_disables_for_good():
    """Each finish records max(0, output / (rounds + 1) - 1); the mean of the last 3 below 0.6
    turns speculation off once 3 requests have finished, and it stays off."""
    p = build({"kind": "trtllm_schedule", "acceptance_window": 3, "acceptance_length_threshold": 0.6})
    assert p.observes_finishes and not p.k_by_batch
    p.observe_finish(30, 9)      # 30 / 10 - 1 = 2.0
    p.observe_finish(11, 10)     # 0.0
    assert p.choose_k(1, PolicyState()) == 4                # fewer than 3 finished: no verdict
    p.observe_finish(12, 9)      # 0.2: mean (2 + 0 + 0.2) / 3 = 0.733 >= 0.6
    assert p.choose_k(1, PolicyState()) == 4
    p.observe_finish(1, 0)       # 0.0: the last 3 are 0, 0.2, 0: mean 0.067 < 0.6
    assert p.disabled and p.choose_k(1, PolicyState()) == 0
    p.observe_finish(100, 9)
    assert p.choose_k(1, PolicyState()) == 0


def test_trtllm_window_in_the_replica():
    pol = build({"kind": "trtllm_schedule", "acceptance_window": 5, "acceptance_length_threshold": 1.5})
    res = run_with(pol, acceptance={"model": "iid", "alpha": 0.2})
    it, req = res.iterations, res.requests
    dec = it[it["num_decode"] > 0]
    fifth = np.sort(req["finish_s"].to_numpy())[4]
    assert (dec["k"][dec["start_s"] < fifth] == 4).all()
    assert (dec["k"][dec["start_s"] >= fifth] == 0).all()


# ---- the engine each rule needs -----------------------------------------------------------------
@pytest.mark.parametrize("policy, engine", [({"kind": "vllm_dynamic",
                                              "num_speculative_tokens_per_batch_size": [[1, 8, 2]]}, "vllm"),
                                            ({"kind": "sglang_adaptive"}, "sglang"),
                                            ({"kind": "trtllm_schedule", "max_concurrency": 8}, "trtllm")])
def test_a_rule_runs_only_under_its_engine(policy, engine):
    with pytest.raises(SpecsightInputError, match=f"policy.kind='{policy['kind']}': runs under engine.kind "
                                                  f"{engine} \\(this scenario: ideal\\)"):
        load_scenario({**BASE, "policy": policy})
    other = "sglang" if engine != "sglang" else "vllm"
    with pytest.raises(SpecsightInputError, match=f"this scenario: {other}"):
        load_scenario({**BASE, "policy": policy, "engine": {**BASE["engine"], "kind": other}})
    sc = load_scenario({**BASE, "policy": policy, "engine": {**BASE["engine"], "kind": engine}})
    assert sc.policy.kind == policy["kind"]


def test_sglang_rule_needs_an_eagle_chain():
    eng = {**BASE["engine"], "kind": "sglang"}
    with pytest.raises(SpecsightInputError, match="SGLang.*EAGLE"):
        load_scenario({**BASE, "policy": "sglang_adaptive", "engine": eng,
                       "drafter": {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 4}})
    with pytest.raises(SpecsightInputError, match="SGLang.*topk = 1"):
        load_scenario({**BASE, "policy": "sglang_adaptive", "engine": eng,
                       "drafter": {**BASE["drafter"], "tree": True, "tree_branches": 2}})


SHIPPED = Path(__file__).resolve().parents[1] / "scenarios" / "llama8b-h100-eagle3-chat.yaml"


@pytest.mark.parametrize("policy, engine", [
    ("{kind: vllm_dynamic, num_speculative_tokens_per_batch_size: [[1, 8, 3], [9, 256, 1]]}", "vllm"),
    ("{kind: sglang_adaptive}", "sglang"),
    ("{kind: trtllm_schedule, max_concurrency: 8, acceptance_window: 16, acceptance_length_threshold: 0.5}", "trtllm")])
def test_end_to_end_under_its_engine(policy, engine):
    """A shipped scenario (EAGLE-3, K = 3) under each engine with its own rule."""
    sc = load_scenario(SHIPPED, [f"policy={policy}", f"engine.kind={engine}", "workload.num_requests=64"])
    res = simulate(sc)
    k = res.iterations["k"]
    assert res.summary["policy"] == sc.policy.kind and (k <= 3).all() and res.summary["num_requests"] == 64
