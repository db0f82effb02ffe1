"""SGLang v0.4.4-v0.4.5 (`engine.version: v0.4`), read in the sglang 0.4.5 wheel: its round pass by
pass against docs/engines.md (the draft extend eager, seven syncs a round, its CUDA-graph sizes, the
methods it ran), and its round priced in closed form against v0.5's: the same verify and draft
steps, the draft extend at max(GPU time, kernels x eager launch) instead of its graph, and five more
syncs."""
from __future__ import annotations

import pytest

from simulator.common.errors import SpecsightInputError
from simulator.engines import EngineLimits, engine_for
from simulator.engines import host as H
from simulator.engines.cuda_graphs import padded_size, sglang_v04_sizes
from simulator.engines.step_cost import kernels
from simulator.scenario.engine_defaults import with_engine_defaults
from simulator.scenario.resolve import resolve_deployment
from simulator.scenario.scenario import load_scenario
from simulator.speculation.drafters import DrafterSpec

LIM = EngineLimits(48, 8192, 1)


def spec(method="eagle3", k=3):
    return DrafterSpec(method=method, num_speculative_tokens=k, model=None if method == "ngram" else "x")


def cost(version):
    sc = {"name": "s", "seed": 1, "hardware": {"gpu": "h100-sxm", "tp": 1}, "model": "llama-3.1-8b",
          "drafter": {"method": "eagle3", "num_speculative_tokens": 3, "model": "eagle3-llama-3.1-8b"},
          "acceptance": {"model": "iid", "alpha": 0.7},
          "workload": {"arrival": {"process": "closed_loop", "concurrency": 1}, "num_requests": 2,
                       "prompt_len": 64, "output_len": 8},
          "engine": {"kind": "sglang", "version": version}}
    return resolve_deployment(with_engine_defaults(load_scenario(sc))).step_cost


def test_v04_round_pass_by_pass():
    # B = 5, K = 3, chain: draft steps and verify replay graphs (5 is captured), the draft extend eager
    e = engine_for("sglang", "v0.4")
    shape = [(p.name, p.model, p.tokens_per_seq, p.logits_per_seq, p.count, p.graph, p.padded_tokens)
             for p in e.passes(spec(), 5, 3, 4, LIM)]
    assert shape == [("draft", "draft", 1, 1, 2, "full", 5), ("verify", "target", 4, 4, 1, "full", 20),
                     ("draft_extend", "draft", 4, 1, 1, "eager", None)]
    # B = 33 pads to 40 (captured with speculation: ..., 30, 32, 40, 56, ...)
    assert e.passes(spec(), 33, 3, 4, LIM)[1].padded_tokens == 40 * 4
    assert e.syncs(spec()) == 7 and engine_for("sglang", "v0.5").syncs(spec()) == 2
    assert not e.overlap(spec()) and e.overlap(None)
    assert e.defaults(True, 1) == {"max_num_seqs": 48}


def test_v04_graph_sizes_are_the_wheels():
    spec_sizes, plain_sizes = sglang_v04_sizes(True, 1024), sglang_v04_sizes(False, 1024)
    assert spec_sizes[:8] == tuple(range(1, 9)) and spec_sizes[8:20] == tuple(range(10, 33, 2))
    assert spec_sizes[20:] == (40, 56, 72, 88, 104, 120, 136, 152)
    assert plain_sizes[:5] == (1, 2, 4, 8, 16) and plain_sizes[-1] == 160 and len(plain_sizes) == 4 + 19
    # above the largest size a pass runs eagerly
    assert padded_size(153, spec_sizes) is None and padded_size(161, plain_sizes) is None
    # SGLang's speculative cap of 48 running requests: a pool of 49 slots adds 48 and 49, cuts 56 and up
    capped = sglang_v04_sizes(True, 48)
    assert capped[20:] == (40, 48, 49) and padded_size(41, capped) == 48
    assert engine_for("sglang", "v0.4").plain_pass(9, LIM).padded_tokens == 16


@pytest.mark.parametrize("method", ["draft_model", "ngram"])
def test_v04_refuses_what_came_later(method):
    with pytest.raises(SpecsightInputError) as e:
        engine_for("sglang", "v0.4").check(spec(method), 1)
    assert e.value.field == "drafter.method" and "sglang v0.4" in str(e.value.allowed)


def test_v04_round_in_closed_form_against_v05():
    # B = 1, K = 3, context 1000: verify and draft steps identical (size 1 captured by both versions);
    # the draft extend eager at max(GPU, kernels x 6.1 us) where v0.5 replays its graph (GPU time
    # alone); host: H(1) exposed in both (no overlap while speculating) plus 7 syncs against 2
    c04, c05 = cost("v0.4"), cost("v0.5")
    ext05 = next(p for p in c05.round_passes(1, 3) if p.name == "draft_extend")
    ext04 = next(p for p in c04.round_passes(1, 3) if p.name == "draft_extend")
    nodes = kernels(c04.drafter.draft_cost)
    gpu_ext = c05.pass_s(ext05, 1000.0) - nodes * H.GRAPH_NODE_GPU_S     # the graph's node floor off
    assert c04.pass_s(ext04, 1000.0) == pytest.approx(max(gpu_ext, nodes * H.EAGER_LAUNCH_S), rel=1e-12)
    # host beyond H(1): v0.4 launches the draft and verify graphs after syncs and plans each draft step
    # and the verify (k plans); v0.5 launches the draft and draft-extend graphs after syncs
    tails04 = (nodes * 2 + kernels(c04.cm)) * H.GRAPH_NODE_HOST_S + 3 * H.SGLANG_FLASHINFER_PLAN_S
    tails05 = (nodes * 2 + nodes) * H.GRAPH_NODE_HOST_S
    assert c04.round_host_s(1, 3) == pytest.approx(tails04) and c05.round_host_s(1, 3) == pytest.approx(tails05)
    extra = (max(gpu_ext, nodes * H.EAGER_LAUNCH_S) - c05.pass_s(ext05, 1000.0) + 5 * H.SYNC_S
             + tails04 - tails05)
    assert c04.round_time_s(1, 3, 1000.0, 4) - c05.round_time_s(1, 3, 1000.0, 4) == pytest.approx(extra, rel=1e-9)
    # plain decoding: the same pass and overlap
    assert c04.round_time_s(1, 0, 1000.0, 1) == pytest.approx(c05.round_time_s(1, 0, 1000.0, 1), rel=1e-12)
