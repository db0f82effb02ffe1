"""A run that never speculates (policy off: every baseline) is a plain deployment: its memory
budget holds no drafter weights, no drafter KV and reserves for K = 0 (simulator/scenario/deployment.py,
`drafter_loaded`, `memory_k_max`; docs/simulator.md, KV capacity). Closed forms from bytes
counted by hand from the models' config.json files."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from simulator.run import simulate
from simulator.scenario.resolve import resolve_deployment
from simulator.scenario.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
BF16 = 2                    # bytes per weight and per KV element
USABLE = 80e9 * 0.9         # hardware_profiles/h100-sxm.yaml memory_capacity_gb 80, gpu_memory_utilization 0.9
RESERVE = 4e9               # engine.activation_reserve_gb: 4 (fixed, so the reserve does not depend on K)
BLOCK = 16                  # engine.block_size (vLLM's default)

# models/llama-3.1-8b.json: hidden 4096, 32 layers, MLP 14336, 32 heads of 128 (8 KV heads), vocab
# 128256, untied embeddings. Per layer: q, o 4096^2 each, k, v 4096 x 1024 each, MLP 3 x 4096 x 14336,
# 2 norms; plus embedding and LM head, final norm.
TARGET_PARAMS = 32 * (2 * 4096 ** 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096) + 2 * 128256 * 4096 + 4096
TARGET_KV_PER_TOKEN = 32 * 2 * 8 * 128 * BF16            # layers x (K, V) x KV heads x head_dim x bytes
# models/llama-3.2-1b.json: hidden 2048, 16 layers, MLP 8192, 32 heads of 64 (8 KV heads), tied embeddings.
DRAFT_PARAMS = 16 * (2 * 2048 ** 2 + 2 * 2048 * 512 + 3 * 2048 * 8192 + 2 * 2048) + 128256 * 2048 + 2048
DRAFT_KV_PER_TOKEN = 16 * 2 * 8 * 64 * BF16


def _draft_scenario(policy: str | dict, **engine) -> object:
    return load_scenario({
        "name": "plain-memory", "seed": 1, "hardware": {"gpu": "h100-sxm", "tp": 1}, "model": "llama-3.1-8b",
        "drafter": {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 3},
        "acceptance": {"model": "iid", "alpha": 0.7}, "policy": policy,
        "workload": {"arrival": {"process": "poisson", "qps": 1}, "num_requests": 4, "prompt_len": 512,
                     "output_len": 64},
        "engine": {"activation_reserve_gb": RESERVE / 1e9, **engine}})


def test_target_params_by_hand_are_the_catalogs():
    assert TARGET_PARAMS == 8_030_261_248 and DRAFT_PARAMS == 1_235_814_400   # the published 8.03B and 1.24B


def test_the_pool_holds_the_closed_form_with_and_without_the_drafter():
    """Sequences of 2,048 tokens the pool holds: floor(free / (block x KV per token)) blocks, 128
    blocks a sequence; with the drafter loaded its weights leave the free memory and its KV joins
    each token's."""
    loaded = resolve_deployment(_draft_scenario("static")).kv
    plain = resolve_deployment(_draft_scenario("off")).kv
    free_loaded = USABLE - TARGET_PARAMS * BF16 - DRAFT_PARAMS * BF16 - RESERVE
    free_plain = USABLE - TARGET_PARAMS * BF16 - RESERVE
    blocks_loaded = math.floor(free_loaded / (BLOCK * (TARGET_KV_PER_TOKEN + DRAFT_KV_PER_TOKEN)))
    blocks_plain = math.floor(free_plain / (BLOCK * TARGET_KV_PER_TOKEN))
    assert loaded.num_blocks == blocks_loaded
    assert plain.num_blocks == blocks_plain
    assert plain.drafter_weight_bytes == 0.0 and plain.kv_bytes_per_token == TARGET_KV_PER_TOKEN
    assert (loaded.num_blocks // 128, plain.num_blocks // 128) == (blocks_loaded // 128, blocks_plain // 128)
    assert plain.num_blocks // 128 > loaded.num_blocks // 128


@pytest.mark.parametrize("policy", [{"kind": "static", "k": 0}, {"kind": "batch_schedule", "schedule": [[8, 0]]}])
def test_a_policy_whose_k_is_always_0_is_plain_decoding(policy):
    assert resolve_deployment(_draft_scenario(policy)).kv == resolve_deployment(_draft_scenario("off")).kv


@pytest.mark.parametrize("policy", ["adaptive", "goodput", {"kind": "batch_schedule", "schedule": [[8, 3]]}])
def test_a_policy_that_may_speculate_keeps_the_drafter_loaded(policy):
    """Only a policy that never speculates drops the drafter: one that turns K to 0 at times still
    holds it (its next round may speculate)."""
    assert resolve_deployment(_draft_scenario(policy)).kv == resolve_deployment(_draft_scenario("static")).kv


def test_the_baseline_is_the_plain_deployment_on_the_same_requests():
    sc = _draft_scenario("static")
    r = simulate(sc, baseline=True)
    assert r.baseline.kv == resolve_deployment(_draft_scenario("off")).kv
    assert r.baseline.summary["kv_capacity_blocks"] == r.baseline.kv.num_blocks > r.summary["kv_capacity_blocks"]
    for col in ("arrival_s", "prompt_tokens", "output_tokens"):       # common random numbers
        np.testing.assert_array_equal(r.requests[col].to_numpy(), r.baseline.requests[col].to_numpy())


def _logits_reserve_bytes(max_num_seqs: int, k: int, vocab: int, tp: int) -> float:
    """The activation reserve's sampler term (kv_cache.estimate_activation_reserve_bytes): float32
    logits and probabilities for max_num_seqs x (k + 1) positions, split over tp."""
    return max_num_seqs * (k + 1) * vocab * 4 * 2 / tp


def test_shipped_draft_baseline_holds_more_and_ngram_only_its_k_reserve():
    """llama70b-tp4-h100-chat-draft: the baseline's pool holds more sequences than the speculative
    run's. The n-gram scenario on the same deployment has no drafter weights or KV: its baseline
    differs only by the sampler logits of K drafts (3 of them, 256 sequences, vocabulary 128,256,
    TP 4), and with a fixed activation reserve not at all."""
    small = ["workload.num_requests=8"]
    draft = simulate(load_scenario(SCENARIOS / "llama70b-tp4-h100-chat-draft.yaml", small), baseline=True)
    held_spec, held_base = draft.kv.num_blocks, draft.baseline.kv.num_blocks
    assert held_base > held_spec
    assert draft.baseline.kv.drafter_weight_bytes == 0.0 < draft.kv.drafter_weight_bytes

    ngram = simulate(load_scenario(SCENARIOS / "llama70b-tp4-h100-chat-ngram.yaml", small), baseline=True)
    spec, base = ngram.kv, ngram.baseline.kv
    assert spec.drafter_weight_bytes == base.drafter_weight_bytes == 0.0
    assert spec.kv_bytes_per_token == base.kv_bytes_per_token
    k_term = _logits_reserve_bytes(256, 3, 128256, 4) - _logits_reserve_bytes(256, 0, 128256, 4)
    assert spec.activation_reserve_bytes - base.activation_reserve_bytes == pytest.approx(k_term, rel=1e-12)
    free_base = spec.usable_bytes - spec.target_weight_bytes - spec.activation_reserve_bytes + k_term
    assert base.num_blocks == math.floor(free_base / (BLOCK * base.kv_bytes_per_token))
    assert held_base == base.num_blocks      # the same plain deployment, whichever drafter the scenario names

    fixed = ["workload.num_requests=8", "engine.activation_reserve_gb=2"]
    ngram_fixed = simulate(load_scenario(SCENARIOS / "llama70b-tp4-h100-chat-ngram.yaml", fixed), baseline=True)
    assert ngram_fixed.baseline.kv == ngram_fixed.kv


def test_sglang_plain_baseline_runs_without_the_speculative_request_cap():
    """SGLang caps running requests at 48 only with speculation (simulator/engines/sglang.py,
    SPEC_MAX_RUNNING_REQUESTS): the baseline of an SGLang scenario that leaves max_num_seqs unset
    keeps the scenario's own cap, the speculative run takes 48."""
    from simulator.engines.sglang import SPEC_MAX_RUNNING_REQUESTS
    from simulator.scenario.engine_defaults import with_engine_defaults

    sc = load_scenario({
        "name": "sglang-cap", "seed": 1, "hardware": {"gpu": "h100-sxm", "tp": 1}, "model": "llama-3.1-8b",
        "drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3},
        "acceptance": {"model": "iid", "alpha": 0.7}, "policy": "static",
        "workload": {"arrival": {"process": "poisson", "qps": 1}, "num_requests": 4, "prompt_len": 512,
                     "output_len": 64},
        "engine": {"kind": "sglang"}})
    plain_cap = sc.engine.max_num_seqs
    assert plain_cap != SPEC_MAX_RUNNING_REQUESTS
    assert with_engine_defaults(sc).engine.max_num_seqs == SPEC_MAX_RUNNING_REQUESTS
    assert with_engine_defaults(sc.baseline()).engine.max_num_seqs == plain_cap


def test_a_plain_deployment_is_not_refused_for_a_drafter_it_does_not_load():
    """SGLang v0.4 runs no draft model: with speculation it refuses one by name; with policy off
    the drafter is not loaded, so the plain run goes ahead, as the same run without a drafter."""
    from simulator.common.errors import SpecsightInputError
    sglang04 = ["engine.kind=sglang", "engine.version=v0.4", "workload.num_requests=8"]
    draft = "scenarios/llama8b-h100-draft1b-chat.yaml"
    with pytest.raises(SpecsightInputError) as e:
        simulate(load_scenario(draft, sglang04))
    assert e.value.field == "drafter.method"
    plain = simulate(load_scenario(draft, sglang04 + ["policy={kind: off}"]))
    bare = simulate(load_scenario(draft, sglang04 + ["policy={kind: off}", "drafter=null"]))
    assert plain.summary["output_tokens_per_s"] == bare.summary["output_tokens_per_s"]
