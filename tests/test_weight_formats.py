"""Weight formats (simulator/models/weight_formats.py): bytes per weight with their block scales, per-part
formats read from configs, a model's weight bytes by hand, and the rate each format computes at."""
import json

import pytest

from simulator.common.errors import SpecsightInputError
from simulator.costs.cost_model import CostModel
from simulator.costs.pass_shape import PassShape
from simulator.hardware.hardware import load_profile, profile_from_dict
from simulator.models.catalog import available_models, load_model
from simulator.models.model_config import spec_from_config
from simulator.models.weight_formats import WEIGHT_BITS, bytes_per_weight, compute_dtype, formats_from_config

H100, H200, B200 = load_profile("h100-sxm"), load_profile("h200-sxm"), load_profile("b200")
GPT_OSS = load_model("tests/data/layer_types/gpt-oss-120b.json")
Q7B = load_model("qwen2.5-7b")


def test_bits_per_weight_with_block_scales():
    assert WEIGHT_BITS["mxfp4"] == 4 + 8 / 32 == 4.25        # E2M1 + one E8M0 scale per 32 (OCP MX v1.0)
    assert WEIGHT_BITS["nvfp4"] == 4 + 8 / 16 == 4.5         # E2M1 + one E4M3 scale per 16 (NVFP4)
    assert WEIGHT_BITS["int4"] == 4 + 20 / 128 == 4.15625     # fp16 scale + 4-bit zero per group of 128
    assert [bytes_per_weight(f) for f in ("bf16", "fp8", "mxfp4", "nvfp4")] == [2, 1, 0.53125, 0.5625]
    with pytest.raises(SpecsightInputError, match="weight format"):
        bytes_per_weight("fp3")


def test_parts_add_up_to_the_parameter_count_for_every_catalog_model():
    for name in available_models():
        m = load_model(name)
        assert sum(m.params_by_part().values()) == m.params_total, name


def test_gpt_oss_experts_mxfp4_the_rest_bf16_by_hand():
    """gpt-oss-120b's shape: 36 layers x 128 experts x 3 x 2880 x 2880 expert weights at 4.25 bits,
    attention (q 64 x 64, k and v 8 x 64 each, with biases, o), router, embedding and LM head at 16."""
    assert GPT_OSS.weight_formats == (("experts", "mxfp4"),)
    experts = 36 * 128 * 3 * 2880 * 2880
    attention = 36 * (2880 * (4096 + 2 * 512) + (4096 + 2 * 512) + 4096 * 2880)
    router = 36 * 2880 * 128
    embedding = lm_head = 201088 * 2880
    norms = 36 * 2 * 2880 + 2880
    assert GPT_OSS.params_by_part() == {"attention": attention, "mlp": router, "experts": experts,
                                        "embedding": embedding, "lm_head": lm_head, "norm": norms}
    for tp in (1, 2, 8):
        cm = CostModel(GPT_OSS, H100, tp=tp)
        want = (experts * 4.25 / 8 + (attention + router + embedding + lm_head + norms) * 2) / tp
        assert cm.weight_bytes_per_gpu == pytest.approx(want, rel=1e-12)
        assert cm.expert_bytes == pytest.approx(3 * 2880 * 2880 * 4.25 / 8 / tp, rel=1e-12)
        layer_norms = norms - 2880                                           # (the final norm is not a linear layer)
        assert cm.linear_bytes == pytest.approx((attention + router + layer_norms) * 2 / tp, rel=1e-12)
        assert cm.lm_head_bytes == pytest.approx(lm_head * 2 / tp, rel=1e-12)
    assert 65.0e9 < CostModel(GPT_OSS, H100).weight_bytes_per_gpu < 65.5e9      # fits one 80 GB GPU


def test_mxfp4_runs_w4a16_at_the_bf16_rate_everywhere():
    """gpt-oss's experts compute in bf16 on H100 and on B200 (no FP4 activations): the same FLOPs
    time as the bf16 model, fewer bytes."""
    bf16 = spec_from_config({**json.load(open(GPT_OSS.path)), "quantization_config": None}, "b", "b.json")
    for hw in (H100, B200):
        a, b = CostModel(GPT_OSS, hw), CostModel(bf16, hw)
        assert (a.moe_flops_per_token, a.linear_flops_per_token) == (b.moe_flops_per_token, b.linear_flops_per_token)
        assert a.expert_bytes == b.expert_bytes * 4.25 / 16
    assert compute_dtype("mxfp4", "bf16", tuple(B200.peak_tflops)) == "bf16"
    assert compute_dtype("int4", "bf16", tuple(B200.peak_tflops)) == "bf16"


