"""Drafters by structure (simulator/speculation/drafter_structure.py): the bytes and FLOPs of one round against
hand computation from the configs' numbers, per structure; physical modules apart from runtime steps;
index sharing; the KV an assistant saves; verify shapes; engines that run or refuse each."""
from __future__ import annotations

import json

import pytest

from simulator.common.errors import SpecsightInputError
from simulator.costs.cost_model import CostModel
from simulator.engines import ENGINES, EngineLimits
from simulator.engines.host import eager_pass_s
from simulator.engines.step_cost import EngineStepCost, engine_profile
from simulator.hardware.hardware import load_profile
from simulator.models.catalog import load_model
from simulator.speculation.drafter_structure import (
    MLP_KERNELS_PER_STAGE,
    MLPSpeculator,
    round_costs,
    round_shapes,
    round_work,
)
from simulator.speculation.drafters import METHODS, Drafter, DrafterSpec

BF16 = 2
# llama-3.2-1b (models/llama-3.2-1b.json): the dimensions every synthetic head below shares
D, H, KVH, HD, INTER, V = 2048, 32, 8, 64, 8192, 128256
ATTN = D * (H + 2 * KVH) * HD + H * HD * D          # q, k, v, o projections
MLP = 3 * D * INTER                                   # gate, up, down
NORMS = 2 * D
LAYER = ATTN + MLP + NORMS
EH_PROJ = 2 * D * D + 2 * D                           # MTP: eh_proj 2d -> d, enorm + hnorm
KV_PER_LAYER = 2 * KVH * HD * BF16                     # bytes per cached token per layer
B, K, CTX = 4, 3, 1000


def head(tmp_path, name: str, **keys) -> str:
    cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": D, "num_attention_heads": H,
           "num_key_value_heads": KVH, "head_dim": HD, "intermediate_size": INTER, "vocab_size": V,
           "num_hidden_layers": 1, "specsight": {"kind": "mtp", "target": "llama-3.2-1b"}}
    cfg.update(keys)
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(cfg))
    return str(p)


@pytest.fixture(scope="module")
def h200():
    return load_profile("h200-sxm")


def drafter(h200, target: str = "llama-3.2-1b", **spec) -> Drafter:
    t = load_model(target)
    return Drafter(DrafterSpec(**spec), t, CostModel(t, h200))


def ops(costs, name: str, what: str) -> float:
    return sum(getattr(c.ops[name], what) for c in costs)


def test_mtp_k_steps_of_one_module_are_k_modules_and_k_lm_heads(tmp_path, h200):
    """K steps of one MTP module read the module and the shared LM head (over the full vocabulary)
    K times; FLOPs 2 x weights per token and per logit."""
    d = drafter(h200, method="mtp", model=head(tmp_path, "mtp1"), num_speculative_tokens=K)
    s = d.structure
    assert (s.physical_modules, s.forwards(K), s.verify_shape, s.kv_source) == (1, K, "chain", "own")
    costs = round_costs(s, d.draft_cost, B, K, B * CTX)
    assert len(costs) == K
    assert ops(costs, "linear", "bytes") == K * (LAYER + EH_PROJ) * BF16
    assert ops(costs, "lm_head", "bytes") == K * V * D * BF16
    assert ops(costs, "linear", "flops") == 2.0 * (LAYER + EH_PROJ) * B * K
    assert ops(costs, "lm_head", "flops") == 2.0 * V * D * B * K
    # attention: step j reads B (CTX + j) cached tokens and writes and reads its B new ones
    assert ops(costs, "attention", "bytes") == sum(KV_PER_LAYER * (B * (CTX + j) + 2 * B) for j in range(K))
    w = round_work(s, d.draft_cost, B, K, B * CTX)
    assert (w.flops, w.bytes, w.forwards) == (sum(c.flops for c in costs), sum(c.bytes for c in costs), K)
    # the price the simulator charges is these passes' time
    assert d.propose_time_s(B, K, B * CTX) == pytest.approx(sum(d.draft_cost.breakdown(p).time_s
                                                                for p in round_shapes(s, B, K, B * CTX)), rel=1e-12)


