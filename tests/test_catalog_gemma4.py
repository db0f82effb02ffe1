"""Gemma-4-31B and its assistant drafter in the catalog: the nested text_config read as the language
model, the assistant priced as the drafter holds it, the KV it does not keep, and the new presets."""
import json

import pytest

from simulator.common.paths import MODELS_DIR
from simulator.costs.cost_model import CostModel
from simulator.hardware.hardware import load_profile
from simulator.models.catalog import load_model
from simulator.speculation.acceptance_presets import PRESETS
from simulator.speculation.drafter_structure import assistant_spec, is_assistant, raw_config
from simulator.speculation.drafters import Drafter, DrafterSpec

D_T, D_A, V = 5376, 1024, 262144          # target hidden, assistant hidden, vocabulary (the configs' keys)


def _text(name: str) -> dict:
    return json.loads((MODELS_DIR / f"{name}.json").read_text())["text_config"]


def test_target_is_read_from_its_text_config():
    """60 layers, 5 sliding (window 1024) then 1 full, repeated; tied embeddings."""
    m = load_model("gemma-4-31b")
    t = _text("gemma-4-31b")
    assert (m.hidden_size, m.num_layers, m.intermediate_size, m.vocab_size) == (D_T, 60, 21504, V)
    assert (m.num_heads, m.num_kv_heads, m.head_dim) == (t["num_attention_heads"], t["num_key_value_heads"],
                                                         t["head_dim"])
    assert m.num_sliding_layers == 50 and m.num_full_layers == 10 and m.window == 1024
    assert m.layer_kinds[:6] == ("sliding",) * 5 + ("full",) and m.tie_word_embeddings


def test_target_count_with_the_full_layers_own_heads():
    """The card's 30.7B with each full layer's q and o 32 x 512 wide (global_head_dim), 4 K heads of
    512 and no V (attention_k_eq_v), beside the sliding layers' 32 x 256 q/o and 16 + 16 K/V heads
    of 256 (ModelSpec.full_attention; tests/test_full_attention_shape.py)."""
    m = load_model("gemma-4-31b")
    sliding = 2 * D_T * 32 * 256 + 2 * D_T * 16 * 256
    full = 2 * D_T * 32 * 512 + D_T * 4 * 512
    assert m.mixer_params_total == 50 * sliding + 10 * full
    assert m.params_total == pytest.approx(30.7e9, rel=0.002)


def test_nested_assistant_config_loads_its_text_config_and_is_an_assistant():
    cfg = raw_config("gemma-4-31b-assistant")
    assert "hidden_size" not in cfg and is_assistant(cfg)      # top level: the assistant's own keys
    dm = load_model("gemma-4-31b-assistant")
    assert (dm.hidden_size, dm.num_layers, dm.intermediate_size) == (D_A, 4, 8192)
    assert dm.layer_kinds == ("sliding",) * 3 + ("full",) and dm.window == 1024


def test_assistant_count_as_priced_and_as_published():
    """3 sliding layers with q and o of 32 x 256 and 1 full layer with q and o of 32 x 512
    (global_head_dim), none with k or v projections (num_kv_shared_layers 4: they read the target's
    KV), each with its MLP, its tied embedding (its own, d_A wide) and the fusion projections pre
    (2 D_T d_A) and post (d_A D_T): the checkpoint's 470M within 0.2 %."""
    dm = load_model("gemma-4-31b-assistant")
    assert dm.num_kv_shared_layers == 4
    assert dm.kv_shared_proj_params == 3 * 2 * D_A * 16 * 256 + D_A * 4 * 512     # K = V in the full layer
    a = assistant_spec(dm, raw_config("gemma-4-31b-assistant"))
    fusion = 2 * D_T * D_A + D_A * D_T
    assert a.fusion_params == fusion
    rest = 3 * D_A * 8192 + 2 * D_A
    sliding = 2 * D_A * 32 * 256 + rest
    full = 2 * D_A * 32 * 512 + rest
    assert a.params_total == 3 * sliding + full + V * D_A + D_A + fusion
    assert a.params_total == pytest.approx(470e6, rel=0.002)


def test_assistant_keeps_no_kv_and_saves_its_layers_worth():
    hw = load_profile("h200-sxm")
    target = load_model("gemma-4-31b")
    d = Drafter(DrafterSpec(method="mtp", model="gemma-4-31b-assistant", num_speculative_tokens=3), target,
                CostModel(target, hw, tp=1, dtype="bf16"))
    assert d.structure.kv_source == "target" and d.structure.physical_modules == 1
    assert d.kv_bytes_per_token_per_gpu() == 0.0
    # 3 sliding layers (K and V), 1 full (K = V), bf16
    assert d.kv_bytes_saved_per_token_per_gpu() == 3 * 2 * 16 * 256 * 2 + 4 * 512 * 2
    assert d.weight_bytes_per_gpu() == assistant_spec(load_model("gemma-4-31b-assistant"),
                                                      raw_config("gemma-4-31b-assistant")).params_total * 2


@pytest.mark.parametrize("name, tau, k", [("glm-5.2-mtp-coding-k7", 5.47, 7), ("gemma-4-assistant-gsm8k-k5", 5.0, 5)])
def test_new_presets_reproduce_their_accept_length(name, tau, k):
    p = PRESETS[name]
    a = float(p.alphas[0])
    assert sum(a ** i for i in range(k + 1)) == pytest.approx(tau, abs=1e-9)
    assert p.shape == "chain" and p.method == "mtp" and p.source
