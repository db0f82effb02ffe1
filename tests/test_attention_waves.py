"""Attention kernels that run one thread block per (sequence, KV head): the KV reads in waves
over the multiprocessors (Efficiency.attention_blocks = per_sequence_head, CostModel.kv_wave_factor),
the profile fields that switch it on, and the calibration's choice between the two structures.

Closed forms: B H_kv blocks over S multiprocessors take ceil(B H_kv / S) waves, each block's keys
streamed at 1 / S of the bandwidth, so the reads take ceil(B H_kv / S) S / (B H_kv) times the
split-KV time."""
import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
import yaml

from calibrate.fit import ATTN, GEMV, PassPredictor, ape, fit_attention_blocks, params_of, with_attention_blocks
from simulator.common.errors import SpecsightInputError
from simulator.costs.cost_model import CostModel, PassShape, soft_roofline
from simulator.hardware.hardware import HARDWARE_DIR, load_profile
from simulator.models.catalog import load_model

LLAMA8B = load_model("llama-3.1-8b")          # 8 KV heads
CALIBRATED = "h200-sxm.calibrated"            # the committed H200 calibration (132 SMs, per_sequence_head)


def _waves_profile(sm_count: int = 132):
    return with_attention_blocks(load_profile("h200-sxm"), "per_sequence_head", sm_count, "a test")


def test_the_committed_h200_calibration_runs_attention_in_waves():
    hw = load_profile(CALIBRATED)
    assert hw.efficiency.attention_blocks == "per_sequence_head" and hw.sm_count == 132
    assert "per_sequence_head over 132 multiprocessors" in hw.describe()


@pytest.mark.parametrize("batch,factor", [
    (1, 132 / 8),          # 8 blocks in one wave: the other 124 SMs idle
    (16, 132 / 128),       # 128 blocks, one wave
    (33, 1.0),             # 264 blocks = exactly two waves
    (17, 2 * 132 / 136),   # 136 blocks: a second wave for 4 of them
])
def test_wave_factor_closed_form(batch, factor):
    cm = CostModel(LLAMA8B, _waves_profile())
    assert cm.kv_wave_factor(batch) == pytest.approx(factor, rel=1e-15)
    assert CostModel(LLAMA8B, load_profile("h200-sxm")).kv_wave_factor(batch) == 1.0
    # numpy arrays broadcast to the same values
    assert cm.kv_wave_factor(np.array([batch, 33]))[0] == pytest.approx(factor, rel=1e-15)


def test_tensor_parallel_shards_the_kv_heads_into_fewer_blocks():
    cm = CostModel(load_model("llama-3.1-70b"), _waves_profile(), tp=2)     # 8 KV heads -> 4 per GPU
    assert cm.kv_heads_per_gpu == 4 and cm.kv_wave_factor(1) == pytest.approx(132 / 4)


def test_attention_op_is_the_soft_roofline_with_the_kv_time_times_the_factor():
    hw = _waves_profile()
    cm = CostModel(LLAMA8B, hw)
    B, c = 4, 32768
    shape = PassShape.uniform(B, 1, c)
    e = hw.efficiency
    t_memory = cm.kv_bytes_per_token * (B * c + 2 * B) / (hw.memory_bandwidth_bytes_s * e.memory_kv) * (132 / 32)
    t_compute = cm.attn_flops_per_pair * shape.sum_attn_pairs / (hw.peak_flops("bf16") * e.compute)
    expected_s = soft_roofline(t_compute, t_memory, e.roofline_sharpness)
    assert cm.breakdown(shape).ops["attention"].time_s == pytest.approx(expected_s, rel=1e-12)
    # the fast path and the explained path agree
    assert cm.shape_time_s(shape) == pytest.approx(cm.breakdown(shape).time_s, rel=1e-12)


def test_split_kv_ignores_the_batch_and_full_waves_equal_split_kv():
    split = CostModel(LLAMA8B, load_profile("h200-sxm"))
    waves = CostModel(LLAMA8B, _waves_profile())
    args = (64.0, 64 * 2000.0, 64 * 2000.5, 64.0)
    assert split.time_s(*args) == split.time_s(*args, 64) == split.time_s(*args, 1)
    t33 = PassShape.uniform(33, 1, 2000)          # 264 blocks: two full waves
    assert waves.shape_time_s(t33) == pytest.approx(split.shape_time_s(t33), rel=1e-12)
    t1 = PassShape.uniform(1, 1, 32768)           # one sequence at 32k: most SMs idle, slower
    assert waves.shape_time_s(t1) > 1.5 * split.shape_time_s(t1)


