"""The hybrid-attention and MoE models of the catalog (Qwen3-Next-80B-A3B with its MTP block,
Qwen3-30B-A3B and gpt-oss-120b with their EAGLE-3 heads, Llama-4-Scout): shapes against the published
configs, parameter counts by hand from the config keys, their drafters' structure, which engines run
them, their acceptance presets, and how `specsight models` labels them."""
import json

import pytest

from simulator.common.errors import SpecsightInputError
from simulator.common.paths import MODELS_DIR
from simulator.engines import ENGINES
from simulator.models.catalog import load_model
from simulator.run import simulate
from simulator.speculation.acceptance_presets import PRESETS, nearest_chain_preset, shape_mismatch
from simulator.speculation.drafter_structure import raw_config, structure_of
from simulator.speculation.drafters import DrafterSpec
from specsight.cli.models import model_kind

TARGETS = ["qwen3-next-80b-a3b", "qwen3-30b-a3b", "gpt-oss-120b", "llama-4-scout-17b-16e"]
HEADS = {"qwen3-next-80b-a3b-mtp": ("mtp", "qwen3-next-80b-a3b"),
         "eagle3-qwen3-30b-a3b": ("eagle3", "qwen3-30b-a3b"),
         "eagle3-gpt-oss-120b": ("eagle3", "gpt-oss-120b")}


def _raw(name: str) -> dict:
    return json.loads((MODELS_DIR / f"{name}.json").read_text())


@pytest.mark.parametrize("name", TARGETS)
def test_each_target_cites_its_config_and_a_published_count(name):
    """Every target names its HF id and a published total (test_catalog checks it within 2 %)."""
    raw = _raw(name)
    assert raw["_name_or_path"] and "@" in raw["_source"]          # a public copy at a commit
    pub = raw["_published_params"]
    assert pub["total"] > 0 and pub["source"]
    assert load_model(name).params_total == pytest.approx(pub["total"], rel=0.02)


@pytest.mark.parametrize("name", HEADS)
def test_each_head_attaches_to_its_target(name):
    kind, target = HEADS[name]
    m = load_model(name)
    assert (m.head_kind, m.target, m.num_layers) == (kind, target, 1)
    assert m.params_total < 0.05 * load_model(target).params_total


def test_qwen3_next_layers_by_kind():
    """full_attention_interval 4: layer i is full attention when (i + 1) % 4 == 0, the rest Gated DeltaNet."""
    m = load_model("qwen3-next-80b-a3b")
    assert [i for i, k in enumerate(m.layer_kinds) if k == "full"] == list(range(3, 48, 4))
    assert (m.num_linear_layers, m.num_full_layers, m.num_sliding_layers) == (36, 12, 0)
    assert m.attn_output_gate and m.num_experts == 512 and m.experts_per_token == 10
    assert m.num_shared_experts == 1 and m.shared_expert_intermediate_size == 512


def test_qwen3_next_mtp_block_by_hand():
    """mtp.layers.0: one gated full-attention layer (q_proj doubled for the gate) with the sparse MoE
    block, plus fc 2d -> d and its two norms; embedding and LM head shared."""
    m = load_model("qwen3-next-80b-a3b-mtp")
    d, h, kv, hd, e, w = 2048, 16, 2, 256, 512, 512
    attn = d * (2 * h + 2 * kv) * hd + h * hd * d
    experts = e * 3 * d * w
    shared, router, norms = 3 * d * w, d * e, 2 * d + d
    fc = 2 * d * d + 2 * d
    assert m.layer_kinds == () and m.num_full_layers == 1          # full attention, not Gated DeltaNet
    assert m.params_total == attn + experts + shared + router + norms + fc
    s = structure_of("mtp", False, raw_config("qwen3-next-80b-a3b-mtp"))
    assert (s.physical_modules, s.kv_source, s.verify_shape, s.index_share) == (1, "own", "chain", False)
    assert [s.module_of_step(j) for j in range(4)] == [0, 0, 0, 0]   # one module reused every step
    assert s.forwards(3) == 3


def test_gpt_oss_layers_and_mxfp4_experts():
    """Alternating sliding (window 128) and full layers from layer 0; routed experts MXFP4 from
    quantization_config, everything else in the scenario's dtype."""
    m = load_model("gpt-oss-120b")
    assert m.layer_kinds == ("sliding", "full") * 18 and m.window == 128
    assert dict(m.weight_formats) == {"experts": "mxfp4"}
    d = 2880
    assert m.params_by_part()["experts"] == 36 * 128 * 3 * d * d
    assert m.attention_bias and m.vocab_size == 201088


def test_llama4_scout_text_config_chunks_and_shared_expert():
    """The text_config is read; RoPE layers attend within chunks of 8192 (priced as a window), every
    4th (NoPE) layer is global; each layer has one routed expert of 16 and one shared expert."""
    m = load_model("llama-4-scout-17b-16e")
    assert [i for i, k in enumerate(m.layer_kinds) if k == "full"] == list(range(3, 48, 4))
    assert m.num_sliding_layers == 36 and m.window == 8192
    d, f, h, kv, hd, v = 5120, 8192, 40, 8, 128, 202048
    attn = d * (h + 2 * kv) * hd + h * hd * d
    per_token_layer = attn + 2 * d + 2 * (3 * d * f) + d * 16          # norms, routed + shared expert, router
    assert m.params_active == 48 * per_token_layer + 2 * v * d + d
    assert m.params_total - m.params_active == 48 * 15 * 3 * d * f