def test_m_physical_modules_cost_as_many_weights_and_kv_layers_and_the_same_steps(tmp_path, h200):
    """MiniMax-M3-style num_mtp_modules=7 beside num_nextn_predict_layers=1: seven modules held
    (weights and a KV layer each), K steps run modules 0..K-1 of one shape: the same time as one
    module reused."""
    one = drafter(h200, method="mtp", model=head(tmp_path, "one"), num_speculative_tokens=K)
    seven = drafter(h200, method="mtp", model=head(tmp_path, "seven", num_mtp_modules=7, num_nextn_predict_layers=1),
                    num_speculative_tokens=K)
    assert seven.structure.physical_modules == 7
    assert [seven.structure.module_of_step(j) for j in range(9)] == [0, 1, 2, 3, 4, 5, 6, 0, 1]
    own = LAYER + EH_PROJ + D                   # + the module's final norm
    assert one.weight_bytes_per_gpu() == own * BF16
    assert seven.weight_bytes_per_gpu() == 7 * own * BF16
    assert seven.kv_bytes_per_token_per_gpu() == 7 * KV_PER_LAYER == 7 * one.kv_bytes_per_token_per_gpu()
    assert seven.propose_time_s(B, K, B * CTX) == one.propose_time_s(B, K, B * CTX)
    # num_nextn_predict_layers alone (DeepSeek-V3, GLM-5: 1) or 0 (a file that is the module) is one module
    assert drafter(h200, method="mtp", model=head(tmp_path, "zero", num_nextn_predict_layers=0)
                   ).structure.physical_modules == 1


def test_reduced_draft_vocabulary_scores_only_its_rows(h200):
    """EAGLE-3's LM head covers its 32,000-token draft vocabulary (models/eagle3-llama-3.1-8b.json)."""
    d = drafter(h200, "llama-3.1-8b", method="eagle3", model="eagle3-llama-3.1-8b", num_speculative_tokens=K)
    costs = round_costs(d.structure, d.draft_cost, B, K, B * CTX)
    assert d.structure.draft_vocab == 32000
    assert ops(costs, "lm_head", "bytes") == K * 32000 * 4096 * BF16
    assert ops(costs, "lm_head", "flops") == 2.0 * 32000 * 4096 * B * K


def test_index_share_caps_later_steps_at_the_first_steps_index(tmp_path, h200):
    """GLM-5.2's index_share_for_mtp_iteration: step 0 reads the whole context, steps 1.. at most
    index_topk cached tokens per sequence; weights unchanged."""
    ctx = 5000
    plain = drafter(h200, method="mtp", model=head(tmp_path, "plain"), num_speculative_tokens=K)
    shared = drafter(h200, method="mtp", model=head(tmp_path, "shared", index_share_for_mtp_iteration=True,
                                                   index_topk=2048), num_speculative_tokens=K)
    s = shared.structure
    assert (s.index_share, s.index_topk) == (True, 2048)
    assert not shared.chained_steps and plain.chained_steps
    costs = round_costs(s, shared.draft_cost, B, K, B * ctx)
    reads = [B * ctx] + [B * 2048] * (K - 1)
    assert ops(costs, "attention", "bytes") == sum(KV_PER_LAYER * (r + 2 * B) for r in reads)
    assert ops(costs, "linear", "bytes") == ops(round_costs(plain.structure, plain.draft_cost, B, K, B * ctx),
                                                "linear", "bytes")
    assert shared.propose_time_s(B, K, B * ctx) < plain.propose_time_s(B, K, B * ctx)
    # below the index's width nothing changes
    assert shared.propose_time_s(B, K, B * 1000) == pytest.approx(plain.propose_time_s(B, K, B * 1000), rel=1e-12)


def assistant_config(tmp_path, name: str, **keys) -> str:
    """A Gemma-4-style assistant for llama-3.2-1b, flattened: 4 layers of width 512 over the
    target's 2048-wide states (transformers' Gemma4AssistantForCausalLM structure)."""
    cfg = {"model_type": "gemma4_assistant", "backbone_hidden_size": D, "hidden_size": A_D,
           "num_attention_heads": A_H, "num_key_value_heads": A_KVH, "head_dim": HD, "intermediate_size": A_INTER,
           "num_hidden_layers": 4, "vocab_size": V, "tie_word_embeddings": True,
           "architectures": ["Gemma4AssistantForCausalLM"], "specsight": {"target": "llama-3.2-1b"}}
    cfg.update(keys)
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(cfg))
    return str(p)


A_D, A_H, A_KVH, A_INTER = 512, 8, 2, 2048
A_LAYER = A_D * (A_H + 2 * A_KVH) * HD + A_H * HD * A_D + 3 * A_D * A_INTER + 2 * A_D
A_FUSION = 2 * D * A_D + A_D * D                      # pre_projection [embedding; hidden] -> d, post_projection