def _nvfp4(cfg_path, exclude=()):
    cfg = {**json.load(open(cfg_path)), "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                                                                "exclude_modules": list(exclude)}}
    return spec_from_config(cfg, "nvfp4", "nvfp4.json")


def test_nvfp4_runs_at_the_fp4_rate_where_the_profile_has_one():
    """W4A4 on B200 (peak_tflops.fp4 9000 against bf16 2250: a quarter of the bf16 time per FLOP);
    H100 and H200 have no FP4 tensor cores: W4A16 at the bf16 rate. The breakdown reports the true FLOPs."""
    m = _nvfp4(Q7B.path)
    assert dict(m.weight_formats) == {"attention": "nvfp4", "mlp": "nvfp4", "experts": "nvfp4"}
    parts = m.params_by_part()
    norms = m.num_layers * m.norm_params
    b200 = CostModel(m, B200)
    assert b200.linear_flops_per_token == 2.0 * ((parts["attention"] + parts["mlp"]) * 2250 / 9000 + norms)
    assert b200.linear_bytes == pytest.approx(((parts["attention"] + parts["mlp"]) * 4.5 / 8 + norms * 2), rel=1e-12)
    shape = PassShape.uniform(256, 4, 1000)
    assert b200.breakdown(shape).ops["linear"].flops == pytest.approx(
        CostModel(Q7B, B200).breakdown(shape).ops["linear"].flops, rel=1e-12)
    for hw in (H100, H200):
        assert CostModel(m, hw).linear_flops_per_token == CostModel(Q7B, hw).linear_flops_per_token
    assert compute_dtype("nvfp4", "bf16", tuple(H200.peak_tflops)) == "bf16"
    assert compute_dtype("nvfp4", "bf16", tuple(B200.peak_tflops)) == "fp4"


def test_quantization_configs_as_published():
    assert formats_from_config({"quantization_config": {"quant_method": "mxfp4"}}, "c") == (("experts", "mxfp4"),)
    nv = {"quant_method": "modelopt", "quant_algo": "NVFP4",
          "exclude_modules": ["lm_head", "model.layers.*.self_attn*"]}
    assert formats_from_config({"quantization_config": nv}, "c") == (("experts", "nvfp4"), ("mlp", "nvfp4"))
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": 128}
    assert dict(formats_from_config({"quantization_config": gptq}, "c")) == {
        "attention": "int4", "mlp": "int4", "experts": "int4"}
    # fp8 configs (DeepSeek-V3's block fp8) are left to the scenario's dtype
    fp8 = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    assert formats_from_config({"quantization_config": fp8}, "c") == ()
    assert formats_from_config({}, "c") == ()


def test_a_configs_own_weights_override_and_bad_ones_are_refused():
    cfg = {**json.load(open(Q7B.path)), "specsight": {"weights": {"mlp": "int4", "lm_head": "fp8"}}}
    m = spec_from_config(cfg, "w", "w.json")
    cm = CostModel(m, H100)
    parts = m.params_by_part()
    want = (parts["mlp"] * 4.15625 / 8 + parts["lm_head"] * 1
            + (parts["attention"] + parts["embedding"] + parts["norm"]) * 2)
    assert cm.weight_bytes_per_gpu == pytest.approx(want, rel=1e-12)
    for bad, field in (({"mlps": "int4"}, "specsight.weights.mlps"), ({"mlp": "int3"}, "specsight.weights.mlp"),
                       ("int4", "specsight.weights")):
        with pytest.raises(SpecsightInputError, match=field):
            spec_from_config({**cfg, "specsight": {"weights": bad}}, "w", "w.json")


def test_profiles_take_an_fp4_rate_and_nothing_else_new():
    raw = B200.to_dict()
    assert raw["peak_tflops"]["fp4"] == 9000.0 and "glennklockwood" in raw["sources"]["peak_tflops.fp4"]
    raw["peak_tflops"]["fp3"] = 1.0
    raw["sources"]["peak_tflops.fp3"] = "a test"
    with pytest.raises(SpecsightInputError, match="peak_tflops.fp3"):
        profile_from_dict(raw, "b200-test.yaml")
    with pytest.raises(SpecsightInputError, match="dtype"):
        CostModel(Q7B, B200, dtype="fp4")          # a compute rate, not a model dtype
