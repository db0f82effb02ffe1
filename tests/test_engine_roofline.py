"""The engine on the roofline cost model: every drafter family and policy runs end to end, KV
capacity follows the memory budget, calibrated profiles are named, and the fast acceptance
sampler's equivalence to the acceptance module's is in test_acceptance.py."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest
import yaml

from simulator.common.paths import HARDWARE_DIR
from simulator.costs.cost_model import CostModel
from simulator.costs.kv_cache import estimate_activation_reserve_bytes
from simulator.hardware.hardware import load_profile
from simulator.models.catalog import load_model
from simulator.run import simulate
from simulator.scenario.scenario import load_scenario


def roofline(**over):
    sc = {"name": "roof", "seed": 2, "hardware": {"gpu": "h100-sxm", "tp": 1}, "model": "llama-3.1-8b",
          "drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3},
          "acceptance": {"model": "iid", "alpha": 0.7},
          "workload": {"arrival": {"process": "poisson", "qps": 20}, "num_requests": 40,
                       "prompt_len": {"dist": "uniform", "low": 50, "high": 600},
                       "output_len": {"dist": "uniform", "low": 20, "high": 120}},
          "engine": {"max_num_seqs": 16, "max_num_batched_tokens": 1024}}
    sc.update(over)
    return sc


DRAFTERS = [
    {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 4},
    {"method": "eagle", "model": "eagle-llama-3.1-8b", "num_speculative_tokens": 3},
    {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3, "tree": True,
     "tree_nodes": 15, "tree_branches": 2},
    {"method": "medusa", "model": "medusa-llama-3.1-8b", "num_speculative_tokens": 4, "tree_branches": 3},
    {"method": "ngram", "num_speculative_tokens": 4, "match_probability": 0.5},
    {"method": "suffix", "num_speculative_tokens": 4},
    {"method": "parallel", "model": "llama-3.2-1b", "num_speculative_tokens": 4},
    {"method": "self_spec", "num_speculative_tokens": 3, "layer_fraction": 0.25},
]


@pytest.mark.parametrize("drafter", DRAFTERS, ids=lambda d: d["method"] + ("-tree" if d.get("tree") else ""))
def test_every_drafter_runs(drafter):
    r = simulate(roofline(drafter=drafter), baseline=True)
    s = r.summary
    assert s["num_requests"] == 40 and r.requests["finish_s"].notna().all()
    assert s["mean_tokens_per_round"] > 1.0
    assert s["speedup_output_tokens_per_s"] > 0
    it = r.iterations
    spec = it[(it["k"] > 0) & (it["num_decode"] > 0)]
    assert len(spec) > 0
    if drafter["method"] in ("ngram", "suffix"):
        assert s["draft_time_frac"] < 0.05                   # host lookups only
    else:
        assert (spec["draft_s"] > 0).all()


def test_tree_accepts_more_per_depth():
    chain = simulate(roofline(acceptance={"model": "iid", "alpha": 0.5}))
    tree = simulate(roofline(acceptance={"model": "iid", "alpha": 0.5},
                             drafter={"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3,
                                      "tree": True, "tree_nodes": 15, "tree_branches": 2}))
    # a depth is accepted if either branch is: 1 - 0.5^2 = 0.75 per depth
    assert tree.summary["acceptance_rate_pos1"] == pytest.approx(0.75, abs=0.05)
    assert chain.summary["acceptance_rate_pos1"] == pytest.approx(0.5, abs=0.05)


@pytest.mark.parametrize("policy", [
    {"kind": "static", "k": 2},
    {"kind": "batch_schedule", "schedule": [[4, 3], [8, 1]]},
    {"kind": "adaptive"},
    {"kind": "goodput"},
    "off",
])
def test_every_policy_runs(policy):
    r = simulate(roofline(policy=policy))
    ks = set(r.iterations["k"])
    assert ks <= {0, 1, 2, 3}
    if policy == "off":
        assert ks == {0}
    if isinstance(policy, dict) and policy.get("kind") == "static":
        assert ks <= {0, 2}
    if isinstance(policy, dict) and policy.get("kind") == "batch_schedule":
        it = r.iterations
        assert (it.loc[it["num_decode"] > 8, "k"] == 0).all()
        assert (it.loc[(it["num_decode"] > 0) & (it["num_decode"] <= 4), "k"] == 3).all()


def test_goodput_policy_turns_speculation_off_when_it_cannot_pay():
    # alpha ~ 0 and a costly draft model: expected tokens per round ~ 1, so K = 0 wins
    r = simulate(roofline(acceptance={"model": "iid", "alpha": 0.01}, policy={"kind": "goodput", "prior_strength": 1},
                          drafter={"method": "draft_model", "model": "llama-3.2-3b", "num_speculative_tokens": 3}))
    it = r.iterations
    dec = it[it["num_decode"] > 0]
    assert (dec["k"].iloc[len(dec) // 2:] == 0).all()


def test_kv_capacity_follows_the_memory_budget():
    r = simulate(roofline(engine={"max_num_seqs": 16, "max_num_batched_tokens": 1024, "gpu_memory_utilization": 0.5}))
    kv = r.kv
    cm = CostModel(load_model("llama-3.1-8b"), load_profile("h100-sxm"))
    assert kv.usable_bytes == pytest.approx(80e9 * 0.5)
    assert kv.target_weight_bytes == pytest.approx(cm.weight_bytes_per_gpu)
    assert kv.drafter_weight_bytes > 0
    assert kv.activation_reserve_bytes == pytest.approx(estimate_activation_reserve_bytes(cm, 1024, 16, 3))
    free = kv.usable_bytes - kv.target_weight_bytes - kv.drafter_weight_bytes - kv.activation_reserve_bytes
    assert kv.num_blocks == int(free // (16 * kv.kv_bytes_per_token))
    assert kv.kv_bytes_per_token > cm.kv_bytes_per_token            # the EAGLE-3 layer keeps KV too
    assert r.summary["kv_capacity_blocks"] == kv.num_blocks
    # tensor parallelism splits weights and KV heads: more blocks per replica
    r2 = simulate(roofline(hardware={"gpu": "h100-sxm", "tp": 2},
                           workload=roofline()["workload"] | {"num_requests": 5}))
    assert r2.kv.num_blocks > 2 * kv.num_blocks


def test_model_that_does_not_fit_is_an_input_error():
    with pytest.raises(ValueError, match="no room for a KV cache"):
        simulate(roofline(model="llama-3.1-70b", drafter=None, acceptance=None,
                          hardware={"gpu": "h100-sxm", "tp": 1}))


def test_replicas_share_the_load():
    r = simulate(roofline(hardware={"gpu": "h100-sxm", "tp": 1, "replicas": 2},
                          engine={"max_num_seqs": 16, "max_num_batched_tokens": 1024, "router": "least_outstanding"}))
    assert set(r.requests["replica"]) == {0, 1}
    assert set(r.iterations["replica"]) == {0, 1}
    assert r.summary["busy_frac"] <= 1.0 + 1e-9


def test_calibrated_profile_is_named_in_the_summary(tmp_path):
    raw = yaml.safe_load((HARDWARE_DIR / "h100-sxm.yaml").read_text())
    raw["calibration"] = {"method": "least-squares fit", "device_name": "NVIDIA H100 80GB HBM3", "date": "2026-11-01"}
    raw["efficiency"]["memory"] = 0.7
    p = tmp_path / "h100-sxm.calibrated.yaml"
    p.write_text(yaml.safe_dump(raw))
    r = simulate(roofline(hardware={"gpu": "h100-sxm", "profile": str(p)},
                          workload=roofline()["workload"] | {"num_requests": 5}))
    assert "CALIBRATED" in r.summary["hardware_profile"] and str(p) in r.summary["hardware_profile"]
    base = simulate(roofline(workload=roofline()["workload"] | {"num_requests": 5}))
    assert r.summary["tpot_ms_p50"] > base.summary["tpot_ms_p50"]      # lower memory efficiency: slower


def test_shipped_scenario_runs():
    from simulator.common.paths import SCENARIOS_DIR
    sc = load_scenario(SCENARIOS_DIR / "llama8b-h100-eagle3-chat.yaml", ["workload.num_requests=24"])
    r = simulate(sc, baseline=True)
    assert r.summary["num_requests"] == 24 and np.isfinite(r.summary["speedup_output_tokens_per_s"])


def test_scenario_from_yaml_text(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(textwrap.dedent("""\
        hardware: {gpu: a100-80gb-sxm, tp: 2}
        model: codellama-34b
        workload: {arrival: poisson, qps: 1, num_requests: 10, prompt_len: 100, output_len: 20}
        """))
    r = simulate(p)
    assert r.summary["num_requests"] == 10 and r.summary["k_max"] == 0
