"""Real engines (simulator/engines/): each round's anatomy pass by pass against docs/engines.md,
CUDA-graph sizes and padding, GEMM tile and wave steps in closed form, refusals naming the engine,
the engines' defaults, and the host model plain decoding and speculation each pay. `ideal` is
today's model (its bit-identity is tests/golden_cases.py's and test_golden_runs.py's)."""
from __future__ import annotations

import math

import pytest

from simulator.common.errors import SpecsightInputError
from simulator.common.paths import REPO_ROOT
from simulator.costs.cost_model import CostModel
from simulator.engines import ENGINES, EngineLimits, engine_for
from simulator.engines import host as H
from simulator.engines.anatomy import anatomy_markdown
from simulator.engines.cuda_graphs import padded_size, sglang_sizes, trtllm_sizes, vllm_v1_sizes
from simulator.engines.step_cost import EngineStepCost, attention_pairs, engine_profile
from simulator.engines.tiles import TILE_N, TiledCostModel, quantized_flops_ratio
from simulator.hardware.hardware import load_profile
from simulator.models.catalog import load_model
from simulator.run import simulate
from simulator.scenario.engine_defaults import with_engine_defaults
from simulator.scenario.resolve import resolve_deployment
from simulator.scenario.scenario import load_scenario
from simulator.serving.engine_replica import EngineReplica
from simulator.serving.step_cost import RooflineStepCost
from simulator.speculation.drafters import DrafterSpec

EAGLE3 = {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3}


def scenario(kind="ideal", version=None, drafter=EAGLE3, engine=None, **kw):
    eng = {"kind": kind, **({"version": version} if version else {}), **(engine or {})}
    sc = {"name": "eng", "seed": 3, "hardware": {"gpu": "h100-sxm", "tp": 1}, "model": "llama-3.1-8b",
          "drafter": drafter, "acceptance": {"model": "iid", "alpha": 0.7},
          "workload": {"arrival": {"process": "closed_loop", "concurrency": 4}, "num_requests": 12,
                       "prompt_len": 64, "output_len": 24},
          "engine": eng}
    sc.update(kw)
    return load_scenario(sc)


def spec(method="eagle3", k=3, **kw):
    return DrafterSpec(method=method, num_speculative_tokens=k,
                       model=None if method in ("ngram", "suffix") else "x", **kw)


LIM = EngineLimits(256, 8192, 1)


# ---- round anatomy --------------------------------------------------------------------------
def test_the_docs_table_is_the_engines_anatomy():
    doc = (REPO_ROOT / "docs" / "engines.md").read_text()
    assert anatomy_markdown() in doc, "docs/engines.md's anatomy table is stale: python -m simulator.engines.anatomy"


def _shape(passes):
    return [(p.name, p.model, p.seqs, p.tokens_per_seq, p.count, p.graph, p.padded_tokens) for p in passes]


def test_vllm_v1_eagle_round_pass_by_pass():
    # B = 5, K = 3: verify 5 x 4 = 20 tokens, FULL graph padded to 24 (the sizes 16, 24 are already
    # multiples of 4); draft 1 over all 20 window tokens, PIECEWISE, padded the same; K - 1 = 2
    # passes of 5 tokens, padded to 8
    p = engine_for("vllm", None).passes(spec(), 5, 3, 4, LIM)
    assert _shape(p) == [("verify", "target", 5, 4, 1, "full", 24), ("draft_1", "draft", 5, 4, 1, "piecewise", 24),
                         ("draft_2..K", "draft", 5, 1, 2, "piecewise", 8)]
    # K = 1: the proposer returns right after pass 1
    assert [x.name for x in engine_for("vllm", "v1").passes(spec(k=1), 5, 1, 2, LIM)] == ["verify", "draft_1"]
    # a separate draft model: pass 1 covers the window plus the new sampled token
    assert engine_for("vllm", None).passes(spec("draft_model"), 5, 3, 4, LIM)[1].tokens_per_seq == 5


def test_sglang_round_pass_by_pass():
    # S = K = 3, topk 1, N = 4, B = 9 (graphs by batch size: 9 pads to 10): S - 1 draft passes of
    # B topk, verify B N, draft extend B (S + 1)
    p = engine_for("sglang", None).passes(spec(), 9, 3, 4, LIM)
    assert _shape(p) == [("draft", "draft", 9, 1, 2, "full", 10), ("verify", "target", 9, 4, 1, "full", 40),
                         ("draft_extend", "draft", 9, 4, 1, "full", 40)]
    # a tree (topk 4, 16 verify tokens): draft passes of B topk, the extend still S + 1 wide
    t = engine_for("sglang", None).passes(spec(tree=True, tree_branches=4, tree_nodes=15), 2, 3, 16, LIM)
    assert _shape(t) == [("draft", "draft", 2, 4, 2, "full", 8), ("verify", "target", 2, 16, 1, "full", 32),
                         ("draft_extend", "draft", 2, 4, 1, "full", 8)]
    # each draft step scores topk rows a request; the extend one (its last token's, top-k taken from it)
    assert [x.logits_per_seq for x in t] == [4, 16, 1]
    # spec v2: the extend at the fixed width N
    v2 = engine_for("sglang", "v0.5-spec-v2").passes(spec(k=3), 5, 3, 4, LIM)
    assert v2[-1].tokens_per_seq == 4
    assert engine_for("sglang", None).syncs(spec()) == 2 and engine_for("sglang", "v0.5-spec-v2").syncs(spec()) == 1