def test_prefill_chunks_count_their_query_tiles_and_mla_its_query_heads():
    cm = CostModel(LLAMA8B, _waves_profile())                      # g = 32 / 8 = 4 query heads per KV head
    assert cm.attention_rows(8) == 8 and cm.attention_rows(8, 1000) == 8 + math.ceil(4000 / 64)
    # one decode sequence at 32k and a 2048-token chunk: 1 + 128 rows, 1032 blocks, 8 waves (1056 slots)
    assert cm.kv_wave_factor(cm.attention_rows(1, 2048)) == pytest.approx(1056 / 1032)
    mla = CostModel(load_model("deepseek-v3"), _waves_profile(), tp=8, dtype="fp8", kv_dtype="bf16")
    assert mla.kv_heads_per_gpu == 128 // 8 and mla.kv_wave_factor(1) == pytest.approx(132 / 16)


@pytest.mark.parametrize("policy", ["goodput", "adaptive", "static"])
def test_every_policy_simulates_under_a_waves_profile(policy):
    """(the goodput policy prices candidate rounds with its own cost-model calls)"""
    from simulator.run import simulate
    from simulator.scenario.scenario import load_scenario
    sc = load_scenario("scenarios/llama8b-h100-eagle3-chat.yaml",
                       ["workload.num_requests=60", "hardware.profile=h200-sxm.calibrated", f"policy.kind={policy}"])
    res = simulate(sc, baseline=False)
    assert res.summary["num_requests"] == 60 and res.summary["num_decode_rounds"] > 0


def test_a_waves_profile_needs_the_number_of_sequences():
    cm = CostModel(LLAMA8B, _waves_profile())
    with pytest.raises(ValueError, match="num_seqs"):
        cm.time_s(8.0, 8000.0, 8004.0, 8.0)


def _write(tmp_path, **changes) -> str:
    raw = yaml.safe_load((HARDWARE_DIR / "h200-sxm.yaml").read_text())
    raw.pop("sm_count", None)                          # each case states its own
    raw["sources"].pop("sm_count", None)
    for key, value in changes.items():
        if key == "attention_blocks":
            raw["efficiency"]["attention_blocks"] = value
        else:
            raw[key] = value
            raw["sources"][key] = "a test"
    raw["name"] = "h200-test"
    p = tmp_path / "h200-test.yaml"
    p.write_text(yaml.safe_dump(raw))
    return str(p)


@pytest.mark.parametrize("changes,field,allowed", [
    ({"attention_blocks": "per_sequence_head"}, "sm_count", "per_sequence_head needs it"),
    ({"attention_blocks": "per_token"}, "efficiency.attention_blocks", "split_kv, per_sequence_head"),
    ({"attention_blocks": "per_sequence_head", "sm_count": 0}, "sm_count", "a whole number >= 1"),
    ({"sm_count": 13.5}, "sm_count", "a whole number >= 1"),
])
def test_bad_attention_fields_get_a_clear_error(tmp_path, changes, field, allowed):
    with pytest.raises(SpecsightInputError) as e:
        load_profile(_write(tmp_path, **changes))
    assert field in e.value.field and allowed in e.value.allowed


def test_a_waves_profile_round_trips_through_yaml(tmp_path):
    p = load_profile(_write(tmp_path, attention_blocks="per_sequence_head", sm_count=132))
    assert p.efficiency.attention_blocks == "per_sequence_head" and p.sm_count == 132
    d = p.to_dict()
    assert d["efficiency"]["attention_blocks"] == "per_sequence_head" and d["sm_count"] == 132
    assert "attention_blocks" not in load_profile("h200-sxm").to_dict()["efficiency"]     # absent = split_kv


