"""Numbers where the physics divides or overflows are checked where they enter, with the allowed
range in the message: a profile's bandwidths, peaks and roofline sharpness, a model with zero
layers, a trace's counters and lengths, --k and grid values (robust to any input)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from cli_errors import one_error
from scenario_files import write_scenario
from test_cli_flags import FIXED

from simulator.common.errors import SpecsightInputError
from simulator.costs.cost_model import CostModel, PassShape
from simulator.hardware.hardware import MIN_LINK_GB_S, MIN_MEMORY_TB_S, load_profile
from simulator.models.catalog import load_model

ROOT = Path(__file__).resolve().parent.parent
H100 = (ROOT / "hardware_profiles/h100-sxm.yaml").read_text()
SMALL = {**FIXED, "workload": {**FIXED["workload"], "num_requests": 2, "output_len": 4}}




@pytest.mark.parametrize("old, new, field", [
    ("memory_bandwidth_tb_s: 3.35 ", "memory_bandwidth_tb_s: 1.0e-300 ", "memory_bandwidth_tb_s"),
    ("  bandwidth_gb_s: 450 ", "  bandwidth_gb_s: 1.0e-300 ", "interconnect.bandwidth_gb_s"),
    ("  internode_bandwidth_gb_s: 50 ", "  internode_bandwidth_gb_s: 1.0e-300 ", "internode_bandwidth_gb_s"),
])
def test_a_tiny_bandwidth_is_refused_with_its_range(old, new, field, tmp_path, capsys):
    assert old in H100
    (tmp_path / "p.yaml").write_text(H100.replace(old, new))
    line = one_error(capsys, ["cost", "--model", "llama-3.1-8b", "--hardware", str(tmp_path / "p.yaml"), "--tp", "2",
                               "--batch", "1", "--new-tokens", "1", "--context", "8"], field)
    assert "[" in line and ("0.0001" in line or f"{MIN_LINK_GB_S:g}" in line), line


def test_at_the_lowest_allowed_bandwidth_every_time_is_finite(tmp_path):
    """The soft roofline's t^p stays finite at the limits: bandwidth MIN_MEMORY_TB_S, the largest
    catalog model, sharpness 32."""
    text = H100.replace("memory_bandwidth_tb_s: 3.35 ", f"memory_bandwidth_tb_s: {MIN_MEMORY_TB_S!r} ")
    (tmp_path / "p.yaml").write_text(text)
    hw = load_profile(str(tmp_path / "p.yaml"))
    cm = CostModel(load_model("llama-3.1-405b"), hw, tp=1, dtype="bf16")
    t = cm.shape_time_s(PassShape.from_sequences([(1, 1023)] * 8))
    assert math.isfinite(t) and t > 1e3          # 811 GB at 0.1 GB/s: hours, finite
    assert all(math.isfinite(v) for v in vars(cm).values() if isinstance(v, float))


def test_a_sharpness_past_32_is_refused(tmp_path):
    text = H100.replace("  roofline_sharpness: 1.84", "  roofline_sharpness: 1000.0")
    (tmp_path / "p.yaml").write_text(text)
    with pytest.raises(SpecsightInputError, match="roofline_sharpness"):
        load_profile(str(tmp_path / "p.yaml"))


def test_a_served_model_needs_a_layer(tmp_path, capsys):
    cfg = json.loads((ROOT / "models/llama-3.1-8b.json").read_text())
    cfg["num_hidden_layers"] = 0
    (tmp_path / "zero.json").write_text(json.dumps(cfg))
    one_error(capsys, ["cost", "--model", str(tmp_path / "zero.json"), "--hardware", "h100-sxm", "--batch", "1",
                        "--new-tokens", "1", "--context", "8"], "num_hidden_layers=0", ">= 1")


@pytest.mark.parametrize("csv, setting, words", [
    ("num_drafts,num_accepted_tokens_per_pos_0\n1" + "0" * 300 + ",1" + "0" * 299 + "\n",
     "acceptance={model: trace, path: CSV}", ("row 2", "num_drafts")),
    ("accepted\n99999999\n", "acceptance={model: trace, path: CSV}", ("row 2", "[0, 64]")),
    ("n\n10000000000000000000\n5\n", "workload.output_len={dist: empirical, path: CSV, column: n}", ("row 2",)),
    ("n\n20000000\n5\n", "workload.output_len={dist: empirical, path: CSV, column: n}", ("row 2", "10,000,000")),
])
def test_trace_cells_beyond_their_range_name_the_row(csv, setting, words, tmp_path, capsys):
    (tmp_path / "t.csv").write_text(csv)
    sc = write_scenario(tmp_path / "sc.yaml", SMALL, "Are trace values bounded? (test scenario)")
    one_error(capsys, ["simulate", str(sc), "--set", setting.replace("CSV", str(tmp_path / "t.csv"))], *words)


@pytest.mark.parametrize("k", ["1e308", "99999999999999999999", "65"])
def test_breakeven_k_beyond_64_is_one_line(k, tmp_path, capsys):
    sc = write_scenario(tmp_path / "sc.yaml", SMALL, "Is --k bounded? (test scenario)")
    one_error(capsys, ["breakeven", str(sc), "--k", k, "--no-plot", "--out", str(tmp_path / "o")], "k=", "[1, 64]")


def test_grid_alias_cycle_is_one_line_and_5e_05_is_a_number(tmp_path, capsys):
    sc = write_scenario(tmp_path / "sc.yaml", SMALL, "Are grid values parsed safely? (test scenario)")
    one_error(capsys, ["breakeven", str(sc), "--grid", "seed=&a [*a]", "--no-plot", "--out", str(tmp_path / "o")],
               "contains itself")
    from simulator.scenario.scenario import checked_source
    assert checked_source(str(sc), ["slo.tpot_ms_p99=5e1"])["slo"]["tpot_ms_p99"] == 50.0   # YAML 1.1: text
