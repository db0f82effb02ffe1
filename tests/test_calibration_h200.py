"""The H200 calibration shipped in the repository, checked against its own measurements.

tests/data/calibration_h200/ holds what scripts/gpu_check.sh measured on one NVIDIA H200
(2026-11-30): 516 timed forward passes of Llama-3.1-8B (4 and 8 layers) and Llama-3.2-1B (16
layers) dimensions in bf16, and two ground-truth runs of real speculative decoding at full depth
(temperature 1 and 2). hardware_profiles/h200-sxm.calibrated.yaml is the profile fitted there.

These tests need no GPU: they refit the measured passes with this code and predict the measured
runs with the shipped profile, against issue #5's GPU goals (held-out pass error <= 5 % median,
tokens/s error <= 5 % median, the speedup's side of 1 right at every point)."""

import pytest

from calibrate.fit import fit_attention_blocks
from calibrate.fit_host import host_overhead
from calibrate.groundtruth import load_run
from calibrate.microbench import calibration_inputs
from calibrate.validate import validate
from simulator.common.paths import REPO_ROOT
from simulator.hardware.hardware import load_profile

RESULTS = REPO_ROOT / "tests" / "data" / "calibration_h200"
PROFILE = "h200-sxm.calibrated"
GPU_HELDOUT_MEDIAN_MAX = 0.05       # issue #5: held-out forward-pass error, GPU
GPU_TOKENS_S_MEDIAN_MAX = 0.05      # issue #5: validation tokens/s error, GPU


def _points() -> list[dict]:
    return calibration_inputs(load_profile(PROFILE).calibration, RESULTS / "h200-sxm.calibrated.points.jsonl")[0]


@pytest.fixture(scope="module")
def refit():
    cal = load_profile(PROFILE).calibration
    points, specs = calibration_inputs(cal, RESULTS / "h200-sxm.calibrated.points.jsonl")
    return fit_attention_blocks(points, specs, load_profile(cal["base_profile"]), cal["dtype"],
                                cal["attention_blocks"]["sm_count"], "test", holdout_frac=0.3, seed=0, stat="median")


def test_refitting_the_measured_passes_gives_the_shipped_profile(refit):
    base, fit, report = refit
    prof = load_profile(PROFILE)
    assert report["chosen"] == "per_sequence_head" == prof.efficiency.attention_blocks
    for k, v in fit.params.items():
        assert prof.calibration["fitted"][k] == pytest.approx(v, rel=1e-3), k
    host = host_overhead(_points(), "median")
    assert prof.overheads.iteration_us == pytest.approx(host["iteration_us"], rel=1e-3)


def test_held_out_pass_error_meets_the_gpu_goal(refit):
    _, fit, report = refit
    assert fit.summary["heldout_n"] >= 100
    assert fit.summary["heldout_ape_median"] <= GPU_HELDOUT_MEDIAN_MAX
    # the bytes / bandwidth attention (split_kv) cannot describe these passes
    assert report["split_kv"]["heldout_ape_median"] > 2 * GPU_HELDOUT_MEDIAN_MAX


@pytest.mark.parametrize("run", ["groundtruth_h200.json", "groundtruth_h200_t2.json"])
def test_the_shipped_profile_predicts_the_measured_speculative_runs(run):
    table, summary = validate(load_run(RESULTS / run), PROFILE)
    assert len(table) == 12 and summary["rounds_kept"] >= 12 * 28
    assert summary["tok_s_ape_median"] <= GPU_TOKENS_S_MEDIAN_MAX
    assert summary["speedup_sign_agreement"] == 1.0, summary["speedup_sign_disagreements"]


def test_the_temperature_2_run_has_speedups_on_both_sides_of_1():
    """(else sign agreement at every point would be a weak check)"""
    table, _ = validate(load_run(RESULTS / "groundtruth_h200_t2.json"), PROFILE)
    spec = table[table["k"] > 0]["measured_speedup"]
    assert (spec > 1).sum() >= 3 and (spec < 1).sum() >= 1


@pytest.mark.parametrize("run", ["groundtruth_h200.json", "groundtruth_h200_t2.json"])
def test_the_shipped_profile_predicts_a_later_session_on_the_same_gpu(run):
    """run3_repeat: the same script 13 minutes later on a fresh machine (its own calibration not
    used): tokens/s within the GPU goal; a side of 1 may be missed only where the measured
    speedup's 95 % interval contains 1 (B=32 K=4 at temperature 2: 0.998x, interval 0.987-1.007;
    1.019x in the first run)."""
    table, summary = validate(load_run(RESULTS / "run3_repeat" / run), PROFILE)
    assert summary["tok_s_ape_median"] <= GPU_TOKENS_S_MEDIAN_MAX
    assert set(summary["speedup_sign_disagreements"]) <= set(summary["speedup_sign_unsettled"]), summary
