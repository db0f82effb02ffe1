"""The 80 % intervals on every answer (specsight/studies/published/answer_intervals.py): breakeven's
speedups and break-even ranges, plan's capacities and replicas, simulate's table and the Python
API, in text, JSON and CSV; `ideal` has none and says so.

A speedup's interval is the speedup times the two factors of its (engine, family) residuals
(interval_for on 1.0), widened by the spread of the engine's constants at the answer's batch and K
(spread.scenario_spread, answer_intervals.row_spreads), so each property below is checked against those
factors exactly, and against the residual factors alone as a lower bound on the width. The studies
are a real engine (vLLM) on a roofline H100 at a few requests per point.
"""
from __future__ import annotations

import json
import math

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from scenario_files import write_scenario
from test_breakeven_engines import ROOF as ENGINES_ROOF

import specsight
from specsight.cli import main
from specsight.cli.breakeven_text import format_text
from specsight.studies.breakeven.crossings import breakeven_range, crossings
from specsight.studies.breakeven.study import breakeven
from specsight.studies.plan.study import capacity_plan
from specsight.studies.published.answer_intervals import (
    IDEAL_NOTE,
    csv_frame,
    replicas_interval,
    row_spreads,
)
from specsight.studies.published.intervals import interval_for, summary_intervals, tpot_interval_for
from specsight.studies.published.spread import scenario_spread

ROOF = {**ENGINES_ROOF, "name": "roofline-intervals", "engine": {"kind": "vllm"}}   # llama-3.1-8b, EAGLE-3, H100
KW = dict(axis="alpha", values="0.1,0.5,0.9", ks="1,3", workers=1, progress=False)
FACTORS = interval_for(1.0, "vllm", "eagle3")        # the vLLM EAGLE group's two factors (residuals alone)


@pytest.fixture(scope="module")
def vllm_study():
    return breakeven(ROOF, **KW)


@pytest.fixture(scope="module")
def ideal_study():
    return breakeven({**ROOF, "engine": {"kind": "ideal"}}, **KW)


def test_the_committed_residuals_give_the_vllm_eagle_group_an_interval_about_1():
    assert FACTORS is not None and FACTORS[0] < 1.0 < FACTORS[1]


def test_every_point_under_a_real_engine_carries_its_interval(vllm_study):
    df = vllm_study.frame
    assert list(df.columns).index("speedup_interval") == list(df.columns).index("speedup") + 1
    spreads = row_spreads(df, ROOF)
    assert all(sp[1] > 0 for sp in spreads)          # vLLM v1's draft-step floor range widens every point up
    for s, iv, sp in zip(df["speedup"], df["speedup_interval"], spreads):
        assert iv == pytest.approx(interval_for(s, "vllm", "eagle3", spread=sp), rel=1e-12)
        assert iv[0] <= s * FACTORS[0] * (1 + 1e-12) and iv[1] > s * FACTORS[1]      # wider than the residuals'
        assert iv[0] <= s <= iv[1]


def test_the_break_even_range_brackets_the_point_crossing(vllm_study):
    v = vllm_study.verdict
    assert set(v.breakeven_interval) == {"K=1", "K=3"}
    for label, be in v.breakeven.items():
        lo, hi = v.breakeven_interval[label]
        assert be is not None                      # both curves rise above 1 within the grid
        assert (lo is None or lo <= be) and (hi is None or be <= hi)
        g = vllm_study.frame[vllm_study.frame["curve"] == label].sort_values("alpha")
        ends = [crossings(g["alpha"].tolist(), [iv[j] for iv in g["speedup_interval"]]) for j in (1, 0)]
        # the interval's high edge rises above 1 first: its crossing (or below the grid) opens the range
        assert lo == (ends[0][0]["at"] if ends[0] else None) and hi == (ends[1][0]["at"] if ends[1] else None)
    assert vllm_study.to_dict()["breakeven_interval"] == v.breakeven_interval


