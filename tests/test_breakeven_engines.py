"""`specsight breakeven SCENARIO --engines ...`: the study under each engine on one plot.

An engine that refuses the scenario (the real engines price passes on a GPU profile, so a
fixed-cost scenario runs under `ideal` alone) is reported in one line and left out; `ideal` alone
gives the study without --engines, row for row; on a roofline scenario every engine runs.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from scenario_files import write_scenario

from simulator.common.errors import SpecsightInputError
from specsight.cli import main
from specsight.studies.breakeven.engines import BEST_K, parse_engines
from specsight.studies.breakeven.study import breakeven

FIXED = {
    "name": "fixed-engines", "seed": 5,
    "hardware": {"kind": "fixed", "target_step_s": 0.02, "draft_step_s": 0.004},
    "drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3},
    "acceptance": {"model": "iid", "alpha": 0.6},
    "workload": {"arrival": {"process": "closed_loop", "concurrency": 1}, "num_requests": 12,
                 "prompt_len": 8, "output_len": 48},
}
ALPHAS = "0.1,0.5,0.9"
REFUSED_VLLM = ("engine vllm: refused (a real engine prices passes on a GPU profile: hardware.kind roofline, "
                "or engine.kind ideal)")
KW = dict(axis="alpha", values=ALPHAS, ks="1,3", workers=1, progress=False)


@pytest.fixture
def fixed_path(tmp_path):
    return write_scenario(tmp_path / "fixed.yaml", FIXED, "Which engine pays at which alpha? (test scenario)")


ROOF = {
    "name": "roofline-engines", "seed": 5,
    "hardware": {"gpu": "h100-sxm"}, "model": "llama-3.1-8b",
    "drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3},
    "acceptance": {"model": "iid", "alpha": 0.6},
    "workload": {"arrival": {"process": "closed_loop", "concurrency": 1}, "num_requests": 6,
                 "prompt_len": 8, "output_len": 24},
}


@pytest.fixture
def roof_path(tmp_path):
    return write_scenario(tmp_path / "roof.yaml", ROOF, "Which engine pays at which alpha? (test scenario)")


def test_ideal_alone_is_the_study_without_engines(fixed_path):
    plain = breakeven(fixed_path, **KW)
    res = breakeven(fixed_path, **KW, engines=["ideal"])
    assert res.ran == ["ideal"] and res.skipped == []
    assert plain.frame.columns[0] == "engine" and set(plain.frame["engine"]) == {"ideal"}
    pd.testing.assert_frame_equal(res.frame, plain.frame)
    best = res.lines[res.lines["line"] == BEST_K]
    assert best["speedup"].tolist() == plain.frame.groupby("alpha")["speedup"].max().tolist()
    be = res.verdict["ideal"][BEST_K]["breakeven"]
    assert be is not None and min(plain.verdict.breakeven.values()) == pytest.approx(be, rel=0.2)


def test_a_refused_engine_is_reported_and_skipped(fixed_path):
    res = breakeven(fixed_path, **KW, engines="vllm,ideal,sglang")
    assert res.ran == ["ideal"]
    assert [x.split(":")[0] for x in res.skipped] == ["engine vllm", "engine sglang"]
    assert all("refused (a real engine prices passes on a GPU profile" in x for x in res.skipped)
    assert set(res.frame["engine"]) == {"ideal"} and set(res.lines["engine"]) == {"ideal"}


def test_one_curve_per_engine_that_ran(roof_path):
    res = breakeven(roof_path, **KW, engines="ideal,vllm,trtllm")
    assert res.ran == ["ideal", "vllm", "trtllm"] and res.skipped == []
    assert res.lines.groupby(["engine", "line"]).ngroups == 3
    assert set(res.verdict) == {"ideal", "vllm", "trtllm"}
    ideal, vllm = (res.frame[res.frame["engine"] == e].drop(columns="engine").reset_index(drop=True)
                   for e in ("ideal", "vllm"))
    assert list(ideal["alpha"]) == list(vllm["alpha"]) and (vllm["error"] == "").all()
    assert not ideal["speedup"].equals(vllm["speedup"])     # an engine's rounds cost what it makes them cost
    assert vllm["analytic_speedup"].isna().all()       # the analytic model is the ideal engine's alone


def test_engine_rules_run_only_under_their_engine(roof_path):
    res = breakeven(roof_path, **KW, engines="ideal,vllm", policies="static,sglang_adaptive,adaptive")
    assert res.skipped == ["policy sglang_adaptive under engine ideal: skipped (sglang_adaptive runs under "
                           "engine.kind sglang only)",
                           "policy sglang_adaptive under engine vllm: skipped (sglang_adaptive runs under "
                           "engine.kind sglang only)"]
    lines = set(zip(res.lines["engine"], res.lines["line"]))
    assert lines == {(e, ln) for e in ("ideal", "vllm") for ln in (BEST_K, "policy=adaptive")}
    # a rule that needs the scenario's own fields (vllm_dynamic: its ranges) is skipped, saying why
    res = breakeven(roof_path, **KW, engines="vllm", policies="vllm_dynamic,static")
    assert res.ran == ["vllm"] and set(res.lines["line"]) == {BEST_K}
    assert len(res.skipped) == 1 and res.skipped[0].startswith("policy vllm_dynamic under engine vllm: skipped (")
    assert "num_speculative_tokens_per_batch_size" in res.skipped[0]
    # given them, it runs under its engine
    raw = {**ROOF, "policy": {"kind": "vllm_dynamic", "num_speculative_tokens_per_batch_size": [[1, 8, 2]]},
           "engine": {"kind": "vllm"}}
    path = write_scenario(roof_path.parent / "dyn.yaml", raw, "vLLM's dynamic K (test scenario)")
    res = breakeven(path, **KW, engines="vllm", policies="vllm_dynamic")
    assert res.skipped == [] and set(res.lines["line"]) == {"policy=vllm_dynamic"}
    assert (res.frame["error"] == "").all() and res.frame["speedup"].notna().all()


def test_an_engine_rule_without_engines_names_its_engine(fixed_path):
    with pytest.raises(SpecsightInputError) as e:
        breakeven(fixed_path, **KW, policies="static,trtllm_schedule")
    assert e.value.field == "--policies" and "--engines trtllm" in str(e.value)


@pytest.mark.parametrize("bad", ["vllm,hf", ","])
def test_bad_engine_list(bad):
    with pytest.raises(SpecsightInputError) as e:
        parse_engines(bad)
    assert e.value.field == "--engines"


def test_cli_json_csv_text_and_plot_carry_the_engine(fixed_path, tmp_path, capsys):
    out = tmp_path / "be"
    argv = ["breakeven", str(fixed_path), "--axis", "alpha", "--values", ALPHAS, "--k", "1,3", "--workers", "1",
            "--out", str(out), "--no-progress", "--engines", "ideal,vllm"]
    assert main(argv + ["--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["engines"] == ["ideal", "vllm"] and obj["engines_run"] == ["ideal"]
    assert obj["skipped"] == [REFUSED_VLLM]
    assert {p["engine"] for p in obj["points"]} == {"ideal"} and {ln["engine"] for ln in obj["lines"]} == {"ideal"}
    assert obj["verdict"]["ideal"][BEST_K]["status"] == "crosses"
    df = pd.read_csv(obj["files"]["csv"])
    assert df.columns[0] == "engine" and set(df["engine"]) == {"ideal"} and len(df) == 6
    assert set(pd.read_csv(obj["files"]["lines_csv"])["engine"]) == {"ideal"}
    assert Path(obj["files"]["plot"]).stat().st_size > 1000
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "ideal: best K" in text and "break-even ideal: best K" in text
    assert REFUSED_VLLM in text


def test_cli_no_engine_ran_is_one_line(fixed_path, tmp_path, capsys):
    assert main(["breakeven", str(fixed_path), "--axis", "alpha", "--values", ALPHAS, "--workers", "1",
                 "--out", str(tmp_path / "x"), "--no-progress", "--engines", "vllm"]) == 2
    assert "no engine ran: " + REFUSED_VLLM in capsys.readouterr().err


def test_engines_with_axis2_is_refused(fixed_path):
    with pytest.raises(SpecsightInputError) as e:
        breakeven(fixed_path, **KW, axis2="batch", values2="1,2", engines="ideal")
    assert e.value.field == "--axis2"


def test_a_scenario_under_a_real_engine_with_its_rule_runs_as_ideal_beside_it(tmp_path):
    """The scenario names vllm and its vllm_dynamic rule: under ideal its curves set their own
    policies (the rule gives way); vllm itself refuses fixed step costs and is reported."""
    raw = {**FIXED, "engine": {"kind": "vllm"},
           "policy": {"kind": "vllm_dynamic", "num_speculative_tokens_per_batch_size": [[1, 8, 2]]}}
    path = write_scenario(tmp_path / "vllm.yaml", raw, "A vLLM deployment with its dynamic K (test scenario)")
    res = breakeven(path, **KW, engines="ideal,vllm", policies="static,vllm_dynamic")
    assert res.ran == ["ideal"]
    assert res.skipped == ["policy vllm_dynamic under engine ideal: skipped (vllm_dynamic runs under engine.kind "
                           "vllm only)", REFUSED_VLLM]
    plain = breakeven(write_scenario(tmp_path / "ideal.yaml", FIXED, "The same under ideal (test scenario)"), **KW)
    assert res.frame["speedup"].tolist() == plain.frame["speedup"].tolist()


def test_the_analytic_overlay_stays_on_ideal_rows():
    from specsight.studies.breakeven.engines import _engine_frame
    df = pd.DataFrame({"alpha": [0.5], "curve": ["K=1"], "speedup": [1.2], "analytic_speedup": [1.3]})
    assert _engine_frame(df, "ideal")["analytic_speedup"].tolist() == [1.3]
    out = _engine_frame(df, "vllm")
    assert list(out.columns)[0] == "engine" and out["analytic_speedup"].isna().all()
    assert df["analytic_speedup"][0] == 1.3


def test_engines_text_shows_the_batch_each_engine_ran(roof_path, tmp_path, capsys):
    """On the batch axis the --engines table gives, per engine, the mean batch plain decoding ran
    beside the batch asked for (issue 26 item 6), read from that engine's own study."""
    argv = ["breakeven", str(roof_path), "--axis", "batch", "--values", "1,4", "--k", "2", "--workers", "1",
            "--out", str(tmp_path / "be"), "--no-progress", "--engines", "ideal,vllm"]
    assert main(argv + ["--json"]) == 0
    pts = pd.DataFrame(json.loads(capsys.readouterr().out)["points"])
    assert main(argv) == 0
    text = capsys.readouterr().out.splitlines()
    head = next(ln for ln in text if ln.lstrip().startswith("batch") and "achieved B ideal" in ln)
    assert "achieved B vllm" in head
    for b in (1, 4):
        row = next(ln for ln in text if ln.split() and ln.split()[0] == str(b))
        ran = [float(pts[(pts["engine"] == e) & (pts["batch"] == b)]["base_mean_batch"].iloc[0])
               for e in ("ideal", "vllm")]
        assert row.split()[1:3] == [f"{x:.1f}" for x in ran]
    assert any("achieved B <engine>" in ln for ln in text)
