"""`specsight cost --ep M --dp-attention`: one pass priced in an expert-parallel / data-parallel
attention layout (the scenario keys hardware.ep and hardware.dp_attention), and each refused
combination as one input error naming the flag's field."""
from __future__ import annotations

import json

import pytest

from simulator.costs.cost_model import CostModel
from simulator.hardware.hardware import load_profile
from simulator.models.catalog import load_model
from specsight.cli import main

DSV3 = ["cost", "--model", "deepseek-v3", "--hardware", "h200-sxm", "--dtype", "fp8", "--batch", "32",
        "--new-tokens", "2", "--context", "1000"]


def _run(argv, capsys) -> dict:
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_layout_flags_price_as_the_cost_model_with_those_keys(capsys):
    out = _run(DSV3 + ["--tp", "16", "--ep", "16", "--dp-attention"], capsys)
    cm = CostModel(load_model("deepseek-v3"), load_profile("h200-sxm"), tp=16, dtype="fp8", ep=16,
                   dp_attention=True)
    assert (out["tp"], out["ep"], out["dp_attention"]) == (16, 16, True)
    assert out["weight_bytes_per_gpu"] == cm.weight_bytes_per_gpu
    plain = _run(DSV3 + ["--tp", "16"], capsys)
    assert (plain["ep"], plain["dp_attention"]) == (1, False)
    # DP attention replicates the non-expert weights: more bytes per GPU than TP16 holds
    assert out["weight_bytes_per_gpu"] > plain["weight_bytes_per_gpu"]
    assert main(DSV3 + ["--tp", "16", "--ep", "16", "--dp-attention"]) == 0
    assert "ep 16, DP attention" in capsys.readouterr().out


@pytest.mark.parametrize("extra, words", [
    (["--tp", "16", "--ep", "3"], ("ep=3", "divisor")),                      # 3 does not divide 16
    (["--tp", "16", "--dp-attention"], ("ep=1", "dp_attention")),            # DP attention needs ep = tp
    (["--tp", "16", "--ep", "0"], ("--ep=0",)),
])
def test_bad_layouts_are_one_line(extra, words, capsys):
    assert main(DSV3 + extra) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("specsight: error:")]
    assert len(lines) == 1 and "Traceback" not in err and all(w in lines[0] for w in words), err


def test_expert_parallelism_on_a_dense_model_is_refused(capsys):
    argv = ["cost", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "2", "--ep", "2", "--batch", "1",
            "--new-tokens", "1", "--context", "10"]
    assert main(argv) == 2
    assert "no routed experts" in capsys.readouterr().err