def test_assistant_steps_and_the_kv_it_saves_by_reading_the_targets(tmp_path, h200):
    """Each of K steps runs the 4 layers, the fusion projections and the assistant's own LM head
    (d wide, full vocabulary); no KV of its own: it saves its 4 layers' K and V per cached token."""
    d = drafter(h200, method="mtp", model=assistant_config(tmp_path, "asst"), num_speculative_tokens=K)
    s = d.structure
    assert (s.kv_source, s.forwards(K), s.verify_shape) == ("target", K, "chain")
    costs = round_costs(s, d.draft_cost, B, K, B * CTX)
    assert ops(costs, "linear", "bytes") == K * (4 * A_LAYER + A_FUSION) * BF16
    assert ops(costs, "lm_head", "bytes") == K * V * A_D * BF16
    assert ops(costs, "lm_head", "flops") == 2.0 * V * A_D * B * K
    assert d.kv_bytes_per_token_per_gpu() == 0.0
    assert d.kv_bytes_saved_per_token_per_gpu() == 4 * 2 * A_KVH * HD * BF16
    # its weights: layers, fusion projections, its own tied embedding / LM head, final norm
    assert d.weight_bytes_per_gpu() == (4 * A_LAYER + A_FUSION + V * A_D + A_D) * BF16
    # a drafter with its own cache saves nothing
    assert drafter(h200, method="mtp", model=head(tmp_path, "own")).kv_bytes_saved_per_token_per_gpu() == 0.0


