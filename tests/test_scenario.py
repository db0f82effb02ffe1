"""Scenario files: the documented contract loads; overrides apply; bad input names its key path."""
from __future__ import annotations

import textwrap

import pytest

from simulator.common.errors import SpecsightInputError
from simulator.scenario.scenario import Scenario, apply_override, load_scenario

CONTRACT = textwrap.dedent("""\
    name: fixed-cost-demo
    seed: 0
    hardware: {kind: fixed, target_step_s: 0.02, draft_step_s: 0.001}
    model: llama-3.1-8b
    drafter: {method: draft_model, model: llama-3.2-1b, num_speculative_tokens: 3}
    acceptance: {model: iid, alpha: 0.7}
    policy: {kind: static}
    workload: {arrival: closed_loop, concurrency: 1, num_requests: 200, prompt_len: 128, output_len: 256}
    engine: {max_num_seqs: 256, max_num_batched_tokens: 8192, block_size: 16, gpu_memory_utilization: 0.9,
             router: round_robin}
    slo: {tpot_ms_p99: 50, ttft_ms_p99: 2000}
    """)


@pytest.fixture
def contract_path(tmp_path):
    p = tmp_path / "demo.yaml"
    p.write_text(CONTRACT)
    return p


def test_contract_example_loads(contract_path):
    sc = load_scenario(contract_path)
    assert isinstance(sc, Scenario)
    assert sc.name == "fixed-cost-demo" and sc.seed == 0
    assert sc.hardware.is_fixed and sc.hardware.target_step_s == 0.02
    assert sc.drafter.method == "draft_model" and sc.k_max == 3
    assert sc.acceptance.mean_alpha == 0.7
    assert sc.policy.kind == "static"
    assert sc.workload.is_closed_loop and sc.workload.concurrency == 1 and sc.workload.n_requests == 200
    assert sc.engine.max_num_seqs == 256 and sc.engine.router == "round_robin"
    assert sc.slo.tpot_ms_p99 == 50


def test_roofline_hardware_form():
    sc = load_scenario({"hardware": {"gpu": "h100-sxm", "tp": 2, "replicas": 3, "dtype": "bf16"},
                        "model": "llama-3.1-8b",
                        "workload": {"arrival": {"process": "poisson", "qps": 2}, "prompt_len": 10, "output_len": 10}})
    assert sc.hardware.kind == "roofline" and sc.hardware.tp == 2 and sc.hardware.replicas == 3
    assert sc.k_max == 0 and sc.policy.kind == "off"       # no drafter: speculation off


def test_overrides_apply_before_validation(contract_path):
    sc = load_scenario(contract_path, ["engine.max_num_seqs=64", "acceptance.alpha=0.5",
                                       "workload.concurrency=4", "drafter.num_speculative_tokens=5",
                                       "slo={tpot_ms_p99: 20}", "name=renamed"])
    assert sc.engine.max_num_seqs == 64
    assert sc.acceptance.mean_alpha == 0.5
    assert sc.workload.concurrency == 4
    assert sc.k_max == 5 and sc.policy.k_max == 5
    assert sc.slo.tpot_ms_p99 == 20 and sc.slo.ttft_ms_p99 is None
    assert sc.name == "renamed"
    assert sc.source["engine"]["max_num_seqs"] == 64     # the resolved mapping keeps the override


def test_override_creates_missing_sections(contract_path):
    sc = load_scenario(contract_path, ["engine.num_gpu_blocks=100"])
    assert sc.engine.num_gpu_blocks == 100


def test_yaml_off_means_policy_off(contract_path):
    # YAML 1.1 reads a bare `off` as False; it still means kind off.
    assert load_scenario(contract_path, ["policy={kind: off}"]).policy.kind == "off"
    assert load_scenario(contract_path, ["policy=off"]).policy.kind == "off"


def test_baseline_turns_speculation_off_and_keeps_the_rest(contract_path):
    sc = load_scenario(contract_path)
    b = sc.baseline()
    assert b.policy.kind == "off" and sc.policy.kind == "static"
    assert b.workload == sc.workload and b.seed == sc.seed and b.engine == sc.engine


