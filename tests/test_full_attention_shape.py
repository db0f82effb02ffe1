"""The full-attention layers' own head shape (ModelSpec.full_attention, simulator/models/layer_types.py):
Gemma 4's num_global_key_value_heads, global_head_dim and attention_k_eq_v, priced by hand in
weights, KV bytes, FLOPs and memory."""
import pytest

from simulator.costs.cost_model import CostModel
from simulator.hardware.hardware import load_profile
from simulator.models.catalog import load_model
from simulator.models.layer_types import FullAttentionShape
from simulator.models.model_config import spec_from_config

D, H = 5376, 32                       # Gemma-4-31B hidden size and query heads (models/gemma-4-31b.json)


def test_gemma4_full_layers_read_their_own_shape():
    m = load_model("gemma-4-31b")
    assert m.full_attention == FullAttentionShape(num_kv_heads=4, head_dim=512, k_eq_v=True)
    assert (m.num_kv_heads, m.head_dim) == (16, 256)          # the sliding layers keep the model's


def test_full_layer_weights_by_hand_and_the_published_count():
    """A full layer: q and o of 32 x 512, k of 4 x 512, no v (V = K); a sliding layer: q, o of
    32 x 256 and k, v of 16 x 256. The count is then within 0.5 % of the card's 30.7B."""
    m = load_model("gemma-4-31b")
    full = D * (H + 4) * 512 + H * 512 * D
    sliding = D * (H + 2 * 16) * 256 + H * 256 * D
    assert (m.full_attn_params, m.attn_params) == (full, sliding)
    assert m.mixer_params_total == 10 * full + 50 * sliding
    assert m.params_total == pytest.approx(30.7e9, rel=0.005)


def test_full_layer_kv_bytes_flops_and_memory_by_hand():
    """bf16, TP 1: full layers 10 x 4 heads x 512 x 1 tensor x 2 bytes = 40,960 B a token; sliding
    50 x 16 x 256 x 2 x 2 = 819,200; FLOPs per pair 4 h d per layer; at TP 2 the 4 full KV heads
    split two ways as the 16 sliding ones do."""
    m = load_model("gemma-4-31b")
    hw = load_profile("h200-sxm")
    cm = CostModel(m, hw, tp=1, dtype="bf16")
    full, win = 10 * 4 * 512 * 2, 50 * 16 * 256 * 2 * 2
    assert (cm.full_kv_bytes_per_token, cm.win_kv_bytes_per_token, cm.kv_bytes_per_token) == (full, win, full + win)
    assert cm.attn_flops_per_pair == 10 * 4 * H * 512
    assert cm.win_flops_per_pair == 50 * 4 * H * 256
    assert cm.kv_bytes_held(8, 3000) == 8 * (full * 3000 + win * 1024)
    cm2 = CostModel(m, hw, tp=2, dtype="bf16")
    assert (cm2.full_kv_bytes_per_token, cm2.win_kv_bytes_per_token) == (full / 2, win / 2)


def test_no_own_shape_without_the_keys_or_without_other_kinds():
    """Without the Gemma 4 keys, or when every layer is full, the full layers have the model's shape."""
    base = {"hidden_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4,
            "head_dim": 128, "vocab_size": 1000, "intermediate_size": 4096,
            "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 64,
            "max_position_embeddings": 4096}
    m = spec_from_config(base, "t", "t")
    assert m.full_attention is None and m.full_attn_params == m.attn_params
    assert m.full_kv_elems_per_token() == m.kv_elems_per_token() == 2 * 4 * 128
    g = spec_from_config({**base, "global_head_dim": 256}, "t", "t")
    assert g.full_attention == FullAttentionShape(4, 256, False)
    assert g.full_kv_elems_per_token() == 2 * 4 * 256 and g.full_attn_flops_per_pair() == 4 * 8 * 256
    allfull = spec_from_config({**base, "layer_types": ["full_attention"] * 2, "global_head_dim": 256}, "t", "t")
    assert allfull.full_attention is None