def test_breakeven_range_closed_forms():
    xs = [1.0, 2.0, 3.0, 4.0, 5.0]
    ys = [1.4, 1.2, 1.0, 0.8, 0.6]                 # speedup 1.6 - 0.2 x: crosses 1 at x = 3
    rng = breakeven_range(xs, ys, [0.9 * y for y in ys], [1.1 * y for y in ys])
    # low edge 0.9 (1.6 - 0.2 x) = 1 at x = 8 - 5 / 0.9; high edge at x = 8 - 5 / 1.1
    assert rng == pytest.approx([8 - 5 / 0.9, 8 - 5 / 1.1])
    assert rng[0] <= 3.0 <= rng[1]
    # an edge that never crosses within the grid: below its first value / beyond its last
    assert breakeven_range(xs, ys, [0.5 * y for y in ys], [1.1 * y for y in ys])[0] is None
    assert breakeven_range(xs, ys, [0.9 * y for y in ys], [2.0 * y for y in ys])[1] is None
    # both edges past the last value: the range starts there
    assert breakeven_range(xs, [3.0] * 5, [2.0] * 5, [4.0] * 5) is None        # nothing crosses: no range
    assert breakeven_range(xs, ys, [2.0 * y for y in ys], [3.0 * y for y in ys]) == [5.0, None]
    # a curve that pays throughout whose interval's low edge stops paying at x = 4
    flat = [1.5, 1.4, 1.3, 1.25, 1.2]
    lows = [1.2, 1.1, 1.05, 1.0, 0.9]
    assert breakeven_range(xs, flat, lows, [1.8] * 5) == pytest.approx([4.0, None])


def test_csv_json_text_and_plot_carry_the_interval(vllm_study, tmp_path):
    files = vllm_study.write(tmp_path)
    df = pd.read_csv(files["csv"])
    assert "speedup_interval" not in df and {"speedup_low", "speedup_high"} <= set(df.columns)
    assert df["speedup_low"].tolist() == pytest.approx([iv[0] for iv in vllm_study.frame["speedup_interval"]])
    assert (df["speedup_low"] <= df["speedup"]).all() and (df["speedup"] <= df["speedup_high"]).all()
    points = vllm_study.to_dict()["points"]
    assert all(len(p["speedup_interval"]) == 2 for p in points)
    text = format_text(vllm_study, {}, 0.0)
    assert text.count("80 % interval: starts paying between") == 2
    assert "engine vllm and the eagle drafter family" in text and IDEAL_NOTE not in text
    iv = vllm_study.frame["speedup_interval"].iloc[0]
    assert f"[{iv[0]:.2f}-{iv[1]:.2f}]" in text


def test_the_plot_shades_each_curves_interval(vllm_study):
    from specsight.studies.shared.breakeven_plot import BAND_LABEL, BreakevenPanel, _draw_breakeven
    fig, ax = plt.subplots()
    _draw_breakeven(ax, BreakevenPanel(vllm_study.frame, vllm_study.verdict.breakeven), "alpha", "speedup", "curve",
                    {"K=1": "C0", "K=3": "C1"})
    bands = [c for c in ax.collections if type(c).__name__ in ("PolyCollection", "FillBetweenPolyCollection")]
    assert len(bands) == 2
    assert ax.get_legend_handles_labels()[1].count(BAND_LABEL) == 1
    plt.close(fig)


def test_ideal_has_no_interval_and_says_so_once(ideal_study, tmp_path):
    assert "speedup_interval" not in ideal_study.frame and ideal_study.verdict.breakeven_interval is None
    assert "breakeven_interval" not in ideal_study.to_dict()
    assert "speedup_low" not in pd.read_csv(ideal_study.write(tmp_path, plot=False)["csv"])
    assert format_text(ideal_study, {}, 0.0).count(IDEAL_NOTE) == 1


def test_engines_study_lines_carry_intervals_under_the_real_engine_only():
    res = breakeven({**ROOF, "engine": {"kind": "ideal"}}, **KW, engines="ideal,vllm")
    lines = res.lines
    assert lines[lines["engine"] == "ideal"]["speedup_interval"].isna().all()
    for s, iv in zip(*(lines[lines["engine"] == "vllm"][c] for c in ("speedup", "speedup_interval"))):
        # each vLLM point's own interval (its exact value: test_every_point_...): the residuals' widened
        assert iv[0] <= s * FACTORS[0] * (1 + 1e-12) and iv[1] > s * FACTORS[1]
    assert "breakeven_interval" in res.verdict["vllm"]["best K"]
    assert "breakeven_interval" not in res.verdict["ideal"]["best K"]


def test_csv_frame_splits_each_interval_into_two_numeric_columns():
    df = pd.DataFrame({"x": [1, 2], "speedup": [1.2, 0.9], "speedup_interval": [[1.0, 1.5], None], "y": [3, 4]})
    out = csv_frame(df)
    assert list(out.columns) == ["x", "speedup", "speedup_low", "speedup_high", "y"]
    assert out["speedup_low"].iloc[0] == 1.0 and math.isnan(out["speedup_high"].iloc[1])
    assert csv_frame(df.drop(columns="speedup_interval")) is not None