@pytest.mark.parametrize("name,rows", [("eagle3-qwen3-30b-a3b", 32000), ("eagle3-gpt-oss-120b", 32000)])
def test_eagle3_heads_by_hand(name, rows):
    """One layer over [embedding; feature] (2d in), fc 3d -> d, own LM head over the draft vocabulary."""
    m = load_model(name)
    d, h, kv, hd, f = m.hidden_size, m.num_heads, m.num_kv_heads, m.head_dim, m.intermediate_size
    attn = 2 * d * (h + 2 * kv) * hd + h * hd * d
    assert m.lm_head_vocab == rows
    assert m.params_total == attn + 2 * d + 3 * d * f + 3 * d * d + rows * d + d


@pytest.mark.parametrize("engine_kind", sorted(ENGINES))
@pytest.mark.parametrize("drafter,method", [("qwen3-next-80b-a3b-mtp", "mtp"), ("eagle3-qwen3-30b-a3b", "eagle3"),
                                            ("eagle3-gpt-oss-120b", "eagle3")])
def test_engines_run_or_refuse_each_new_drafter(engine_kind, drafter, method):
    """Each engine version runs a new drafter exactly when its anatomy lists the method (vLLM V1, SGLang
    and TensorRT-LLM run EAGLE-3 and MTP; vLLM V0 has no EAGLE-3), and none refuses its structure."""
    spec = DrafterSpec(method=method, num_speculative_tokens=3, model=drafter)
    for version in ENGINES[engine_kind].versions:
        eng = ENGINES[engine_kind](version)
        if method in eng.supported_methods():
            eng.check(spec, 2)
            eng.check_structure(structure_of(method, False, raw_config(drafter)), drafter)
        else:
            with pytest.raises(SpecsightInputError, match="drafter.method"):
                eng.check(spec, 2)
    runs_eagle3 = {(k, v) for k, cls in ENGINES.items() for v in cls.versions if "eagle3" in cls(v).supported_methods()}
    assert {("vllm", "v1"), ("sglang", "v0.5"), ("trtllm", "1.1")} <= runs_eagle3 and ("vllm", "v0") not in runs_eagle3


@pytest.mark.parametrize("engine_kind", ["vllm", "sglang", "trtllm"])
def test_eagle3_on_gpt_oss_simulates_under_each_engine(engine_kind):
    """gpt-oss-120b (MXFP4 experts, sliding layers) with its EAGLE-3 head runs end to end on each engine
    and speculation emits more than one token per round."""
    sc = {"name": "gpt-oss-eagle3", "seed": 1, "hardware": {"gpu": "h200-sxm", "tp": 1},
          "model": "gpt-oss-120b", "drafter": {"method": "eagle3", "model": "eagle3-gpt-oss-120b",
                                              "num_speculative_tokens": 3},
          "acceptance": {"model": "preset", "name": "eagle3-gpt-oss-120b-sglang-k3"},
          "workload": {"arrival": {"process": "closed_loop", "concurrency": 4}, "num_requests": 12,
                       "prompt_len": 256, "output_len": 64},
          "engine": {"kind": engine_kind}}
    s = simulate(sc).summary
    assert s["mean_tokens_per_round"] > 1.0 and s["num_requests"] == 12


@pytest.mark.parametrize("name,tau,k,shape", [("eagle3-qwen3-30b-a3b-sglang-k3", 1.86, 3, "chain"),
                                              ("eagle3-qwen3-30b-a3b-sglang-tree", 2.542, 4, "tree"),
                                              ("eagle3-gpt-oss-120b-sglang-k3", 2.41, 3, "chain")])
def test_new_presets_reproduce_their_accept_length(name, tau, k, shape):
    """The i.i.d. alpha of each preset gives back the published accept length: sum_{j=0..K} alpha^j."""
    p = PRESETS[name]
    a = float(p.alphas[0])
    assert (p.shape, p.k, p.method) == (shape, k, "eagle3")
    assert sum(a ** j for j in range(k + 1)) == pytest.approx(tau, abs=1e-6)


def test_the_tree_preset_points_a_chain_to_the_chain_figure():
    assert nearest_chain_preset("eagle3-qwen3-30b-a3b-sglang-tree").name == "eagle3-qwen3-30b-a3b-sglang-k3"
    assert "eagle3-qwen3-30b-a3b-sglang-k3" in shape_mismatch("eagle3-qwen3-30b-a3b-sglang-tree", "eagle3", 1)


@pytest.mark.parametrize("name,kind", [
    ("qwen3-next-80b-a3b", "MoE, 36 linear + 12 full"),
    ("gpt-oss-120b", "MoE, 18 sliding (window 128) + 18 full"),
    ("llama-4-scout-17b-16e", "MoE, 36 sliding (window 8192) + 12 full"),
    ("mistral-7b", "dense, 32 sliding (window 4096)"),
    ("qwen3-30b-a3b", "MoE"),
    ("deepseek-v3", "MoE MLA"),
    ("llama-3.1-8b", "dense"),
    ("qwen2.5-7b", "dense"),                       # its window is switched off (use_sliding_window: false)
    ("qwen3-next-80b-a3b-mtp", "mtp head for qwen3-next-80b-a3b"),
])
def test_models_list_names_attention_kinds_and_moe(name, kind):
    assert model_kind(load_model(name)) == kind
