"""`specsight breakeven SCENARIO.yaml`: crossings, the CLI's JSON/CSV/plots, axis2 heatmaps, bad input.

Fixed step costs make the speedup a closed form: a K-draft round costs target + K x draft seconds
and emits E(alpha, K) = (1 - alpha^(K+1)) / (1 - alpha) tokens against 1 token per target pass.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from scenario_files import write_scenario
from scipy.optimize import brentq

from specsight.cli import main
from specsight.studies.breakeven.crossings import crossings, status

TARGET_S, DRAFT_S = 0.02, 0.004          # s per target pass / per draft step
FIXED = {
    "name": "fixed-breakeven", "seed": 5,
    "hardware": {"kind": "fixed", "target_step_s": TARGET_S, "draft_step_s": DRAFT_S},
    "drafter": {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 3},
    "acceptance": {"model": "iid", "alpha": 0.6},
    "workload": {"arrival": {"process": "closed_loop", "concurrency": 1}, "num_requests": 16,
                 "prompt_len": 8, "output_len": 64},
}


def closed_form_alpha(k: int) -> float:
    """alpha where E(alpha, K) * TARGET / (TARGET + K * DRAFT) = 1."""
    def f(a: float) -> float:
        return (1 - a ** (k + 1)) / (1 - a) * TARGET_S / (TARGET_S + k * DRAFT_S) - 1.0
    return brentq(f, 1e-9, 0.999)


@pytest.fixture
def fixed_path(tmp_path):
    return write_scenario(tmp_path / "fixed.yaml", FIXED,
                          "Where does alpha make K drafts pay on fixed step costs? (test scenario)")


def test_crossings_interpolate_linearly_and_in_log_space():
    assert crossings([0, 1, 2], [2.0, 1.5, 0.5]) == [{"at": 1.5, "direction": "down"}]
    assert crossings([1, 4], [1.5, 0.5], log=True)[0]["at"] == pytest.approx(2.0)    # geometric midpoint
    c = crossings([0.1, 0.5, 0.9, 1.0], [0.5, 1.5, 1.2, 0.8])
    assert [x["direction"] for x in c] == ["up", "down"]
    assert c[0]["at"] == pytest.approx(0.3)
    assert crossings([1, 2, 3], [1.2, float("nan"), 1.1]) == []
    assert status([1.2, 1.1]) == "pays throughout" and status([0.9]) == "never pays" and status([1.1, 0.9]) == "crosses"
    # touching 1 without crossing it (an exact tie) is no crossing, and the status says so
    assert crossings([1, 2], [1.0, 1.04]) == [] and status([1.0, 1.04]) == "pays or ties"
    assert crossings([1, 2], [0.9, 1.0]) == [{"at": 2.0, "direction": "up"}]   # reaches 1: breaks even there
    assert status([0.9, 1.0]) == "ties at best"                                 # but never pays


def test_alpha_axis_finds_the_closed_form_breakeven(fixed_path, tmp_path, capsys):
    out = tmp_path / "be"
    assert main(["breakeven", str(fixed_path), "--axis", "alpha", "--values", "0.1,0.3,0.5,0.7,0.9", "--k", "1,3",
                 "--workers", "1", "--out", str(out), "--json", "--no-progress"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["axis"] == "alpha" and obj["metric"] == "throughput"
    for k in (1, 3):
        be = obj["breakeven"][f"K={k}"]
        assert be == pytest.approx(closed_form_alpha(k), abs=0.06), k
        assert obj["crossings"][f"K={k}"][0]["direction"] == "up"
    assert obj["best_k"]["0.1"] == 0 and obj["best_k"]["0.9"] == 3
    assert obj["points_simulated"] == 5 * 2 + 1          # the baseline does not depend on alpha: one run
    for f in ("csv", "plot", "store"):
        assert Path(obj["files"][f]).stat().st_size > 1000, f
    assert "latency_plot" not in obj["files"]         # along alpha plain decoding stands still: no load curve
    import pandas as pd
    df = pd.read_csv(obj["files"]["csv"])
    assert set(df["curve"]) == {"K=1", "K=3"} and len(df) == 10
    # rerun: every point comes from the store
    assert main(["breakeven", str(fixed_path), "--axis", "alpha", "--values", "0.1,0.3,0.5,0.7,0.9", "--k", "1,3",
                 "--workers", "1", "--out", str(out), "--json", "--no-progress", "--no-plot"]) == 0
    assert json.loads(capsys.readouterr().out)["points_simulated"] == 0


def test_policy_curves_and_k_axis(fixed_path, tmp_path, capsys):
    assert main(["breakeven", str(fixed_path), "--axis", "k", "--values", "1,2,4", "--policies", "static,goodput",
                 "--workers", "1", "--out", str(tmp_path / "k"), "--json", "--no-progress", "--no-plot"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert set(obj["breakeven"]) == {"policy=static", "policy=goodput"}
    pts = {(p["k"], p["curve"]): p["speedup"] for p in obj["points"]}
    assert pts[(2, "policy=static")] > 1.0                  # alpha 0.6: K = 2 pays on these costs
    # closed form E(0.6, K) x 0.02 / (0.02 + 0.004 K): 1.33, 1.40, 1.36, 1.28 for K = 1..4
    assert obj["best_k"] == {"1": 2, "2": 2, "4": 2}
    assert obj["status"]["policy=goodput"] == "pays throughout"


def test_axis2_heatmap_and_text_output(fixed_path, tmp_path, capsys):
    out = tmp_path / "hm"
    assert main(["breakeven", str(fixed_path), "--axis", "alpha", "--values", "0.2,0.8", "--k", "2",
                 "--axis2", "batch", "--values2", "1,4", "--workers", "1", "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "-- batch = 1" in text and "-- batch = 4" in text and "break-even K=2" in text
    assert (out / "breakeven_alpha_batch_heatmap.png").stat().st_size > 10_000
    assert (out / "breakeven_alpha_batch.csv").exists()


@pytest.mark.parametrize("argv, needle", [
    (["--axis", "qps"], "--values"),                        # a closed-loop scenario has no rate to scale
    (["--values", "1,x"], "--values"),
    (["--policies", "static,magic"], "--policies"),
    (["--axis", "alpha", "--values", "0.5,1.5"], "--values"),
    (["--axis", "batch", "--axis2", "qps", "--values2", "1"], "--axis2"),
    (["--k", "0"], "k"),
])
def test_bad_input_is_one_line_exit_2(fixed_path, tmp_path, capsys, argv, needle):
    assert main(["breakeven", str(fixed_path), "--out", str(tmp_path / "x"), "--workers", "1"] + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("specsight: error: ") and err.count("\n") == 1 and needle in err


def test_scenario_without_drafter_is_rejected(tmp_path, capsys):
    p = tmp_path / "plain.yaml"
    p.write_text(yaml.safe_dump({k: v for k, v in FIXED.items() if k not in ("drafter", "acceptance")}))
    assert main(["breakeven", str(p), "--out", str(tmp_path / "x")]) == 2
    assert "drafter" in capsys.readouterr().err


def test_qps_axis_on_a_trace_rescales_its_clock(tmp_path):
    """A trace keeps its lengths and its burstiness; the qps axis rescales its arrival times:
    ten arrivals 1 s apart replay at 1 request/s, so 4 requests/s is time_scale 1/4."""
    from specsight.studies.breakeven.axes import axis_overrides, default_values, trace_qps
    from specsight.studies.shared.overrides import scenario_source
    trace = tmp_path / "trace.csv"
    trace.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" +
                     "".join(f"{t}.0,{8 + t},{4 + t}\n" for t in range(10)))
    src = scenario_source({**FIXED,
                           "workload": {"arrival": {"process": "trace", "path": str(trace), "time_scale": 0.5}}})
    assert trace_qps(src) == pytest.approx(1.0)                     # as recorded, whatever time_scale says
    ov = axis_overrides("qps", 4.0, src, 4)
    assert ov["workload.arrival"]["time_scale"] == pytest.approx(0.25) and ov["workload.arrival"]["path"] == str(trace)
    assert default_values("qps", src).split(",")[2] == "2"           # x1 of the scenario's own rate (time_scale 0.5)


def test_every_point_failing_is_one_line(fixed_path, tmp_path, capsys):
    assert main(["breakeven", str(fixed_path), "--axis", "alpha", "--values", "0.5", "--set", "engine.num_gpu_blocks=1",
                 "--workers", "1", "--out", str(tmp_path / "x"), "--no-progress"]) == 2
    last = capsys.readouterr().err.splitlines()[-1]          # after one "point ... failed" line per point
    assert last.startswith("specsight: error: scenario=") and "every point failed" in last and "cannot hold" in last


def test_analytic_overlay_does_not_apply_the_tree_rule_to_a_tree_preset():
    """A tree preset's published accept length already counts a depth as accepted when any branch
    is: the overlay's expected tokens per round must equal the preset's own, not exceed it."""
    from simulator.speculation.acceptance import expected_tokens as model_tokens
    from simulator.speculation.analytic import expected_tokens
    from specsight.studies.breakeven.analytic import Analytic

    src = {"name": "tree-preset", "seed": 0, "hardware": {"gpu": "h100-sxm", "tp": 1}, "model": "llama-3.1-8b",
           "drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 5, "tree": True,
                       "tree_nodes": 20, "tree_branches": 4},
           "acceptance": {"model": "preset", "name": "eagle3-llama-3.1-8b-mtbench"},
           "workload": {"arrival": {"process": "closed_loop", "concurrency": 1}, "num_requests": 4,
                        "prompt_len": 64, "output_len": 64}}
    a = Analytic(src)
    for k in (3, 5):
        tau = model_tokens(a.scenario.acceptance.alphas(k))
        assert float(expected_tokens(a.drafter, a.alpha(k), k)) == pytest.approx(tau, rel=1e-9)


def test_a_crossing_between_kv_limited_points_is_marked():
    """A break-even interpolated between points whose batch the KV cache could not hold says so;
    one between points that held theirs does not."""
    from specsight.studies.breakeven.crossings import line_verdict
    v = line_verdict([32, 256, 1024], [1.1, 1.05, 0.9], True, [False] * 3, [False, True, True])
    assert len(v["crossings"]) == 1 and v["crossings"][0]["kv_limited"] is True
    v = line_verdict([32, 256, 1024], [1.1, 0.9, 0.8], True, [False] * 3, [False, False, True])
    assert v["crossings"][0]["kv_limited"] is False