def test_trtllm_one_model_round_is_one_graph_and_eager_when_not_captured():
    e = engine_for("trtllm", None)
    p = e.passes(spec(), 5, 3, 4, EngineLimits(128, 8192, 1))
    assert {x.graph for x in p} == {"round"} and [x.tokens for x in p] == [20, 20, 5]
    assert e.syncs(spec()) == 0 and e.overlap(spec())
    # padding off: 33 sequences are not a captured size, so the whole round runs eagerly
    assert {x.graph for x in e.passes(spec(), 33, 3, 4, EngineLimits(128, 8192, 1))} == {"eager"}
    assert e.passes(spec("draft_model"), 5, 3, 4, EngineLimits(128, 8192, 1))[0].graph == "full"


# ---- CUDA graphs --------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 1, 3, 4, 7])
def test_vllm_sizes_are_multiples_of_the_verify_width(k):
    s = vllm_v1_sizes(256, 8192, k)
    assert all(x % (1 + k) == 0 for x in s) and list(s) == sorted(set(s))
    assert s[-1] == -(-min(256 * (1 + k) * 2, 512) // (1 + k)) * (1 + k)


def test_padding_to_the_next_captured_size():
    s = vllm_v1_sizes(256, 8192, 3)              # K = 3: 1, 2, 4 -> 4; 8, 16, ..., 256, 272, ... 512
    assert s[:4] == (4, 8, 16, 24) and padded_size(13, s) == 16 and padded_size(1, s) == 4
    assert padded_size(513, s) is None                                           # eager beyond 512
    assert vllm_v1_sizes(256, 8192, 2)[:5] == (3, 6, 9, 18, 24)                   # 8 -> 9, 16 -> 18, 24
    assert padded_size(9, sglang_sizes(256)) == 10 and padded_size(33, sglang_sizes(256)) == 40
    assert sglang_sizes(256)[-1] == 256 and sglang_sizes(512)[-1] == 512
    t = trtllm_sizes(128)
    assert padded_size(32, t, pad=False) == 32 and padded_size(33, t, pad=False) is None
    assert padded_size(129, t, pad=False) is None


# ---- tile and wave quantization --------------------------------------------------------------
def test_tile_and_wave_steps_closed_form():
    one = ((TILE_N * 10, 4096),)                  # 10 column tiles
    assert quantized_flops_ratio(1, one, 132) == 1.0
    assert quantized_flops_ratio(64, one, 132) == pytest.approx(1.0)
    assert quantized_flops_ratio(32, one, 132) == pytest.approx(2.0)            # half a tile of rows
    assert quantized_flops_ratio(65, one, 132) == pytest.approx(128 / 65)       # a second row of tiles
    wide = ((TILE_N * 100, 4096),)                # 100 column tiles: 2 rows = 200 tiles -> 2 waves of 132
    assert quantized_flops_ratio(128, wide, 132) == pytest.approx(264 / 200)
    assert quantized_flops_ratio(64, wide, 132) == pytest.approx(1.0)           # 100 tiles: under one wave
    assert quantized_flops_ratio(128, wide, None) == pytest.approx(1.0)         # no sm_count: tiles only


def test_tiled_linear_cost_is_flat_within_a_tile_and_steps_across():
    prof = engine_profile(load_profile("h100-sxm"))
    m = load_model("llama-3.1-8b")
    tiled, plain = TiledCostModel(m, prof), CostModel(m, prof)
    w = {T: tiled._pass_terms(T, 1)[0] for T in (1, 2, 33, 64, 65, 128, 129, 512, 513)}
    assert w[1] == plain._pass_terms(1, 1)[0]                                   # GEMV: no tiles
    assert w[2] == pytest.approx(w[33]) == pytest.approx(w[64])                 # one tile of rows
    assert w[65] > w[64] and w[129] > w[128] and w[513] > w[512]
    assert w[128] == pytest.approx(w[65])
    assert all(tiled._pass_terms(T, 1)[0] >= plain._pass_terms(T, 1)[0] - 1e-15 for T in w)


def test_verify_attention_by_kernel_class():
    # decode: the causal pairs; prefill: 4 tokens x 4 query heads per KV head = 16 rows padded to 64
    dec = attention_pairs("decode", 4, 2, 2000.0, 4)
    assert dec == 2 * (4 * 1000 + 4 * 5 / 2)
    assert attention_pairs("prefill", 4, 2, 2000.0, 4) == pytest.approx(dec * 4)
    assert attention_pairs("prefill_tree", 4, 2, 2000.0, 4) == pytest.approx(2 * 4 * (1000 + 4) * 4)
    assert attention_pairs("prefill", 1, 2, 2000.0, 4) == attention_pairs("decode", 1, 2, 2000.0, 4)


# ---- refusals and defaults ------------------------------------------------------------------
@pytest.mark.parametrize("kind,version,drafter,field", [
    ("sglang", None, {"method": "ngram"} | {"method": "suffix"}, "drafter.method"),
    ("trtllm", None, dict(EAGLE3, tree=True, tree_nodes=15, tree_branches=4), "drafter.tree"),
    ("sglang", "v0.5-spec-v2", dict(EAGLE3, tree=True, tree_nodes=15, tree_branches=4), "drafter.tree"),
    ("vllm", "v0", EAGLE3, "drafter.method"),
    ("vllm", None, {"method": "medusa", "model": "medusa-vicuna-7b"}, "drafter.method"),
    ("vllm", None, {"method": "draft_model", "model": "llama-3.2-1b", "draft_tp": 2}, "drafter.draft_tp"),
    ("vllm", "v2", EAGLE3, "engine.version"),
])
def test_an_engine_refuses_what_it_does_not_run(kind, version, drafter, field):
    with pytest.raises(SpecsightInputError) as e:
        resolve_deployment(scenario(kind, version, drafter))
    assert e.value.field == field and (kind in e.value.allowed)


def test_fixed_hardware_has_no_engine():
    with pytest.raises(SpecsightInputError) as e:
        resolve_deployment(load_scenario({"hardware": {"kind": "fixed", "target_step_s": 0.01},
                                          "engine": {"kind": "vllm"},
                                          "workload": {"arrival": {"process": "constant", "qps": 1},
                                                       "num_requests": 2, "prompt_len": 4, "output_len": 4}}))
    assert e.value.field == "engine.kind"


def test_engine_defaults_unless_the_scenario_sets_them():
    assert with_engine_defaults(scenario("sglang")).engine.max_num_seqs == 48
    assert with_engine_defaults(scenario("sglang", drafter=None)).engine.max_num_seqs == 256     # no speculation
    assert with_engine_defaults(scenario("sglang", engine={"max_num_seqs": 100})).engine.max_num_seqs == 100
    assert with_engine_defaults(scenario("trtllm")).engine.max_num_seqs == 128
    assert with_engine_defaults(scenario("vllm")).engine.max_num_seqs == 256
    ideal = scenario()
    assert with_engine_defaults(ideal) is ideal


# ---- the step cost and the host model --------------------------------------------------------
def test_ideal_keeps_the_roofline_step_cost_and_real_engines_replace_host_terms():
    assert isinstance(resolve_deployment(scenario()).step_cost, RooflineStepCost)
    dep = resolve_deployment(scenario("vllm"))
    c = dep.step_cost
    assert isinstance(c, EngineStepCost) and c.overhead_s == c.spec_overhead_s == 0.0
    assert c.cm.launch_overhead_s == 0.0 and c.cm.iteration_overhead_s == 0.0
    assert "engine vllm v1" in dep.hardware_profile


def _cost(kind, version=None, drafter=EAGLE3) -> EngineStepCost:
    return resolve_deployment(with_engine_defaults(scenario(kind, version, drafter))).step_cost


def test_plain_decoding_and_speculation_pay_the_engines_host_model():
    gpu = 0.006
    B = 8
    sg = _cost("sglang")
    h = H.SGLANG_HOST.work_s(B, gpu)
    assert sg.host_s(B, 0, 0, gpu) == max(0.0, h - gpu) == 0.0                      # overlap hides it
    # overlap off, 2 syncs, and the draft and draft-extend graphs launched after them (their nodes)
    tails = sg.round_host_s(B, 3)
    nodes = sum(sg._kernels["draft"] * p.count for p in sg.round_passes(B, 3) if p.name in ("draft", "draft_extend"))
    assert tails == pytest.approx(H.GRAPH_NODE_HOST_S * nodes)
    assert sg.host_s(B, 3, 0, gpu) == pytest.approx(h + 2 * H.SYNC_S + tails)
    assert _cost("sglang", "v0.5-spec-v2").host_s(B, 3, 0, gpu) == pytest.approx(H.SYNC_S)
    v1 = _cost("vllm")
    assert v1.host_s(B, 0, 0, gpu) == 0.0 and v1.host_s(B, 3, 0, gpu) == pytest.approx(H.SYNC_S)
    assert v1.host_s(B, 3, 0, 1e-4) == pytest.approx(H.VLLM_V1_HOST.work_s(B, 0) - 1e-4 + H.SYNC_S)
    ng = _cost("vllm", drafter={"method": "ngram", "num_speculative_tokens": 3})      # CPU proposer: async off
    assert ng.host_s(B, 3, 0, gpu) == pytest.approx(H.VLLM_V1_HOST.work_s(B, 0) + H.SYNC_S)
    v0 = _cost("vllm", "v0", {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 3})
    assert v0.host_s(B, 3, 0, gpu) == pytest.approx(H.VLLM_V0_HOST.work_s(B, 0) + 2 * H.SYNC_S)
    tr = _cost("trtllm")
    assert tr.host_s(B, 3, 0, gpu) == 0.0


def test_a_simulated_run_charges_the_host_model_per_iteration():
    sc = with_engine_defaults(scenario("sglang"))
    r = simulate(sc)
    cost = resolve_deployment(sc).step_cost
    it = r.iterations
    spec = it[(it.k > 0) & (it.num_prefill_tokens == 0)]
    assert len(spec) > 0
    for row in spec.head(5).itertuples():
        gpu = row.draft_s + row.verify_s + row.prefill_s
        assert row.overhead_s == pytest.approx(cost.host_s(row.num_decode, row.k, 0, gpu))
    assert (spec.overhead_s > 0).all()


def test_engine_runs_use_the_engine_replica_and_price_a_round_above_its_gpu_passes():
    c = _cost("vllm")
    B, k = 4, 3
    gpu = c.target_s(B * 4, B * 500.0, B * (4 * 500 + 10), B * 4, B) + c.draft_s(B, k, B * 500.0)
    assert c.round_time_s(B, k, 500.0, 4) == pytest.approx(gpu + c.host_s(B, k, 0, gpu))
    assert issubclass(EngineReplica, object) and set(ENGINES) == {"vllm", "sglang", "trtllm"}


def test_speculation_pays_more_per_round_on_sglang_v1_than_with_spec_v2():
    a, b = _cost("sglang"), _cost("sglang", "v0.5-spec-v2")
    assert a.round_time_s(1, 3, 1000.0, 4) > b.round_time_s(1, 3, 1000.0, 4)
    assert math.isclose(a.round_time_s(1, 0, 1000.0, 1), b.round_time_s(1, 0, 1000.0, 1))


def test_the_catch_up_goes_to_the_pass_that_ingests_the_emitted_tokens():
    # a catch-up of 400 tokens (a prompt new to the drafter) exceeds every graph of B = 2 sequences:
    # vLLM prices draft 1 at 400 tokens, SGLang its draft extend; the one-token steps are unchanged
    for kind in ("vllm", "sglang"):
        c = _cost(kind)
        passes = [p for p in c.round_passes(2, 3) if p.model == "draft"]
        ingest = next(p for p in passes if p.name in ("draft_1", "draft_extend"))
        rest = sum(c.pass_s(p, 2000.0) for p in passes if p is not ingest)
        assert c.draft_s(2, 3, 2000.0, 400) == pytest.approx(rest + c.pass_s(ingest, 2000.0, 400))
        assert c.draft_s(2, 3, 2000.0, 400) > c.draft_s(2, 3, 2000.0, 2)


def test_a_pass_is_priced_at_its_padded_size_and_eagerly_beyond_the_graphs():
    c = _cost("vllm")
    cm = c.cm
    ctx = 5 * 800.0
    verify = next(p for p in c.round_passes(5, 3) if p.name == "verify")
    assert verify.padded_tokens == 24                                            # 20 tokens replay the 24 graph
    pairs = attention_pairs("prefill", 4, 5, ctx, cm.query_group)
    # + each captured kernel's least time on the GPU (host.GRAPH_NODE_GPU_S)
    assert c.pass_s(verify, ctx) == pytest.approx(cm.time_s(24, ctx, pairs, 20, 5) + (32 * 9 + 4) * H.GRAPH_NODE_GPU_S)
    # 200 sequences x 4 = 800 tokens: beyond vLLM's largest graph (512): eager, launches overlapped
    big = next(p for p in c.round_passes(200, 3) if p.name == "verify")
    assert big.graph == "eager" and big.padded_tokens is None
    gpu = cm.time_s(800, 200 * 800.0, attention_pairs("prefill", 4, 200, 200 * 800.0, cm.query_group), 800, 200)
    kernels = 32 * 9 + 4                                                          # 32 layers x 9 + 4 kernels
    assert c.pass_s(big, 200 * 800.0) == pytest.approx(max(gpu, kernels * H.EAGER_LAUNCH_S))
