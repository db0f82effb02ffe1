"""Attention by layer type (simulator/models/layer_types.py): the layer kinds read from configs as published,
and the bytes and FLOPs each kind reads in decode, verify and prefill against hand computation."""
import itertools
import json

import numpy as np
import pytest

from simulator.common.errors import SpecsightInputError
from simulator.costs.cost_model import CostModel
from simulator.costs.kv_cache import estimate_activation_reserve_bytes, linear_state_reserve_bytes
from simulator.costs.pass_shape import PassShape, causal_pairs
from simulator.hardware.hardware import load_profile
from simulator.models.catalog import load_model
from simulator.models.layer_types import window_keys_read, window_pairs
from simulator.models.model_config import spec_from_config

H100 = load_profile("h100-sxm")
MISTRAL = load_model("mistral-7b")                  # 32 layers, all sliding, W = 4096
QNEXT = load_model("tests/data/layer_types/qwen3-next-80b-a3b.json")
GPT_OSS = load_model("tests/data/layer_types/gpt-oss-120b.json")
W = 4096
# Mistral 7B per layer: KV 2 x 8 heads x 128 x 2 bytes per token, attention 4 x 32 heads x 128 FLOPs per pair
KV_TOKEN = 32 * 2 * 8 * 128 * 2
FLOPS_PAIR = 32 * 4 * 32 * 128


# ---- the closed forms of one sequence -----------------------------------------------------------
def _brute(n: int, c: int, w: int) -> tuple[int, int]:
    """(pairs, cached keys read) by enumerating the HF mask: query p sees keys p - w + 1 .. p."""
    pairs, cached = 0, set()
    for p in range(c, c + n):
        keys = range(max(0, p - w + 1), p + 1)
        pairs += len(keys)
        cached |= {k for k in keys if k < c}
    return pairs, len(cached)


@pytest.mark.parametrize("n, c, w", list(itertools.product((1, 2, 4, 7), (0, 1, 5, 9, 10, 30), (1, 3, 10, 16))))
def test_window_pairs_and_keys_are_the_masks_counts(n, c, w):
    assert (window_pairs(n, c, w), window_keys_read(c, w)) == _brute(n, c, w)


def test_a_window_wider_than_the_sequence_is_full_attention():
    for n, c in ((1, 0), (4, 100), (64, 1000)):
        assert window_pairs(n, c, 10 ** 6) == causal_pairs(n, c)


