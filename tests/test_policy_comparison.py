"""The comparison in docs/scenarios.md ("The engines' own K rules against goodput and adaptive"),
made small: the shipped EAGLE-3 chat scenario under each real engine with that engine's rule,
configured as the docs configure it. Properties that must hold whatever the numbers: each rule
runs only under its own engine, its K stays within its table or candidate steps, and under load
TensorRT-LLM's max_concurrency turns speculation off."""
from __future__ import annotations

from pathlib import Path

import pytest

from simulator.common.errors import SpecsightInputError
from simulator.run import simulate
from simulator.scenario.scenario import load_scenario

SHIPPED = Path(__file__).resolve().parents[1] / "scenarios" / "llama8b-h100-eagle3-chat.yaml"
SMALL = ["workload.num_requests=48", "workload.arrival={process: closed_loop, concurrency: 16}"]

# the rules as the docs run them, each with the K values it may choose
VLLM = "{kind: vllm_dynamic, num_speculative_tokens_per_batch_size: [[1, 8, 4], [9, 48, 3], [49, 256, 2]]}"
SGLANG = "{kind: sglang_adaptive}"           # SGLang's default ladder {1: [1,3,5,7], 8: [0,1,3], 32: [0,1], 64: [0]}
TRTLLM = "{kind: trtllm_schedule, draft_len_schedule: [[4, 4], [8, 2], [32, 1]]}"   # engines.md §3's example
RULES = [("vllm", "vllm_dynamic", VLLM, 4, {2, 3, 4}), ("sglang", "sglang_adaptive", SGLANG, 7, {0, 1, 3, 5, 7}),
         ("trtllm", "trtllm_schedule", TRTLLM, 4, {0, 1, 2, 4})]


@pytest.mark.parametrize("engine, kind, policy, k_max, allowed", RULES, ids=[r[0] for r in RULES])
def test_each_rule_runs_under_its_engine_only_and_keeps_to_its_ks(engine, kind, policy, k_max, allowed):
    over = [*SMALL, f"policy={policy}", f"drafter.num_speculative_tokens={k_max}"]
    for other in {"ideal", "vllm", "sglang", "trtllm"} - {engine}:
        with pytest.raises(SpecsightInputError, match=f"runs under engine.kind {engine}"):
            load_scenario(SHIPPED, [*over, f"engine.kind={other}"])
    res = simulate(load_scenario(SHIPPED, [*over, f"engine.kind={engine}"]))
    dec = res.iterations[res.iterations["num_decode"] > 0]
    assert res.summary["policy"] == kind
    assert set(dec["k"].unique()) <= allowed
    assert res.summary["num_requests"] == 48


def test_trtllm_max_concurrency_turns_speculation_off_under_load():
    """32 users hold 32 active requests: while more than 8 sequences decode (so more than 8 are
    active), every round is plain; that is most of the run."""
    over = [*SMALL, "workload.arrival={process: closed_loop, concurrency: 32}", "workload.num_requests=64",
            "engine.kind=trtllm", "policy={kind: trtllm_schedule, max_concurrency: 8}"]
    res = simulate(load_scenario(SHIPPED, over))
    it = res.iterations
    assert (it["k"][it["num_decode"] > 8] == 0).all()
    assert (it["num_decode"] > 8).sum() > len(it) / 2