@pytest.mark.parametrize("override, path", [
    ("bogus=1", "bogus"),
    ("engine.max_num_seq=3", "engine.max_num_seq"),
    ("hardware.target_step=0.1", "hardware.target_step"),
    ("slo.tpot_ms=5", "slo.tpot_ms"),
    ("drafter.num_speculative=3", "drafter.num_speculative"),
    ("acceptance.alpah=0.3", "acceptance.alpah"),
    ("workload.arrival.bogus=1", "workload.arrival.bogus"),
])
def test_unknown_keys_name_their_path(contract_path, override, path):
    with pytest.raises(SpecsightInputError, match=path.replace(".", r"\.")):
        load_scenario(contract_path, [override])


@pytest.mark.parametrize("override, path", [
    ("engine.block_size=0", "engine.block_size"),
    ("engine.gpu_memory_utilization=1.5", "engine.gpu_memory_utilization"),
    ("engine.router=random", "engine.router"),
    ("engine.max_num_batched_tokens=16", "engine.max_num_batched_tokens"),   # < max_num_seqs
    ("hardware.kind=quantum", "hardware.kind"),
    ("hardware.target_step_s=-1", "hardware.target_step_s"),
    ("hardware.replicas=0", "hardware.replicas"),
    ("acceptance.alpha=1.5", "acceptance.alpha"),
    ("seed=-1", "seed"),
    ("policy.kind=sometimes", "policy.kind"),
    ("drafter.method=magic", "drafter.method"),
    ("slo.tpot_ms_p99=0", "slo.tpot_ms_p99"),
])
def test_bad_values_name_their_path(contract_path, override, path):
    with pytest.raises(SpecsightInputError, match=path.replace(".", r"\.")):
        load_scenario(contract_path, [override])


def test_missing_required_pieces():
    with pytest.raises(SpecsightInputError, match="hardware.target_step_s"):
        load_scenario({"hardware": {"kind": "fixed"}, "workload": {"arrival": "poisson", "qps": 1,
                                                                   "prompt_len": 1, "output_len": 1}})
    with pytest.raises(SpecsightInputError, match="hardware.gpu"):
        load_scenario({"model": "llama-3.1-8b", "workload": {"arrival": "poisson", "qps": 1,
                                                             "prompt_len": 1, "output_len": 1}})
    with pytest.raises(SpecsightInputError, match="^model"):
        load_scenario({"hardware": {"gpu": "h100-sxm"}, "workload": {"arrival": "poisson", "qps": 1,
                                                                     "prompt_len": 1, "output_len": 1}})
    with pytest.raises(SpecsightInputError, match="^acceptance"):
        load_scenario({"hardware": {"kind": "fixed", "target_step_s": 1}, "drafter": {"method": "ngram"},
                       "workload": {"arrival": "poisson", "qps": 1, "prompt_len": 1, "output_len": 1}})
    with pytest.raises(SpecsightInputError, match="^workload"):
        load_scenario({"hardware": {"kind": "fixed", "target_step_s": 1}})


def test_malformed_overrides_and_files(tmp_path):
    raw = {"engine": {"router": "round_robin"}}
    with pytest.raises(SpecsightInputError, match="key.path=value"):
        apply_override(raw, "engine.max_num_seqs")
    with pytest.raises(SpecsightInputError, match="not a mapping"):
        apply_override(raw, "engine.router.x=1")
    with pytest.raises(SpecsightInputError, match="no such file"):
        load_scenario(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(SpecsightInputError, match="YAML"):
        load_scenario(bad)
    lst = tmp_path / "list.yaml"
    lst.write_text("- 1\n- 2\n")
    with pytest.raises(SpecsightInputError, match="mapping"):
        load_scenario(lst)


def test_errors_are_value_errors(contract_path):
    # library callers may catch ValueError
    with pytest.raises(ValueError):
        load_scenario(contract_path, ["engine.block_size=abc"])
