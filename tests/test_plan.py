"""`specsight plan`: the capacity search, the fleet arithmetic, and the CLI's outputs.

Fixed step costs (`hardware.kind: fixed`) make the latencies closed forms: every iteration
costs TARGET_S (plus K x DRAFT_S for a speculative round), so plain decoding's TPOT is exactly
TARGET_S whatever the load, and a speculative round emits (1 - a^(K+1)) / (1 - a) tokens.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from scenario_files import write_scenario

from specsight.cli import main
from specsight.studies.plan.study import SLO, configurations, plan, verdict
from specsight.studies.shared.overrides import scenario_source

TARGET_S, DRAFT_S = 0.02, 0.002          # s per target pass / per draft step
OUTPUT_TOKENS = 32
FIXED = {
    "name": "fixed-plan", "seed": 4,
    "hardware": {"kind": "fixed", "target_step_s": TARGET_S, "draft_step_s": DRAFT_S},
    "drafter": {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 3},
    "acceptance": {"model": "iid", "alpha": 0.8},
    "workload": {"arrival": {"process": "poisson", "qps": 2}, "num_requests": 200, "prompt_len": 64,
                 "output_len": OUTPUT_TOKENS},
    "engine": {"max_num_seqs": 8, "max_num_batched_tokens": 512},
    "slo": {"tpot_ms_p99": 30, "ttft_ms_p99": 500},
}
SLO_FIXED = SLO(30.0, 500.0)
PRICE = 2.5                              # USD per GPU-hour
TOL = 0.05


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One point store for the module: searches for different targets reuse the same probes."""
    return tmp_path_factory.mktemp("plan") / "points.jsonl"


def run_plan(target: float, store, slo: SLO = SLO_FIXED, policies=("off", "static", "goodput")):
    src = scenario_source(FIXED)
    return plan(src, target, slo, PRICE, configurations(src, list(policies), []), tol=TOL,
                store_path=store, progress=False)


def test_fleet_arithmetic_and_the_search_bracket(store):
    """replicas = ceil(target / max per replica); GPUs = replicas x tp; $/hour = GPUs x price;
    $/M tokens = $/hour / (target x output tokens x 3600) x 10^6; the largest passing rate and
    the smallest failing rate bracket the limit within the tolerance."""
    target = 40.0
    rows = run_plan(target, store)
    assert [r["config"] for r in rows] == ["off (no speculation)", "static K=3", "goodput (K<=3)"]
    for r in rows:
        m = r["max_qps_per_replica"]
        assert m is not None and r["bracket_hi_qps"] is not None, r["config"]
        assert r["bracket_hi_qps"] / m - 1.0 <= TOL
        probes = {p["qps"]: p["pass"] for p in r["probes"]}
        assert probes[m] is True and probes[r["bracket_hi_qps"]] is False
        assert all(not ok for q, ok in probes.items() if q > r["bracket_hi_qps"])   # no pass above a failure
        assert r["replicas"] == math.ceil(target / m) and r["gpus"] == r["replicas"] * 1
        assert r["cost_per_hour_usd"] == pytest.approx(r["gpus"] * PRICE)
        assert r["mean_output_tokens"] == OUTPUT_TOKENS
        assert r["cost_per_million_output_tokens_usd"] == pytest.approx(
            r["cost_per_hour_usd"] / (target * OUTPUT_TOKENS * 3600) * 1e6)
    off, static = rows[0], rows[1]
    assert off["tpot_ms_p99_at_max"] == pytest.approx(TARGET_S * 1e3)   # one token per fixed-cost pass
    # alpha 0.8, K 3: 2.95 tokens per 26 ms round against 1 per 20 ms: more capacity, fewer replicas
    assert static["max_qps_per_replica"] > off["max_qps_per_replica"]
    assert static["replicas"] <= off["replicas"] and static["capacity_vs_off"] > 1.0


