"""The CPU as a device class of the engine model (simulator/engines/device.py) and vLLM's host time
measured on it (measured_host.py): no overlap, no CUDA graphs, launches in series, the measured
host time added in series; a GPU profile prices as before."""
from __future__ import annotations

import pytest

from calibrate.engine_groundtruth import draft_config_path
from simulator.common.errors import SpecsightInputError
from simulator.costs.pass_shape import causal_pairs
from simulator.engines import engine_for
from simulator.engines.device import CPU, GPU, device_class
from simulator.engines.measured_host import MeasuredHost, ProposerHost, load_measured_host, measured_host_from_mapping
from simulator.engines.step_cost import attention_pairs, engine_profile
from simulator.hardware.hardware import load_profile
from simulator.run import simulate
from simulator.scenario.engine_deployment import engine_deployment

CPU_YAML = "tests/data/calibration_cpu/cpuAR.yaml"     # a profile `specsight calibrate --device cpu` wrote
TARGET = "models/groundtruth/tiny-s/config.json"
HOST = MeasuredHost(2.0e-3, 0.1e-3, {m: ProposerHost(0.7e-3, 0.02e-3, 0.4e-3, 0.01e-3)
                                     for m in ("eagle", "eagle3", "draft_model", "ngram")})


def _scenario(method: str | None, k: int = 3, B: int = 4, profile: str = CPU_YAML, version: str = "v1-0.32") -> dict:
    sc = {"name": "cpu", "seed": 0, "hardware": {"profile": profile, "tp": 1, "dtype": "fp32"}, "model": TARGET,
          "acceptance": {"model": "per_position", "alphas": [0.9, 0.8, 0.7, 0.6]}, "policy": {"kind": "static"},
          "workload": {"arrival": {"process": "closed_loop", "concurrency": B}, "num_requests": B,
                       "prompt_len": 64, "output_len": 16},
          "engine": {"kind": "vllm", "version": version, "max_num_seqs": B, "max_num_batched_tokens": 2048}}
    if method:
        d = {"method": method, "num_speculative_tokens": k}
        if method != "ngram":
            name = {"draft_model": "draft"}.get(method, method)
            d["model"] = draft_config_path({"method": method, "target_config": TARGET,
                                            "draft_config": f"models/groundtruth/tiny-s-{name}/config.json"})
        sc["drafter"] = d
    return sc


def test_device_class_is_read_from_the_profile():
    assert device_class(load_profile(CPU_YAML)) is CPU
    assert device_class(load_profile("h100-sxm")) is GPU
    assert (CPU.graphs, CPU.overlap, CPU.serial_launches, CPU.syncs_cost) == (False, False, True, False)


@pytest.mark.parametrize("method", ["eagle", "eagle3", "draft_model"])
def test_a_cpu_round_costs_its_eager_passes_plus_the_host_in_series(method):
    """Round = each pass at its own size (the cost model's time, its kernels' dispatch included) +
    the ops dispatched around it + H(B) + the proposer's P(B, K), nothing hidden or overlapped."""
    B, k, ctx = 4, 3, 100.0
    cost = engine_deployment(_scenario(method, k, B), HOST).step_cost
    prof = load_profile(CPU_YAML)
    assert cost.cm.hw.overheads.kernel_launch_us == prof.overheads.kernel_launch_us > 0
    assert cost.cm.hw.overheads.iteration_us == 0.0 and cost.cm.hw.overheads.sampling_row_us is None
    dispatch = prof.overheads.kernel_launch_us * 1e-6
    want = 0.0
    for p in cost.round_passes(B, k):
        cm = cost.cm if p.model == "target" else cost.drafter.draft_cost
        for j in range(p.count):
            c = B * ctx + B * j
            pairs = causal_pairs(p.tokens, c, B)       # vLLM's CPU attention: no query tile (verify included)
            want += cm.time_s(p.tokens, c, pairs, B * p.logits_per_seq, B) + p.eager_launches * dispatch
    host = HOST.iteration_s(B) + HOST.proposer(method).time_s(B, k)
    assert cost.round_time_s(B, k, ctx, k + 1) == pytest.approx(want + host, rel=1e-12)
    plain = cost.cm.time_s(B, B * ctx, causal_pairs(B, B * ctx, B), B, B)
    assert cost.round_time_s(B, 0, ctx, 1) == pytest.approx(plain + HOST.iteration_s(B), rel=1e-12)


def test_an_ngram_round_on_a_cpu_is_the_verify_pass_plus_the_measured_proposer():
    B, k, ctx = 8, 2, 50.0
    cost = engine_deployment(_scenario("ngram", k, B), HOST).step_cost
    verify = cost.cm.time_s(B * (k + 1), B * ctx, causal_pairs(B * (k + 1), B * ctx, B), B * (k + 1), B)
    assert cost.draft_s(B, k, B * ctx) == 0.0
    assert cost.round_time_s(B, k, ctx, k + 1) == pytest.approx(
        verify + HOST.iteration_s(B) + HOST.proposer("ngram").time_s(B, k), rel=1e-12)


