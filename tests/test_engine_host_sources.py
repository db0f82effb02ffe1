"""The engines' per-step host costs and the vLLM V1 version of mid-2025 (`engine.version: v1-0.9`):
the host constants' arithmetic from their published figures, the eager launches around vLLM's
draft passes priced in closed form, and v1-0.9's round pass by pass against docs/engines.md
(no async scheduling, PIECEWISE graphs, sizes not rounded to 1 + K, the syncs of vLLM 0.9.2's code)."""
from __future__ import annotations

import dataclasses

import pytest

from simulator.engines import EngineLimits, engine_for
from simulator.engines import host as H
from simulator.engines.vllm import EAGLE3_LOGITS_LAUNCHES, FIRST_LAUNCHES, STEP_LAUNCHES
from simulator.scenario.engine_defaults import with_engine_defaults
from simulator.scenario.resolve import resolve_deployment
from simulator.scenario.scenario import load_scenario
from simulator.speculation.drafters import DrafterSpec

LIM = EngineLimits(256, 8192, 1)


def spec(method="eagle3", k=3):
    return DrafterSpec(method=method, num_speculative_tokens=k, model=None if method == "ngram" else "x")


def cost(version=None, method="eagle3"):
    model = {"eagle3": "eagle3-llama-3.1-8b", "eagle": "eagle-llama-3.1-8b"}.get(method)
    drafter = {"method": method, "num_speculative_tokens": 3, **({"model": model} if model else {})}
    sc = {"name": "h", "seed": 1, "hardware": {"gpu": "h100-sxm", "tp": 1}, "model": "llama-3.1-8b",
          "drafter": drafter, "acceptance": {"model": "iid", "alpha": 0.7},
          "workload": {"arrival": {"process": "closed_loop", "concurrency": 1}, "num_requests": 2,
                       "prompt_len": 64, "output_len": 8},
          "engine": {"kind": "vllm", **({"version": version} if version else {})}}
    return resolve_deployment(with_engine_defaults(load_scenario(sc))).step_cost


def test_host_constants_are_their_published_figures():
    # vLLM PR #25872: async scheduling took the mean ITL (one round per streamed chunk) 28.14 -> 27.17 ms
    assert H.VLLM_V1_HOST.work_s(1, 0.0) == pytest.approx(0.97e-3)
    # SGLang PR #11398: v1 worker 246.80 tok/s at accept length 2.99, spec v2 273.43 tok/s at 3.01
    assert H.SGLANG_HOST.work_s(1, 0.0) == pytest.approx(2.99 / 246.80 - 3.01 / 273.43)
    # pie PR #348: CUDA graphs saved 7.29 ms a token over ~1200 eager kernels
    assert H.EAGER_LAUNCH_S * 1200 == pytest.approx(7.29e-3)


def test_v1_09_round_pass_by_pass():
    # B = 5, K = 2: verify 15 tokens pads to 16 (sizes not rounded to multiples of 3; v1 pads to 18);
    # every pass PIECEWISE; the draft passes carry the propose loop's eager launches
    v09, v1 = engine_for("vllm", "v1-0.9"), engine_for("vllm", "v1")
    p = v09.passes(spec(k=2), 5, 2, 3, LIM)
    shape = [(x.name, x.graph, x.padded_tokens, x.count, x.eager_launches) for x in p]
    assert shape == [("verify", "piecewise", 16, 1, 0),
                     ("draft_1", "piecewise", 16, 1, FIRST_LAUNCHES + EAGLE3_LOGITS_LAUNCHES + 1),
                     ("draft_2..K", "piecewise", 8, 1, STEP_LAUNCHES + EAGLE3_LOGITS_LAUNCHES)]
    assert v1.passes(spec(k=2), 5, 2, 3, LIM)[0].padded_tokens == 18
    assert v09.plain_pass(5, LIM).graph == "piecewise" and v1.plain_pass(5, LIM).graph == "full"
    # vLLM 0.9.2: parse_output's .cpu() and propose's two .item() (EAGLE, EAGLE-3); deepseek_mtp one .item()
    assert v09.syncs(spec()) == v09.syncs(spec("eagle")) == 3
    assert v09.syncs(spec("mtp")) == 2 and v09.syncs(spec("ngram")) == 1
    assert not v09.overlap(None) and not v09.overlap(spec())
    # EAGLE-1 draft steps launch the 17 of the loop, without EAGLE-3's vocabulary widening
    assert v09.passes(spec("eagle"), 5, 3, 4, LIM)[2].eager_launches == STEP_LAUNCHES == 17


@pytest.mark.parametrize("method,version,field", [("draft_model", "v1-0.9", "drafter.method"),
                                                  ("suffix", "v1-0.9", "drafter.method")])
def test_v1_09_refuses_what_came_later(method, version, field):
    from simulator.common.errors import SpecsightInputError
    with pytest.raises(SpecsightInputError) as e:
        engine_for("vllm", version).check(DrafterSpec(method=method, num_speculative_tokens=3,
                                                      model=None if method == "suffix" else "x"), 1)
    assert e.value.field == field and "v1-0.9" in str(e.value.allowed)


def test_v1_09_shows_all_host_work_in_plain_decoding_and_speculation():
    c, gpu = cost("v1-0.9"), 0.006
    # SpecDecode-Bench's fixed 1.207 ms a step (v0.10.1, the same engine state) at B = 1
    assert c.host_s(1, 0, 0, gpu) == pytest.approx(H.VLLM_V010_STEP_S)
    assert c.host_s(1, 3, 0, gpu) == pytest.approx(H.VLLM_V010_STEP_S + 3 * H.SYNC_S)
    assert cost("v1").host_s(1, 0, 0, gpu) == 0.0                    # v0.14.0 overlaps it


def test_eager_launches_around_a_draft_step_in_closed_form():
    """A piecewise draft step costs max(GPU, (layers + launches) x one launch): with the launches
    of the propose loop the GPU-bound step is unchanged; with many more it is the launches'."""
    c = cost("v1-0.9")
    step = next(p for p in c.round_passes(1, 3) if p.name == "draft_2..K")
    layers = c.drafter.draft_cost.model.num_layers
    gpu_s = c.pass_s(dataclasses.replace(step, eager_launches=0), 600.0)
    assert c.pass_s(step, 600.0) == pytest.approx(max(gpu_s, step.count * (layers + step.eager_launches)
                                                      * H.EAGER_LAUNCH_S))
    many = dataclasses.replace(step, eager_launches=10_000)
    assert c.pass_s(many, 600.0) == pytest.approx(step.count * (layers + 10_000) * H.EAGER_LAUNCH_S)
    assert c.pass_s(many, 600.0) > gpu_s
