"""GLM-5 with its MTP module (reused over K steps; GLM-5.2's index and KV reuse) and DeepSeek-V3.2
in the catalog: counts against the published figures by hand, and the drafter structure they imply."""
import pytest

from simulator.costs.cost_model import CostModel
from simulator.hardware.hardware import load_profile
from simulator.models.catalog import load_model
from simulator.speculation.drafter_structure import raw_config, round_shapes, structure_of
from simulator.speculation.drafters import Drafter, DrafterSpec


def _glm5_block_params(moe: bool) -> int:
    """One GLM-5 decoder block by hand (MLA, hidden 6144, 64 heads; SwiGLU MLP): attention
    q_a + q_a norm + q_b, kv_a (latent + rope) + kv_a norm, kv_b, o, and the DSA indexer (32 heads
    of 128: wq_b from the query rank, wk, its LayerNorm, weights_proj); two RMSNorms; dense MLP of
    12288, or 256 routed + 1 shared experts of 2048 and the router."""
    d, h, qr, kr, nope, rope, v = 6144, 64, 2048, 512, 192, 64, 256
    indexer = qr * 32 * 128 + d * 128 + 2 * 128 + d * 32
    attn = (d * qr + qr + qr * h * (nope + rope) + d * (kr + rope) + kr + kr * h * (nope + v) + h * v * d
            + indexer)
    mlp = 257 * 3 * d * 2048 + d * 256 if moe else 3 * d * 12288
    return attn + 2 * d + mlp


def test_glm5_total_by_hand_and_against_the_report():
    m = load_model("glm-5")
    d, vocab = 6144, 154880
    by_hand = 3 * _glm5_block_params(False) + 75 * _glm5_block_params(True) + 2 * vocab * d + d
    assert m.params_total == by_hand
    assert m.params_total == pytest.approx(744e9, rel=0.002)
    assert m.num_moe_layers == 75 and m.is_mla and m.kv_elems_per_token() == 512 + 64


def test_glm5_mtp_module_is_one_block_plus_its_fusion():
    """One MoE block, eh_proj (2d -> d) and the two input norms; the embedding and LM head are the
    target's. The report's about 9.953B within 0.2 %."""
    h = load_model("glm-5-mtp")
    d = 6144
    assert h.head_kind == "mtp" and h.target == "glm-5"
    assert h.params_total == _glm5_block_params(True) + 2 * d * d + 2 * d + d
    assert h.params_total == pytest.approx(9.953e9, rel=0.002)


def test_one_module_reused_and_glm52_reads_at_most_the_index_width_after_step_one():
    s5 = structure_of("mtp", False, raw_config("glm-5-mtp"))
    s52 = structure_of("mtp", False, raw_config("glm-5.2-mtp"))
    assert s5.physical_modules == s52.physical_modules == 1 and s5.module_of_step(3) == 0
    assert not s5.index_share and s52.index_share and s52.index_topk == 2048
    B, ctx = 4, 4 * 30_000.0          # four sequences of 30k cached tokens
    plain, shared = round_shapes(s5, B, 3, ctx), round_shapes(s52, B, 3, ctx)
    assert [p.sum_context for p in plain] == [ctx, ctx + B, ctx + 2 * B]
    assert [p.sum_context for p in shared] == [ctx, B * 2048, B * 2048]


def test_glm52_drafter_keeps_one_modules_kv_and_weights():
    hw, target = load_profile("h200-sxm"), load_model("glm-5")
    cm = CostModel(target, hw, tp=8, dtype="fp8")
    d = Drafter(DrafterSpec(method="mtp", model="glm-5.2-mtp", num_speculative_tokens=7), target, cm)
    assert d.structure.kv_source == "own" and d.structure.module_copies == 1
    assert d.kv_bytes_per_token_per_gpu() == pytest.approx(cm.kv_bytes_per_token / 78)   # one MLA layer of 78
    assert d.weight_bytes_per_gpu() == pytest.approx(load_model("glm-5.2-mtp").params_total * 1 / 8)


def test_deepseek_v32_is_deepseek_v3s_backbone_plus_the_indexer():
    """V3.2 keeps V3's shapes and adds a DSA indexer per layer (tests/test_sparse_attention.py
    counts it by hand): 671B within 2 % (the active count, 38.4B with the embedding, is not checked
    against the rounded '37B' V3 states, which predates the indexer)."""
    v32, v3 = load_model("deepseek-v3.2"), load_model("deepseek-v3")
    assert v32.params_total - v3.params_total == v32.params_active - v3.params_active == 61 * v32.indexer_params
    assert v32.params_total == pytest.approx(671e9, rel=0.02)
    assert v32.model_type == "deepseek_v32" and v32.sparse.index_topk == 2048
