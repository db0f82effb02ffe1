"""Hardware profiles and the model catalog: every number sourced, parameter counts as published."""
import json

import pytest

from simulator.common.errors import SpecsightInputError
from simulator.common.paths import MODELS_DIR
from simulator.hardware.hardware import available_profiles, load_profile
from simulator.models.catalog import available_models, load_model
from simulator.speculation.drafter_structure import assistant_spec, is_assistant, raw_config

REQUIRED_GPUS = ["a100-40gb-sxm", "a100-80gb-sxm", "h100-sxm", "h100-pcie", "h200-sxm", "b200", "l40s", "l4",
                 "rtx-4090", "mi300x"]
REQUIRED_MODELS = ["llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "llama-3.2-1b", "qwen2.5-7b", "qwen2.5-0.5b",
                   "mixtral-8x7b", "deepseek-v3", "eagle-llama-3.1-8b", "eagle3-llama-3.1-8b", "deepseek-v3-mtp",
                   "medusa-llama-3.1-8b"]


def test_required_profiles_exist_and_load():
    names = available_profiles()
    for gpu in REQUIRED_GPUS:
        assert gpu in names
        prof = load_profile(gpu)
        assert prof.memory_bandwidth_tb_s > 0 and prof.peak_flops("bf16") > 0


@pytest.mark.parametrize("name", available_profiles())
def test_every_profile_number_has_a_source(name):
    prof = load_profile(name)  # the loader itself rejects a number without a source
    assert all(str(v).strip() for v in prof.sources.values())
    assert "memory_bandwidth_tb_s" in prof.sources and "peak_tflops.bf16" in prof.sources


def test_profile_missing_source_is_rejected(tmp_path):
    raw = load_profile("h100-sxm").to_dict()
    del raw["sources"]["memory_bandwidth_tb_s"]
    import yaml
    p = tmp_path / "x.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(SpecsightInputError, match="memory_bandwidth_tb_s"):
        load_profile(str(p))


def test_malformed_yaml_names_the_file(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(SpecsightInputError, match="bad.yaml"):
        load_profile(str(p))


def test_unknown_gpu_suggests_closest():
    with pytest.raises(SpecsightInputError, match="did you mean.*h100-sxm"):
        load_profile("h100-sx")


def test_required_models_present():
    names = available_models()
    for m in REQUIRED_MODELS:
        assert m in names


@pytest.mark.parametrize("name", [m for m in available_models()
                                  if "_published_params" in json.loads((MODELS_DIR / f"{m}.json").read_text())])
def test_parameter_counts_match_published(name):
    """Computed total and active counts within 2 % of the published figures (an assistant drafter
    with the fusion projections its checkpoint holds: drafter_structure.assistant_spec)."""
    pub = json.loads((MODELS_DIR / f"{name}.json").read_text())["_published_params"]
    spec = load_model(name)
    if is_assistant(raw_config(name)):
        spec = assistant_spec(spec, raw_config(name))
    assert spec.params_total == pytest.approx(pub["total"], rel=0.02)
    if "active" in pub:
        assert spec.params_active == pytest.approx(pub["active"], rel=0.02)


def test_headline_counts():
    """The issue's figures: Llama-3.1-8B 8.03 B; 70B 70.6 B; DeepSeek-V3 671 B total, 37 B active."""
    assert load_model("llama-3.1-8b").params_total == pytest.approx(8.03e9, rel=0.02)
    assert load_model("llama-3.1-70b").params_total == pytest.approx(70.6e9, rel=0.02)
    ds = load_model("deepseek-v3")
    assert ds.params_total == pytest.approx(671e9, rel=0.02)
    assert ds.params_active == pytest.approx(37e9, rel=0.02)
    assert ds.is_moe and ds.is_mla


def test_heads_attach_to_targets():
    e3 = load_model("eagle3-llama-3.1-8b")
    assert e3.head_kind == "eagle3" and e3.num_layers == 1 and e3.lm_head_vocab < e3.vocab_size
    mtp = load_model("deepseek-v3-mtp")
    assert mtp.head_kind == "mtp" and mtp.is_moe and mtp.num_layers == 1
    med = load_model("medusa-llama-3.1-8b")
    assert med.head_kind == "medusa" and med.num_lm_heads == med.medusa_num_heads > 1
    # a head owns far fewer weights than its target
    assert e3.params_total < 0.1 * load_model("llama-3.1-8b").params_total


def test_config_path_instead_of_name(tmp_path):
    cfg = json.loads((MODELS_DIR / "llama-3.2-1b.json").read_text())
    d = tmp_path / "my-model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    spec = load_model(str(d / "config.json"))
    assert spec.name == "my-model"
    assert spec.params_total == load_model("llama-3.2-1b").params_total


def test_malformed_config_names_file_and_key(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"hidden_size": 64,')
    with pytest.raises(SpecsightInputError, match="config.json.*malformed JSON"):
        load_model(str(p))
    p.write_text('{"hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100}')
    with pytest.raises(SpecsightInputError, match="num_hidden_layers"):
        load_model(str(p))
    p.write_text('{"hidden_size": "big", "num_attention_heads": 4, "vocab_size": 100, "num_hidden_layers": 2}')
    with pytest.raises(SpecsightInputError, match="hidden_size"):
        load_model(str(p))


def test_unknown_model_suggests_closest():
    with pytest.raises(SpecsightInputError, match="did you mean.*llama-3.1-8b"):
        load_model("llama-3.1-8")


@pytest.mark.parametrize("cmd", ["models", "profiles"])
def test_list_refuses_a_stray_name(cmd, capsys):
    from specsight.cli import main
    assert main([cmd, "list", "extra"]) == 2
    assert capsys.readouterr().err.strip() == f"specsight: error: {cmd} list='extra': takes no name " \
        f"({cmd} show {'M' if cmd == 'models' else 'NAME'} shows one)"
    assert main([cmd, "list"]) == 0


def test_context_window_is_read_from_the_config_or_absent():
    from simulator.models.model_config import spec_from_config
    base = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 100}
    assert spec_from_config(base, "m", "t").max_position_embeddings == 0
    assert spec_from_config({**base, "n_positions": 1024}, "m", "t").max_position_embeddings == 1024
    spec = spec_from_config({**base, "max_position_embeddings": 4096, "seq_length": 8}, "m", "t")
    assert spec.max_position_embeddings == 4096