def test_replicas_follow_the_capacity_intervals_ends():
    assert replicas_interval(10.0, [2.0, 4.0]) == [3, 5]
    assert replicas_interval(10.0, None) is None


PLAN = {**ROOF, "workload": {"arrival": {"process": "poisson", "qps": 4}, "num_requests": 40, "prompt_len": 64,
                             "output_len": 32},
        "engine": {"kind": "vllm", "max_num_seqs": 8}, "slo": {"tpot_ms_p99": 12, "ttft_ms_p99": 500}}


def test_plan_capacity_and_replicas_intervals(tmp_path):
    p = capacity_plan(PLAN, 50, policies="off,static", tolerance=0.2, workers=1, progress=False)
    off, spec = p.rows
    assert off["max_qps_per_replica_interval"] is None and off["capacity_vs_off_interval"] is None
    q, vs = spec["max_qps_per_replica"], spec["capacity_vs_off"]
    f = interval_for(1.0, "vllm", "eagle3", spread=scenario_spread(PLAN).pair)      # at the scenario's own batch and K
    assert f[1] > FACTORS[1]
    assert spec["max_qps_per_replica_interval"] == pytest.approx([q * f[0], q * f[1]], rel=1e-12)
    assert spec["capacity_vs_off_interval"] == pytest.approx([vs * f[0], vs * f[1]], rel=1e-12)
    lo, hi = spec["replicas_interval"]
    assert lo <= spec["replicas"] <= hi and hi == math.ceil(50 / spec["max_qps_per_replica_interval"][0])
    files = p.write(tmp_path)
    df = pd.read_csv(files["csv"])
    assert {"max_qps_per_replica_low", "max_qps_per_replica_high", "replicas_low", "replicas_high"} <= set(df.columns)
    assert "capacity speedup's interval" in (tmp_path / "plan.md").read_text()
    assert json.loads(json.dumps(p.to_dict()))["plans"][1]["replicas_interval"] == [lo, hi]
    ideal = capacity_plan({**PLAN, "engine": {"kind": "ideal", "max_num_seqs": 8}}, 50, policies="off,static",
                          tolerance=0.2, workers=1, progress=False)
    assert not any(k.endswith("_interval") for r in ideal.rows for k in r)


def test_simulate_text_json_and_python_api(tmp_path, capsys):
    path = write_scenario(tmp_path / "sim.yaml", ROOF, "How far to trust one vLLM run? (test scenario)")
    r = specsight.simulate(path, baseline=True)
    sp = scenario_spread(r.scenario, "speedup", r.summary["mean_batch"]).pair
    tp = scenario_spread(r.scenario, "tpot", r.summary["mean_batch"]).pair
    assert tp != sp                      # the TPOT moves with the round alone, the speedup with round and plain step
    assert r.intervals == summary_intervals(r.summary, "vllm", "eagle3", spread=sp, tpot_spread=tp) and r.intervals
    s = r.summary["speedup_tpot_p50"]
    f = interval_for(1.0, "vllm", "eagle3", spread=sp)
    assert r.intervals["speedup_tpot_p50_interval"] == pytest.approx([s * f[0], s * f[1]]) and f[1] > FACTORS[1]
    t = r.summary["tpot_ms_p50"]         # the speculative TPOT: the residuals inverted, widened by the TPOT's spread
    assert r.intervals["tpot_ms_p50_interval"] == pytest.approx(tpot_interval_for(t, "vllm", "eagle3", spread=tp))
    assert specsight.simulate(path).intervals == {}                          # no baseline: no speedup
    assert main(["simulate", str(path), "--baseline"]) == 0
    text = capsys.readouterr().out
    iv = r.intervals["speedup_tpot_p50_interval"]
    assert "speedup_tpot_p50" in text and f"[{iv[0]:.4g}-{iv[1]:.4g}]" in text
    assert "_interval" not in text and "engine vllm and the eagle drafter family" in text
    ideal = write_scenario(tmp_path / "ideal.yaml", {**ROOF, "engine": {"kind": "ideal"}}, "The bound (test)")
    assert specsight.simulate(ideal, baseline=True).intervals == {}
    assert main(["simulate", str(ideal), "--baseline"]) == 0
    assert capsys.readouterr().out.count(IDEAL_NOTE) == 1