def test_the_cpu_builds_verify_attention_is_priced_at_the_causal_pairs_and_a_gpus_at_the_query_tile():
    """vLLM's CPU attention runs a verify's K + 1 queries a sequence in the decode kernel (no 64-row
    query tile, as calibrate fits it): 21x fewer pairs than the GPU prefill kernel's at K = 2, group 1."""
    B, k, ctx = 16, 2, 128.0
    cpu = engine_deployment(_scenario("eagle", k, B), HOST).step_cost
    causal = causal_pairs(B * (k + 1), B * ctx, B)
    want = cpu.cm.time_s(B * (k + 1), B * ctx, causal, B * (k + 1), B)
    assert cpu.target_s(B * (k + 1), B * ctx, causal, B * (k + 1), B) == pytest.approx(want, rel=1e-12)
    tiled = attention_pairs("prefill", k + 1, B, B * ctx, cpu.cm.query_group)
    assert tiled == pytest.approx(causal * 64 / 3)
    assert cpu.cm.time_s(B * (k + 1), B * ctx, tiled, B * (k + 1), B) > 1.1 * want
    assert engine_for("vllm", "v1").attention_class(cpu.spec) == "prefill"
    assert engine_for("vllm", "v1-0.32").attention_class(cpu.spec) == "decode"


@pytest.mark.parametrize("method", ["eagle", "draft_model"])
def test_the_cpu_builds_drafter_reads_the_prompt_in_the_prefill_step_not_the_first_round(method):
    """vLLM proposes in the step that returns the first token: the drafter's pass over the prompt
    is in the prefill iteration (TTFT), and the first decode round drafts as the later ones do
    (its draft time within the context growth of the next round's), where a version without it
    charges the prompt to the first round."""
    B, k = 8, 2
    sc = _scenario(method, k, B)
    it = simulate(sc).iterations
    first, rounds = it.iloc[0], it[it["num_decode"] > 0]
    assert first["num_prefill_tokens"] == B * 64 and first["draft_s"] > 0
    r1, r2 = rounds["draft_s"].iloc[0], rounds["draft_s"].iloc[1]
    assert r1 == pytest.approx(r2, rel=0.02)
    assert first["draft_s"] > 3 * r1                      # the prompt's pass is the dearer one
    cost = engine_deployment(sc, HOST).step_cost
    assert cost.drafts_in_prefill
    assert not engine_deployment(_scenario(method, k, B, profile="h100-sxm", version="v1") | {
        "hardware": {"gpu": "h100-sxm", "tp": 1}}, None).step_cost.drafts_in_prefill


def test_a_gpu_profile_prices_as_before():
    """On a GPU the engine profile zeroes the launches as before and no measured host applies."""
    h100 = load_profile("h100-sxm")
    assert engine_profile(h100) == engine_profile(h100, GPU)
    assert engine_profile(h100).overheads.kernel_launch_us == 0.0
    assert engine_profile(h100).overheads.sampling_row_us == h100.overheads.sampling_row_us
    assert engine_for("vllm", "v1").measured_host_name(GPU) is None
    sc = _scenario("eagle", profile="h100-sxm", version="v1")
    sc["hardware"] = {"gpu": "h100-sxm", "tp": 1}
    cost = engine_deployment(sc, None).step_cost
    assert cost.device is GPU and cost.measured is None and type(cost.cm).__name__ == "TiledCostModel"


def test_versions_and_device_classes_that_do_not_fit_are_refused():
    with pytest.raises(SpecsightInputError, match="CPU profile only"):
        engine_for("vllm", "v1-0.32").measured_host_name(GPU)
    with pytest.raises(SpecsightInputError, match="v1-0.32"):
        engine_for("vllm", "v1").measured_host_name(CPU)
    with pytest.raises(SpecsightInputError, match="engine.version"):
        simulate(_scenario("eagle", version="v1"))
    with pytest.raises(SpecsightInputError, match="drafter.method"):
        engine_deployment(_scenario("eagle"), MeasuredHost(1e-3, 0.0, {"ngram": ProposerHost()}, "x.yaml"))


def test_a_measured_host_file_is_checked_by_field():
    with pytest.raises(SpecsightInputError, match=r"iteration\.a_s"):
        measured_host_from_mapping({"iteration": {"a_s": -1.0, "b_s": 0.0}}, "f.yaml")
    with pytest.raises(SpecsightInputError, match=r"proposer\.eagle\.step_s"):
        measured_host_from_mapping({"iteration": {"a_s": 0.0, "b_s": 0.0}, "proposer": {"eagle": {"step_s": "x"}}},
                                   "f.yaml")
    h = measured_host_from_mapping({"iteration": {"a_s": 1e-3, "b_s": 2e-5},
                                    "proposer": {"eagle": {"round_s": 1e-4, "step_s": 3e-4}}}, "f.yaml")
    assert h.iteration_s(10) == pytest.approx(1.2e-3) and h.proposer("eagle").time_s(2, 3) == pytest.approx(1.0e-3)


def test_the_committed_constants_load():
    h = load_measured_host("vllm-0.32.0-cpu")
    assert h.a_s >= 0 and h.b_s >= 0 and set(h.proposers) >= {"eagle"}