def test_edge_assistant_scores_only_the_likely_clusters(tmp_path, h200):
    """use_ordered_embeddings: 2048 centroids scored (a d x C matrix), then the 32 best clusters'
    V // C tokens: the LM head reads 32 (V // 2048) rows instead of V."""
    d = drafter(h200, method="mtp", model=assistant_config(tmp_path, "edge", use_ordered_embeddings=True,
                                                           num_centroids=2048, centroid_intermediate_top_k=32))
    rows = 32 * (V // 2048)
    assert d.structure.draft_vocab == rows
    costs = round_costs(d.structure, d.draft_cost, B, K, B * CTX)
    assert ops(costs, "lm_head", "bytes") == K * rows * A_D * BF16
    assert ops(costs, "linear", "bytes") == K * (4 * A_LAYER + A_FUSION + A_D * 2048) * BF16


def test_parallel_block_is_one_forward_of_catchup_and_k_masks(tmp_path, h200):
    """PARD (`parallel`): one forward over the catch-up tokens and K masks; DFlash: one bonus query
    and K masks a sequence (the accepted tokens' target features enter its cache). K logits a
    sequence; the LM head's weights read once; verify K + 1 positions (a block)."""
    cfg = {"architectures": ["Qwen3ForCausalLM"], "hidden_size": D, "num_attention_heads": H,
           "num_key_value_heads": KVH, "head_dim": HD, "intermediate_size": INTER, "vocab_size": V,
           "num_hidden_layers": 2, "tie_word_embeddings": False, "block_size": K + 1,
           "dflash_config": {"target_layer_ids": [1, 8, 14], "mask_token_id": 128002}}
    p = tmp_path / "dflash.json"
    p.write_text(json.dumps(cfg))
    catchup = 2 * B
    for method, model, layers, tokens in (("parallel", "llama-3.2-1b", 16, catchup + B * K),
                                          ("dflash", str(p), 2, B + B * K)):
        d = drafter(h200, "llama-3.1-8b", method=method, model=model, num_speculative_tokens=K)
        s = d.structure
        assert (s.forwards(K), s.verify_shape) == (1, "block")
        (shape,) = round_shapes(s, B, K, B * CTX, first_tokens=catchup)
        assert (shape.num_tokens, shape.num_logits) == (tokens, B * K)
        (cost,) = round_costs(s, d.draft_cost, B, K, B * CTX)
        assert cost.ops["lm_head"].bytes == V * D * BF16
        assert cost.ops["lm_head"].flops == 2.0 * V * D * B * K
        assert cost.ops["linear"].bytes == layers * LAYER * BF16
        assert d.verify_tokens_per_seq(K) == K + 1
    # DFlash borrows the target's embedding and LM head; it holds its layers, final norm and the
    # fusion of its 3 target layers' hidden states (3 d -> d)
    assert d.weight_bytes_per_gpu() == (2 * LAYER + D + 3 * D * D) * BF16


def test_parallel_heads_run_once_and_share_the_unembedding(tmp_path, h200):
    """Meta's multi-token heads (Gloeckle et al. 2024): n transformer-layer heads on one hidden
    state, one forward; the shared unembedding is read once for the K B logits and is not the
    drafter's memory."""
    p = head(tmp_path, "heads", num_hidden_layers=4, specsight={"target": "llama-3.2-1b", "heads": 4})
    d = drafter(h200, method="parallel_heads", model=p, num_speculative_tokens=K)
    s = d.structure
    assert (s.physical_modules, s.forwards(K), s.verify_shape) == (4, 1, "block")
    (cost,) = round_costs(s, d.draft_cost, B, K, B * CTX)
    assert cost.ops["linear"].bytes == 4 * LAYER * BF16
    assert cost.ops["linear"].flops == 2.0 * 4 * LAYER * B
    assert cost.ops["lm_head"].bytes == V * D * BF16
    assert cost.ops["lm_head"].flops == 2.0 * V * D * B * K
    assert d.weight_bytes_per_gpu() == (4 * LAYER + D) * BF16
    assert d.verify_tokens_per_seq(K) == K + 1
    bad = head(tmp_path, "bad", num_hidden_layers=5, specsight={"target": "llama-3.2-1b", "heads": 4})
    with pytest.raises(SpecsightInputError, match="multiple of specsight.heads"):
        drafter(h200, method="parallel_heads", model=bad)


def test_mlp_speculator_stages_in_closed_form(tmp_path, h200):
    """IBM's MLP speculator: stage j multiplies a projection (emb_dim or inner_dim wide) and an
    inner_dim x vocab head per sequence; no attention, no KV; K at most n_predict."""
    inner, n = 1024, 3
    p = tmp_path / "mlp.json"
    p.write_text(json.dumps({"model_type": "mlp_speculator", "emb_dim": D, "inner_dim": inner, "n_predict": n,
                             "vocab_size": V, "tie_weights": False}))
    d = drafter(h200, method="mlp_speculator", model=str(p), num_speculative_tokens=n)
    s = d.structure
    assert (s.physical_modules, s.forwards(n), s.kv_source, s.verify_shape) == (n, n, "none", "chain")
    proj = [D * inner, inner * inner, inner * inner]
    w = round_work(s, d.target_cost, B, n, B * CTX, mlp=d.mlp)
    assert w.flops == sum(2.0 * B * (proj[j] + inner * V) for j in range(n))
    assert w.bytes == sum((proj[j] + 2 * inner + inner * V + B * inner) * BF16 for j in range(n))
    assert d.kv_bytes_per_token_per_gpu() == 0.0
    held = sum(V * inner + proj[j] + 2 * inner + inner * V for j in range(n))
    assert d.weight_bytes_per_gpu() == held * BF16
    tied = MLPSpeculator(D, inner, n, V, tie_weights=True)
    assert tied.params_total == D * inner + inner * inner + V * inner + 2 * inner + inner * V
    assert d.propose_time_s(B, 2, B * CTX) < d.propose_time_s(B, 3, B * CTX)
    with pytest.raises(SpecsightInputError, match="n_predict"):
        drafter(h200, method="mlp_speculator", model=str(p), num_speculative_tokens=n + 1)


def test_lookahead_widens_the_verify_pass_and_drafts_nothing(h200):
    """Lookahead decoding: no draft pass; the target pass carries the W x K lookahead branch and G
    candidate n-grams of K tokens (a tree of G branches for acceptance)."""
    d = drafter(h200, method="lookahead", lookahead_window=5, tree_branches=3, num_speculative_tokens=4)
    assert d.verify_tokens_per_seq(4) == 1 + (5 + 3) * 4
    assert d.propose_time_s(B, 4, B * CTX) == 0.0
    assert (d.structure.verify_shape, d.structure.forwards(4), d.branches) == ("tree", 0, 3)
    assert d.weight_bytes_per_gpu() == d.kv_bytes_per_token_per_gpu() == 0.0
    with pytest.raises(SpecsightInputError, match="lookahead_window"):
        DrafterSpec(method="lookahead")


NEW_METHODS = ("dflash", "parallel_heads", "mlp_speculator", "lookahead")


@pytest.mark.parametrize("kind", sorted(ENGINES))
def test_engines_refuse_what_they_do_not_run_by_name(kind):
    for version in ENGINES[kind].versions:
        eng = ENGINES[kind](version)
        for method in NEW_METHODS:
            spec = DrafterSpec(method=method, model=None if method == "lookahead" else "x", lookahead_window=1)
            if method in eng.supported_methods():
                continue
            with pytest.raises(SpecsightInputError, match=f"{kind} {version}"):
                eng.check(spec, 1)
    assert set(METHODS) >= set(NEW_METHODS)


def test_vllm_v0_runs_the_mlp_speculator_stages(tmp_path, h200):
    p = tmp_path / "mlp.json"
    p.write_text(json.dumps({"emb_dim": D, "inner_dim": 1024, "n_predict": 3, "vocab_size": V}))
    eng = ENGINES["vllm"]("v0")
    spec = DrafterSpec(method="mlp_speculator", model=str(p), num_speculative_tokens=3)
    eng.check(spec, 1)
    t = load_model("llama-3.2-1b")
    cm = CostModel(t, engine_profile(h200))
    d = Drafter(spec, t, cm)
    sc = EngineStepCost(eng, EngineLimits(256, 8192, 1), cm, d, 3)
    stages = [eager_pass_s(d.mlp.step_time_s(cm, j, B), MLP_KERNELS_PER_STAGE) for j in range(3)]
    assert sc.draft_s(B, 3, B * CTX) == pytest.approx(sum(stages), rel=1e-12)
    with pytest.raises(SpecsightInputError, match="vllm v1"):
        ENGINES["vllm"]("v1").check(spec, 1)


def test_engines_refuse_assistants_and_index_sharing_but_run_m_modules(tmp_path, h200):
    t = load_model("llama-3.2-1b")
    cm = CostModel(t, engine_profile(h200))
    lim = EngineLimits(256, 8192, 1)
    asst = Drafter(DrafterSpec(method="mtp", model=assistant_config(tmp_path, "a")), t, cm)
    share = Drafter(DrafterSpec(method="mtp", model=head(tmp_path, "s", index_share_for_mtp_iteration=True)), t, cm)
    seven = Drafter(DrafterSpec(method="mtp", model=head(tmp_path, "m", num_mtp_modules=7)), t, cm)
    one = Drafter(DrafterSpec(method="mtp", model=head(tmp_path, "o")), t, cm)
    for cls in ENGINES.values():
        eng = cls(None)
        with pytest.raises(SpecsightInputError, match=f"{eng.label} predates assistant"):
            EngineStepCost(eng, lim, cm, asst, 3)
        with pytest.raises(SpecsightInputError, match=f"{eng.label} predates MTP index sharing"):
            EngineStepCost(eng, lim, cm, share, 3)
        # M modules: the round of one module reused, pass for pass
        assert (EngineStepCost(eng, lim, cm, seven, 3).draft_s(B, 3, B * CTX)
                == EngineStepCost(eng, lim, cm, one, 3).draft_s(B, 3, B * CTX) > 0.0)


def test_borrowed_matrices_never_make_weights_negative(h200):
    """A DFlash draft or parallel heads given any catalog config (a head that already shares the
    target's embedding, a model with tied embeddings) hold weights >= their layers'."""
    from simulator.models.catalog import available_models
    t = load_model("llama-3.1-8b")
    for name in available_models():
        dm = load_model(name)
        if dm.vocab_size != t.vocab_size:
            continue
        d = Drafter(DrafterSpec(method="dflash", model=name), t, CostModel(t, h200))
        assert d.weight_bytes_per_gpu() >= dm.layer_params_dense_part * BF16, name


def test_a_missing_mlp_speculator_is_named():
    t = load_model("llama-3.2-1b")
    with pytest.raises(SpecsightInputError, match="drafter.model"):
        Drafter(DrafterSpec(method="mlp_speculator", model="no-such-speculator"), t,
                CostModel(t, load_profile("h200-sxm")))


@pytest.mark.parametrize("spec, forwards, shape, kv", [
    (dict(method="draft_model", model="llama-3.2-1b"), K, "chain", "own"),
    (dict(method="eagle", model="eagle-llama-3.1-8b"), K, "chain", "own"),
    (dict(method="eagle", model="eagle-llama-3.1-8b", tree=True, tree_branches=2), K, "tree", "own"),
    (dict(method="eagle3", model="eagle3-llama-3.1-8b"), K, "chain", "own"),
    (dict(method="medusa", model="medusa-llama-3.1-8b"), 1, "tree", "none"),
    (dict(method="parallel", model="llama-3.2-1b"), 1, "block", "own"),
    (dict(method="ngram"), 0, "chain", "none"),
    (dict(method="suffix"), 0, "chain", "none"),
    (dict(method="self_spec", layer_fraction=0.5), K, "chain", "target"),
])
def test_the_shipped_drafters_structures(h200, spec, forwards, shape, kv):
    """Every drafter the catalog ships for llama-3.1-8b: its forwards for K drafts, the verify shape
    its proposals imply, and whose KV it reads; the forwards are the passes round_shapes lists."""
    d = drafter(h200, "llama-3.1-8b", num_speculative_tokens=K, **spec)
    s = d.structure
    assert (s.forwards(K), s.verify_shape, s.kv_source) == (forwards, shape, kv)
    if d.draft_cost is not None:
        assert len(round_shapes(s, B, K, B * CTX, branches=d.branches)) == forwards