def test_doubling_the_target_never_needs_fewer_replicas(store):
    """The capacity of one replica does not depend on the target, so the replica count is
    monotonic in it and at most doubles when the target doubles."""
    counts = [[r["replicas"] for r in run_plan(t, store)] for t in (5.0, 10.0, 20.0, 40.0, 80.0)]
    for lo, hi in zip(counts, counts[1:]):
        assert all(a <= b <= 2 * a for a, b in zip(lo, hi)), counts


def test_only_speculation_meets_a_tpot_slo_below_the_target_pass(store):
    """Plain decoding emits one token per 20 ms pass at any load, so a 15 ms TPOT SLO is out of its
    reach at every rate; speculation (26 ms per round for 2.95 tokens on average) meets it."""
    rows = run_plan(10.0, store, slo=SLO(15.0, None), policies=("off", "static"))
    off, static = rows
    assert off["max_qps_per_replica"] is None and off["replicas"] is None and off["cost_per_hour_usd"] is None
    assert all(not p["pass"] and "TPOT" in p["why"] for p in off["probes"])
    assert static["max_qps_per_replica"] is not None and static["tpot_ms_p99_at_max"] <= 15.0


def test_verdict_flags_a_growing_queue():
    ok = {"tpot_ms_p99": 10, "ttft_ms_p99": 100, "ttft_first_quarter_s": 0.05, "ttft_last_quarter_s": 0.06,
          "e2e_ms_p50": 400}
    assert verdict(ok, SLO(30, 500)) == (True, "ok")
    growing = dict(ok, ttft_last_quarter_s=0.5)       # 0.5 > 2 x 0.05 + 0.4 / 4
    assert verdict(growing, SLO(30, None))[0] is False and "queue growing" in verdict(growing, SLO(30, None))[1]
    assert verdict(dict(ok, tpot_ms_p99=31), SLO(30, None))[0] is False
    assert verdict(None, SLO(30, None)) == (False, "simulation failed")


@pytest.fixture
def fixed_path(tmp_path):
    return write_scenario(tmp_path / "fixed.yaml", FIXED,
                          "How many fixed-cost replicas serve a target rate? (test scenario)")


def test_cli_json_table_and_files(fixed_path, tmp_path, capsys):
    out = tmp_path / "plan"
    argv = ["plan", str(fixed_path), "--target-qps", "40", "--price-per-gpu-hour", str(PRICE),
            "--policies", "off,static", "--workers", "1", "--out", str(out), "--no-progress"]
    assert main(argv + ["--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["target_qps"] == 40 and obj["slo"] == {"tpot_ms_p99": 30, "ttft_ms_p99": 500}
    assert [p["config"] for p in obj["plans"]] == ["off (no speculation)", "static K=3"]
    for f in ("csv", "markdown", "plot", "store"):
        assert Path(obj["files"][f]).stat().st_size > 200, f
    md = (out / "plan.md").read_text()
    assert "| static K=3 |" in md and "fixed step costs" in md
    assert main(argv) == 0                                # the table; every probe from the store
    text = capsys.readouterr().out
    assert "max QPS/replica" in text and "static K=3" in text and "$/M out tok" in text


@pytest.mark.parametrize("extra, needle", [
    (["--target-qps", "0"], "--target-qps"),
    (["--target-qps", "5", "--tolerance", "3"], "--tolerance"),
    (["--target-qps", "5", "--policies", "off,magic"], "--policies"),
    (["--target-qps", "5", "--slo-tpot-ms-p99", "-1"], "--slo-tpot-ms-p99"),
    (["--target-qps", "5", "--k", "0"], "k"),
])
def test_bad_input_is_one_line_exit_2(fixed_path, tmp_path, capsys, extra, needle):
    assert main(["plan", str(fixed_path), "--out", str(tmp_path / "x"), "--workers", "1"] + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("specsight: error: ") and err.count("\n") == 1 and needle in err


def test_no_slo_anywhere_is_an_input_error(tmp_path, capsys):
    p = tmp_path / "noslo.yaml"
    p.write_text(yaml.safe_dump({k: v for k, v in FIXED.items() if k != "slo"}))
    assert main(["plan", str(p), "--target-qps", "5", "--out", str(tmp_path / "x")]) == 2
    assert "slo" in capsys.readouterr().err