# ---- layer kinds from configs as published ------------------------------------------------------
def _cfg(**extra):
    cfg = {"hidden_size": 64, "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
           "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 8192}
    cfg.update(extra)
    return cfg


@pytest.mark.parametrize("extra, kinds", [
    ({}, "FFFFFF"),
    ({"sliding_window": 512}, "SSSSSS"),                                            # Mistral v0.1
    ({"sliding_window": None}, "FFFFFF"),                                           # Mistral v0.2
    ({"sliding_window": 512, "use_sliding_window": False}, "FFFFFF"),               # Qwen2.5 as shipped
    ({"sliding_window": 8192}, "FFFFFF"),                                           # as wide as the context
    ({"sliding_window": 512, "use_sliding_window": True, "max_window_layers": 4}, "FFFFSS"),   # Qwen2
    ({"sliding_window": 512, "sliding_window_pattern": 3}, "SSFSSF"),               # Gemma 3
    ({"sliding_window": 512, "model_type": "gemma2"}, "SFSFSF"),                    # Gemma 2
    ({"sliding_window": 512, "layer_types": ["sliding_attention", "full_attention"] * 3}, "SFSFSF"),
    ({"full_attention_interval": 3, "linear_num_value_heads": 2, "linear_num_key_heads": 1,
      "linear_key_head_dim": 8, "linear_value_head_dim": 8}, "LLFLLF"),             # Qwen3-Next
    ({"layer_types": ["chunked_attention", "full_attention"] * 3, "attention_chunk_size": 256}, "SFSFSF"),
])
def test_layer_kinds_from_config(extra, kinds):
    m = spec_from_config(_cfg(**extra), "m", "m.json")
    letter = {"full": "F", "sliding": "S", "linear": "L"}
    assert "".join(letter[k] for k in (m.layer_kinds or ("full",) * m.num_layers)) == kinds
    assert (m.num_full_layers, m.num_sliding_layers, m.num_linear_layers) == tuple(kinds.count(x) for x in "FSL")
    if "S" in kinds:
        assert m.window == extra.get("attention_chunk_size", 512)


@pytest.mark.parametrize("extra, field", [
    ({"layer_types": ["full_attention"] * 5}, "layer_types"),
    ({"layer_types": ["full_attention"] * 5 + ["mamba"]}, "layer_types"),
    ({"layer_types": ["sliding_attention"] * 6}, "sliding_window"),
    ({"layer_types": ["linear_attention"] * 6}, "linear_num_key_heads"),
    ({"sliding_window": 512, "sliding_window_pattern": 0}, "sliding_window_pattern"),
])
def test_bad_layer_types_are_refused_by_name(extra, field):
    with pytest.raises(SpecsightInputError, match=field):
        spec_from_config(_cfg(**extra), "m", "m.json")


def test_the_catalogs_full_attention_models_have_no_other_kind():
    for name in ("llama-3.1-8b", "qwen2.5-7b", "deepseek-v3", "mixtral-8x7b"):
        m = load_model(name)
        assert m.layer_kinds == () and m.num_full_layers == m.num_layers and m.window == 0


# ---- sliding layers: bytes and FLOPs by hand ------------------------------------------------------
def _attention(cm: CostModel, batch: int, n: int, c: int):
    return cm.breakdown(PassShape.uniform(batch, n, c)).ops["attention"]


@pytest.mark.parametrize("batch, n, c", [(1, 1, 100), (8, 1, 10_000), (4, 4, 100), (4, 4, 10_000), (16, 8, 50_000)])
def test_sliding_attention_bytes_and_flops_by_hand(batch, n, c):
    """Decode (n = 1) and verify (n = K + 1) of a uniform batch inside the window or past it: pairs
    sum_j min(c + j + 1, W), keys min(c, W - 1) + the n new tokens written and read."""
    op = _attention(CostModel(MISTRAL, H100), batch, n, c)
    pairs, cached = _brute(n, c, W) if c < 2 * W else (n * W, W - 1)
    assert op.flops == FLOPS_PAIR * batch * pairs
    assert op.bytes == KV_TOKEN * batch * (cached + 2 * n)


def test_verify_at_the_window_edge_is_an_upper_bound():
    """Queries straddling the edge (c + 1 < W < c + n): min(pairs, T W) over the exact count."""
    op = _attention(CostModel(MISTRAL, H100), 2, 8, W - 4)
    exact = 2 * window_pairs(8, W - 4, W)
    assert FLOPS_PAIR * exact < op.flops == FLOPS_PAIR * min(2 * causal_pairs(8, W - 4), 16 * W)


def test_sliding_layers_inside_the_window_price_as_full_attention():
    full = spec_from_config({**json.load(open(MISTRAL.path)), "sliding_window": None}, "m", "m.json")
    a, b = CostModel(MISTRAL, H100), CostModel(full, H100)
    for batch, n, c in ((1, 1, 10), (32, 4, 3000), (4, 1, W - 1)):
        s = PassShape.uniform(batch, n, c)
        assert a.shape_time_s(s) == b.shape_time_s(s)
    far = PassShape.uniform(32, 1, 30_000)
    assert a.shape_time_s(far) < b.shape_time_s(far)
    assert a.shape_time_s(far) == a.shape_time_s(PassShape.uniform(32, 1, 60_000))   # flat past the window


def test_prefill_chunk_pairs_capped_by_the_window():
    """A 16K-token prompt in one pass: each query sees min(p + 1, W) keys; the sums' cap T W over-counts
    the first W queries' triangle by W (W - 1) / 2 pairs."""
    T = 4 * W
    op = _attention(CostModel(MISTRAL, H100), 1, T, 0)
    assert op.flops == FLOPS_PAIR * T * W
    assert op.flops - FLOPS_PAIR * window_pairs(T, 0, W) == FLOPS_PAIR * W * (W - 1) / 2


def test_a_hybrid_of_full_and_sliding_layers_adds_the_groups():
    """gpt-oss's shape: 18 full and 18 sliding layers (W = 128): attention bytes and FLOPs are the
    full layers' over the whole cache plus the sliding layers' over the window."""
    cm = CostModel(GPT_OSS, H100)
    kv_layer, flops_layer = 2 * 8 * 64 * 2, 4 * 64 * 64
    batch, n, c = 8, 4, 5000
    op = _attention(cm, batch, n, c)
    assert op.flops == 18 * flops_layer * batch * (causal_pairs(n, c) + n * 128)
    assert op.bytes == 18 * kv_layer * batch * (c + 2 * n) + 18 * kv_layer * batch * (127 + 2 * n)


def test_num_seqs_is_needed_with_sliding_layers():
    with pytest.raises(ValueError, match="num_seqs is needed"):
        CostModel(MISTRAL, H100).time_s(1.0, 100.0, 101.0, 1.0)


def test_arrays_price_as_scalars():
    cm = CostModel(GPT_OSS, H100)
    shapes = [PassShape.uniform(b, n, c) for b, n, c in ((1, 1, 10), (8, 4, 5000), (64, 1, 200), (2, 300, 0))]
    arr = cm.time_s(*(np.array([getattr(s, f) for s in shapes], float)
                      for f in ("num_tokens", "sum_context", "sum_attn_pairs", "num_logits", "num_seqs")))
    assert np.allclose(arr, [cm.shape_time_s(s) for s in shapes], rtol=1e-12)
    for s in shapes:
        assert cm.breakdown(s).time_s == pytest.approx(cm.shape_time_s(s), rel=1e-12)


# ---- linear layers (Gated DeltaNet): a constant state ----------------------------------------------
# Qwen3-Next: 16 key heads and 32 value heads of 128, conv kernel 4, hidden 2048
LIN_PARAMS = 2048 * (2 * 2048 + 2 * 4096) + 2048 * 2 * 32 + 8192 * 4 + 2 * 32 + 128 + 4096 * 2048
STATE_BYTES = (32 * 128 * 128 + 8192 * 3) * 2                 # recurrent + conv state, bf16
LIN_FLOPS = 7 * 32 * 128 * 128 + 2 * 4 * 8192


def test_qwen3_next_layers_and_parameters_by_hand():
    assert QNEXT.layer_kinds == ("linear", "linear", "linear", "full") * 12
    assert QNEXT.linear_attn_params == LIN_PARAMS == 33_718_464
    gated_attn = 2048 * (2 * 16 + 2 * 2) * 256 + 16 * 256 * 2048          # q_proj doubled by the output gate
    assert QNEXT.attn_params == gated_attn
    assert QNEXT.mixer_params_total == 36 * LIN_PARAMS + 12 * gated_attn
    assert QNEXT.shared_expert_params == 3 * 2048 * 512                   # shared_expert_intermediate_size
    assert sum(QNEXT.params_by_part().values()) == QNEXT.params_total


@pytest.mark.parametrize("tp", [1, 4])
def test_linear_attention_decode_and_verify_by_hand(tp):
    """Decode: each sequence reads and writes its state (2 B states); verify of K + 1 positions: a
    state read and written per position (2 B (K + 1)); FLOPs: the recurrence per token."""
    cm = CostModel(QNEXT, H100, tp=tp)
    assert cm.linear_state_bytes == 36 * STATE_BYTES / tp
    for batch, n in ((1, 1), (32, 1), (32, 4)):
        op = cm.breakdown(PassShape.uniform(batch, n, 2000)).ops["linear_attention"]
        assert op.bytes == 2.0 * cm.linear_state_bytes * batch * n
        assert op.flops == 36 * LIN_FLOPS / tp * batch * n
    # the full layers' attention reads 12 layers' KV: 2 x 2 KV heads x 256 x 2 bytes per token each
    att = cm.breakdown(PassShape.uniform(8, 1, 2000)).ops["attention"]
    assert att.bytes == 12 * (2 * 2 * 256 * 2) / min(tp, 2) * 8 * (2000 + 2)


def test_linear_state_is_constant_in_context():
    cm = CostModel(QNEXT, H100, tp=4)
    la = [cm.breakdown(PassShape.uniform(16, 1, c)).ops["linear_attention"] for c in (10, 100_000)]
    assert la[0] == la[1]


def test_fp32_state_when_the_config_says_so():
    cfg = {**json.load(open(QNEXT.path)), "mamba_ssm_dtype": "float32"}
    cm = CostModel(spec_from_config(cfg, "q", "q.json"), H100)
    assert cm.linear_state_bytes == 36 * (32 * 128 * 128 * 4 + 8192 * 3 * 2)


# ---- KV memory per layer type ------------------------------------------------------------------
def test_kv_memory_per_layer_type():
    mis = CostModel(MISTRAL, H100)
    assert mis.kv_bytes_held(4, 1000) == 4 * KV_TOKEN * 1000
    assert mis.kv_bytes_held(4, 100_000) == 4 * KV_TOKEN * W                # a sliding layer holds the window
    q = CostModel(QNEXT, H100, tp=2)
    full_tok = 12 * 2 * 2 * 256 * 2 / 2
    state = 36 * STATE_BYTES / 2
    assert q.kv_bytes_held(3, 5000) == 3 * (full_tok * 5000 + state)
    assert q.kv_bytes_held(3, 5000, spec_tokens=3) == 3 * (full_tok * 5000 + 4 * state)   # 1 + K state slots
    assert q.kv_bytes_per_token == full_tok                                  # what the block pool holds per token
    llama = CostModel(load_model("llama-3.1-8b"), H100)
    assert llama.kv_bytes_held(3, 777) == 3 * 777 * llama.kv_bytes_per_token


def test_the_reserve_holds_the_linear_states():
    q = CostModel(QNEXT, H100, tp=4)
    assert linear_state_reserve_bytes(q, 256, 3) == 256 * 4 * q.linear_state_bytes
    flat = estimate_activation_reserve_bytes(q, 8192, 256, 0)
    assert estimate_activation_reserve_bytes(q, 8192, 256, 3) - flat == pytest.approx(
        256 * 3 * q.linear_state_bytes + 256 * 3 * QNEXT.vocab_size * 4 * 2 / 4, rel=1e-12)
    assert linear_state_reserve_bytes(CostModel(MISTRAL, H100), 256, 3) == 0.0


def test_a_multimodal_wrapper_is_read_as_its_language_model():
    """Gemma 3 and Qwen3.5 ship the language model's keys under text_config (their layer_types and
    windows too); the top level's quantization_config and tie_word_embeddings still apply."""
    gemma3 = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
              "text_config": _cfg(model_type="gemma3_text", sliding_window=512, sliding_window_pattern=3),
              "vision_config": {"hidden_size": 1152}}
    m = spec_from_config(gemma3, "g", "g.json")
    assert (m.num_full_layers, m.num_sliding_layers, m.window, m.hidden_size) == (2, 4, 512, 64)
    qwen35 = {"model_type": "qwen3_5", "tie_word_embeddings": True,
              "quantization_config": {"quant_method": "gptq", "bits": 4},
              "text_config": _cfg(layer_types=["linear_attention"] * 3 + ["full_attention"] * 3,
                                  linear_num_key_heads=1, linear_num_value_heads=2, linear_key_head_dim=8,
                                  linear_value_head_dim=8, attn_output_gate=True)}
    q = spec_from_config(qwen35, "q", "q.json")
    assert (q.num_linear_layers, q.num_full_layers, q.attn_output_gate, q.tie_word_embeddings) == (3, 3, True, True)
    assert dict(q.weight_formats)["attention"] == "int4"


def test_cost_command_holds_the_window(capsys):
    """`specsight cost` reports the KV a batch holds by layer type: 32 sequences x 4,096 tokens of
    Mistral's window, whatever the context past it."""
    from specsight.cli import main
    for ctx in (30_000, 60_000):
        assert main(["cost", "--model", "mistral-7b", "--hardware", "h100-sxm", "--batch", "32",
                     "--new-tokens", "1", "--context", str(ctx), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["kv_bytes_per_gpu"] == 32 * W * KV_TOKEN
        assert out["breakdown"]["attention"]["bytes"] == KV_TOKEN * 32 * (W - 1 + 2)
