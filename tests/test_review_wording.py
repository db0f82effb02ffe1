"""Error wording a user reads once, prices that must be positive, and serving scripts without
unused variables."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from test_frictions import _cli

from simulator.common.errors import SpecsightInputError
from simulator.hardware.hardware import load_profile, profile_from_dict
from specsight.studies.deploy.study import deployment
from specsight.studies.plan.price import gpu_hour_price

ROOT = Path(__file__).resolve().parents[1]
EIGHT_B = "scenarios/llama8b-h100-eagle3-chat.yaml"
H100 = load_profile("h100-sxm")


def test_unknown_key_lists_the_allowed_keys_once(capsys):
    rc, _, err = _cli(["simulate", EIGHT_B, "--set", "workload.arrival.rate=24"], capsys)
    assert rc == 2
    assert "workload.arrival.rate" in err and "unknown key" in err
    assert err.count("process") == 1 and err.count("think_time_s") == 1, err


def test_misspelt_key_gets_the_suggestion_and_the_list(capsys):
    rc, _, err = _cli(["simulate", EIGHT_B, "--set", "workload.arrival.proces=poisson"], capsys)
    assert rc == 2
    assert "did you mean process" in err and "(allowed: " in err and err.count("think_time_s") == 1, err


def test_plan_without_target_qps_says_the_flag_is_required(capsys):
    rc, _, err = _cli(["plan", EIGHT_B], capsys)
    assert rc == 2
    assert "--target-qps" in err and "required unless" in err and "schedule" in err
    assert err.strip().count("\n") == 0


@pytest.mark.parametrize("drop, word", [(1, "1 key missing or unsourced"), (2, "2 keys missing or unsourced")])
def test_profile_loader_counts_in_words(drop, word):
    raw = copy.deepcopy(H100.to_dict())
    for key in ("memory_bandwidth_tb_s", "memory_capacity_gb")[:drop]:
        del raw[key]
    with pytest.raises(SpecsightInputError) as e:
        profile_from_dict(raw, "mine.yaml")
    assert word in str(e.value)


def _scenario() -> dict:
    return yaml.safe_load((ROOT / EIGHT_B).read_text())


def test_zero_price_is_refused_everywhere(capsys):
    with pytest.raises(SpecsightInputError, match=r"\(0, "):
        gpu_hour_price(_scenario(), 0.0)
    assert gpu_hour_price(_scenario(), 0.01)[0] == 0.01
    raw = copy.deepcopy(H100.to_dict())
    raw["price_usd_per_gpu_hour"] = 0
    with pytest.raises(SpecsightInputError, match="price_usd_per_gpu_hour"):
        profile_from_dict(raw, "mine.yaml")
    rc, _, err = _cli(["simulate", EIGHT_B, "--set", "pricing.usd_per_gpu_hour=0"], capsys)
    assert rc == 2 and "pricing.usd_per_gpu_hour" in err and err.strip().count("\n") == 0


def test_scripts_define_here_only_where_they_use_it(tmp_path):
    files = deployment(ROOT / "scenarios/llama70b-tp4-h100-chat-eagle3.yaml").write(tmp_path)
    for name in ("serve_vllm.sh", "serve_sglang.sh", "serve_trtllm.sh"):
        text = Path(files[name]).read_text()
        defines = "HERE=" in text
        uses = "$HERE" in text
        assert defines == uses, name
    assert "$HERE/trtllm.yaml" in Path(files["serve_trtllm.sh"]).read_text()