# ---- the calibration's choice ---------------------------------------------------------------
def _grid_points() -> pd.DataFrame:
    """Target passes at 4 and 8 layers and 16-layer draft passes over batch 1..256, widths 1, 3, 5,
    contexts 128..32k (B c <= 2^20), the shapes the H200 calibration timed."""
    rows = [dict(role="target", layers=L, batch=b, new_tokens=n, context=c)
            for L in (4, 8) for b in (1, 4, 16, 64, 256) for n in (1, 3, 5) for c in (128, 1024, 8192, 32768)
            if b * c <= 1 << 20]
    rows += [dict(role="draft", layers=16, batch=b, new_tokens=n, context=c)
             for b in (1, 4, 16, 64, 256) for n in (1, 2) for c in (128, 1024, 8192, 32768) if b * c <= 1 << 20]
    return pd.DataFrame(rows)


SPECS = {"target": LLAMA8B, "draft": load_model("llama-3.2-1b")}
TRUTH = {"efficiency.memory": 0.85, "efficiency.compute": 0.6, "efficiency.roofline_sharpness": 2.0,
         "overheads.kernel_launch_us": 10.0, GEMV: 0.8, ATTN: 0.6}


@pytest.mark.parametrize("blocks", ["split_kv", "per_sequence_head"])
def test_the_fit_picks_the_structure_that_made_the_times(blocks):
    """Times generated with each structure (1 % lognormal noise, seeded): the structure that made
    them has the lower training residual, is chosen, and its parameters come back."""
    hw = load_profile("h200-sxm")
    pts = _grid_points()
    y = PassPredictor(pts, SPECS, with_attention_blocks(hw, blocks, 132), "bf16")(TRUTH)
    rng = np.random.default_rng(11)
    pts["median_s"] = pts["min_s"] = y * np.exp(0.01 * rng.standard_normal(len(y)))
    stale = with_attention_blocks(hw, "per_sequence_head", 132, "a test")     # a waves base, its source set
    stale = dataclasses.replace(stale, sources={**stale.sources, "efficiency.attention_blocks": "an earlier choice"})
    base, fit, report = fit_attention_blocks(pts.to_dict("records"), SPECS, stale, "bf16", 132, "a test",
                                             holdout_frac=0.3, seed=0, datasheet=hw)
    assert report["chosen"] == blocks == base.efficiency.attention_blocks and base.sm_count == 132
    other = "split_kv" if blocks == "per_sequence_head" else "per_sequence_head"
    assert report[blocks]["rms_log_residual_train"] < report[other]["rms_log_residual_train"]
    assert fit.summary["heldout_ape_median"] < 0.02
    for k in (ATTN, "efficiency.memory", "efficiency.compute"):
        assert fit.params[k] == pytest.approx(TRUTH[k], rel=0.05), k
    # the datasheet error is the uncalibrated profile's own (split_kv), whichever structure won
    sheet = PassPredictor(pts, SPECS, hw, "bf16")(params_of(hw))
    assert fit.summary["datasheet_ape_median"] == pytest.approx(float(np.median(ape(sheet, pts["median_s"]))),
                                                                rel=1e-12)
    # a source for attention_blocks only where the key is written (per_sequence_head)
    assert ("efficiency.attention_blocks" in base.sources) == (blocks == "per_sequence_head")


def test_one_worker_cannot_tell_the_structures_apart_and_keeps_split_kv():
    """With sm_count 1 (a one-thread CPU) every block is its own wave: the factor is exactly 1,
    both fits are the same, and the tie keeps split_kv."""
    hw = load_profile("h200-sxm")
    pts = _grid_points()
    pts["median_s"] = pts["min_s"] = PassPredictor(pts, SPECS, hw, "bf16")(TRUTH)
    base, _, report = fit_attention_blocks(pts.to_dict("records"), SPECS, hw, "bf16", 1, "a test", holdout_frac=0.3)
    assert report["split_kv"]["rms_log_residual_train"] == report["per_sequence_head"]["rms_log_residual_train"]
    assert report["chosen"] == "split_kv" == base.efficiency.attention_blocks
    per_head = dataclasses.replace(base, efficiency=dataclasses.replace(base.efficiency,
                                                                        attention_blocks="per_sequence_head"))
    assert math.isclose(CostModel(LLAMA8B, per_head).kv_wave_factor(7), 1.0)
