"""One flag per concept across commands (specsight/cli/args.py): the aliases, --k lists, --grid on
breakeven and plan, --hardware on scenario commands, and the one JSON emitter."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scenario_files import write_scenario

from specsight.cli import main
from specsight.cli.emit import dumps

COST = ["cost", "--model", "llama-3.1-8b", "--batch", "8", "--new-tokens", "3", "--context", "1024", "--json"]
FIXED = {
    "name": "fixed-flags", "seed": 3,
    "hardware": {"kind": "fixed", "target_step_s": 0.02, "draft_step_s": 0.004},
    "drafter": {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 2},
    "acceptance": {"model": "iid", "alpha": 0.6},
    "workload": {"arrival": {"process": "poisson", "qps": 4}, "num_requests": 24, "prompt_len": 16, "output_len": 32},
    "slo": {"tpot_ms_p99": 30, "ttft_ms_p99": 400},
}


@pytest.fixture
def fixed_path(tmp_path):
    return write_scenario(tmp_path / "fixed.yaml", FIXED,
                          "Do the shared flags behave alike in every command? (test scenario)")


def _json(capsys):
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("flag", ["--hardware", "--gpu", "--profile"])
def test_hardware_flag_and_its_aliases_give_the_same_answer(flag, capsys):
    assert main(COST + ["--hardware", "h100-sxm"]) == 0
    want = _json(capsys)
    assert main(COST + [flag, "h100-sxm"]) == 0
    assert _json(capsys) == want and want["gpu"] == "h100-sxm"


def test_analytic_answers_per_k(capsys):
    assert main(["analytic", "--alpha", "0.7", "--k", "3", "--c", "0.05", "--json"]) == 0
    one = _json(capsys)
    assert main(["analytic", "--alpha", "0.7", "--k", "1,3", "--c", "0.05", "--json"]) == 0
    both = _json(capsys)
    assert isinstance(both, list) and [b["k"] for b in both] == [1, 3] and both[1] == one
    assert main(["analytic", "--alpha", "0.7", "--k", "1,x"]) == 2
    assert "k=" in capsys.readouterr().err


def test_breakeven_analytic_takes_the_old_gpu_spelling(tmp_path, capsys):
    argv = ["breakeven", "--analytic", "--model", "llama-3.1-8b", "--drafter", "eagle3", "--alpha", "0.6", "--k", "2",
            "--out", str(tmp_path), "--json"]
    assert main(argv + ["--gpu", "h100-sxm"]) == 0
    old = _json(capsys)
    assert main(argv + ["--hardware", "h100-sxm"]) == 0
    assert _json(capsys) == old
    assert main(argv[:-3] + ["--json"]) == 2            # no hardware at all
    assert "--hardware" in capsys.readouterr().err


def test_breakeven_grid_runs_the_study_at_each_point(fixed_path, tmp_path, capsys):
    out = tmp_path / "g"
    assert main(["breakeven", str(fixed_path), "--axis", "alpha", "--values", "0.3,0.8", "--k", "2",
                 "--grid", "hardware.draft_step_s=0.002,0.008", "--out", str(out), "--workers", "1",
                 "--no-progress", "--no-plot", "--json"]) == 0
    runs = _json(capsys)["grid"]
    assert [r["point"] for r in runs] == [{"hardware.draft_step_s": 0.002}, {"hardware.draft_step_s": 0.008}]
    slow, fast = (max(p["speedup"] for p in r["points"]) for r in (runs[1], runs[0]))
    assert fast > slow                                  # a cheaper draft pays more
    for r in runs:
        assert (out / f"hardware.draft_step_s={r['point']['hardware.draft_step_s']}" / "breakeven_alpha.csv").exists()


def test_plan_grid_and_text(fixed_path, tmp_path, capsys):
    """plan --grid is the configuration search: one ranked table of every grid point, one set of files."""
    assert main(["plan", str(fixed_path), "--target-qps", "10", "--policies", "off", "--tolerance", "0.5",
                 "--grid", "engine.max_num_seqs=2,8", "--price-per-gpu-hour", "1", "--out", str(tmp_path / "p"),
                 "--workers", "1", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "max_num_seqs=2; off (no speculation)" in text and "max_num_seqs=8; off (no speculation)" in text
    assert "cheapest: max_num_seqs=8" in text            # 8 sequences per replica serve more than 2
    assert (tmp_path / "p" / "search.md").exists() and (tmp_path / "p" / "search_pareto.png").exists()


def test_hardware_on_a_scenario_sets_its_profile(tmp_path, capsys):
    sc = dict(FIXED, hardware={"gpu": "h100-sxm"}, model="llama-3.1-8b")
    path = write_scenario(tmp_path / "roof.yaml", sc, "Which hardware does --hardware pick? (test scenario)")
    assert main(["simulate", str(path), "--hardware", "h200-sxm", "--set", "workload.num_requests=2", "--json"]) == 0
    assert "h200-sxm" in capsys.readouterr().err


def test_one_emitter_writes_strict_json():
    text = dumps({"a": math.nan, "b": np.float64(1.5), "c": np.arange(3), "d": (np.int64(2), math.inf)})
    assert json.loads(text) == {"a": None, "b": 1.5, "c": [0, 1, 2], "d": [2, None]}
    assert dumps({"x": 1}, indent=None) == '{"x": 1}'
