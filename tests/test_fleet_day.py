"""Fleet day (specsight.studies.fleet_day.study): per-window statistics, the replica search, and a
shortened day end to end through `specsight plan` without --target-qps.

Fixed step costs (`hardware.kind: fixed`): every iteration costs TARGET_S (plus K x DRAFT_S for a
speculative round), so a plain request holds one of a replica's SEQS slots for at least
OUTPUT_TOKENS x TARGET_S seconds and R replicas serve at most R x SEQS / (OUTPUT_TOKENS x TARGET_S)
requests/s: fewer replicas than that at the peak let the queue, and the peak window's TTFT, grow
without bound.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scenario_files import write_scenario

from specsight.cli import main
from specsight.studies.fleet_day.study import ReplicaSearch, day_verdict, fleet_day
from specsight.studies.plan.study import SLO
from specsight.studies.shared.windows import window_stats

TARGET_S, DRAFT_S = 0.02, 0.002          # s per target pass / per draft step
OUTPUT_TOKENS, SEQS = 32, 4
ROWS = [[0, 4.0], [1800, 16.0], [3600, 6.0]]   # requests/s over three half-hour windows
DAY = {
    "name": "fixed-day", "seed": 5,
    "hardware": {"kind": "fixed", "target_step_s": TARGET_S, "draft_step_s": DRAFT_S, "replicas": 2},
    "drafter": {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 3},
    "acceptance": {"model": "iid", "alpha": 0.8},
    "workload": {"arrival": {"process": "schedule", "rates": ROWS, "period_s": 5400, "time_compression": 60},
                 "prompt_len": 64, "output_len": OUTPUT_TOKENS},      # 780 requests over 90 simulated s
    "engine": {"max_num_seqs": SEQS, "max_num_batched_tokens": 512, "router": "least_outstanding"},
    "slo": {"tpot_ms_p99": 30, "ttft_ms_p99": 500},
}


def test_window_stats_are_the_percentiles_of_each_window():
    from simulator.workload.rate_schedule import RateSchedule
    sch = RateSchedule.from_rows([[0, 1.0], [10, 1.0]], period_s=20)
    arrival = np.array([1.0, 2.0, 11.0, 12.0, 13.0, 25.0])        # windows 0, 0, 1, 1, 1 and 0 of period 2
    ttft = np.array([0.1, 0.3, 0.2, 0.2, 0.9, 0.4])
    req = pd.DataFrame({"arrival_s": arrival, "first_token_s": arrival + ttft,
                        "finish_s": arrival + ttft + 9 * 0.01, "output_tokens": [10] * 6})
    w = window_stats(req, sch)
    assert [x["start_s"] for x in w["windows"]] == [0.0, 10.0, 20.0]
    assert [x["requests"] for x in w["windows"]] == [2, 3, 1]
    assert w["windows"][1]["ttft_ms_p99"] == pytest.approx(np.percentile([200, 200, 900], 99))
    assert w["window_ttft_ms_p99_max"] == pytest.approx(np.percentile([200, 200, 900], 99))
    assert w["window_tpot_ms_p99_max"] == pytest.approx(10.0)
    assert day_verdict(w, SLO(10.5, 1000))[0] and not day_verdict(w, SLO(9.5, None))[0]
    assert day_verdict(w, SLO(None, 800)) == (False, "worst window TTFT p99 886 ms > 800")
    assert day_verdict({"tpot_ms_p99": 1}, SLO(30, None))[0] is False     # no windows: not a day
    unserved = req.assign(first_token_s=req.first_token_s.where(req.index != 5))   # no first token
    assert window_stats(unserved, sch)["window_ttft_ms_p99_max"] == math.inf
    assert not day_verdict(window_stats(unserved, sch), SLO(None, 1e9))[0]


@pytest.mark.parametrize("start, need, cap", [(8, 5, 64), (1, 5, 64), (3, 1, 64), (4, 100, 64), (64, 64, 64)])
def test_the_search_finds_the_fewest_passing_replicas(start, need, cap):
    s = ReplicaSearch("x", {}, start, cap)
    while not s.done:
        s.feed(s.r, s.r >= need, "", None)
    assert s.hi == (need if need <= cap else None)
    if s.hi is not None and s.hi > 1:
        assert s.results[s.hi - 1][0] is False                  # one fewer fails: the smallest
    assert len(s.results) <= 2 * math.ceil(math.log2(cap)) + 2


def test_a_shortened_day_end_to_end(tmp_path, capsys):
    path = write_scenario(tmp_path / "day.yaml", DAY, "How many fixed-cost replicas serve a short day? (test)")
    day = fleet_day(path, policies="off,static", store=tmp_path / "points.jsonl", progress=False)
    off, static = day.rows
    stable = math.ceil(max(q for _, q in ROWS) * OUTPUT_TOKENS * TARGET_S / SEQS)   # 3
    assert off["replicas"] >= stable
    for r in (off, static):
        probes = {p["replicas"]: p["pass"] for p in r["probes"]}
        assert probes[r["replicas"]] and (r["replicas"] == 1 or probes[r["replicas"] - 1] is False)
        assert r["worst_window_tpot_ms_p99"] <= 30 and r["worst_window_ttft_ms_p99"] <= 500
        assert len(r["windows"]) == 3 and sum(w["requests"] for w in r["windows"]) == r["requests"] == 780
        assert r["gpu_hours_per_day"] == pytest.approx(r["replicas"] * 1.5)        # tp 1, a 1.5 h period
    assert off["worst_window_tpot_ms_p99"] == pytest.approx(TARGET_S * 1e3)        # one token per pass
    # alpha 0.8, K 3: 2.95 tokens per 26 ms round against 1 per 20 ms holds a slot less long
    assert static["replicas"] <= off["replicas"]
    # the CLI: `specsight plan` without --target-qps answers the day, from the same store
    out = tmp_path / "cli"
    (out).mkdir()
    (out / "points.jsonl").write_bytes((tmp_path / "points.jsonl").read_bytes())
    argv = ["plan", str(path), "--policies", "off,static", "--workers", "1", "--out", str(out), "--no-progress"]
    assert main(argv + ["--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert [r["replicas"] for r in obj["fleet_day"]] == [off["replicas"], static["replicas"]]
    assert obj["schedule"]["peak_qps"] == 16.0 and obj["schedule"]["requests"] == 780
    for f in ("csv", "markdown", "windows"):
        assert Path(obj["files"][f]).stat().st_size > 100, f
    win = pd.read_csv(obj["files"]["windows"])
    assert list(win[win.config == "static K=3"].start_h) == [0.0, 0.5, 1.0]      # the rows' real hours
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "worst TPOT p99 ms" in text and "static K=3" in text


def test_a_poisson_scenario_without_target_qps_is_one_input_error(tmp_path, capsys):
    poisson = dict(DAY, workload={"arrival": {"process": "poisson", "qps": 2}, "num_requests": 20,
                                  "prompt_len": 8, "output_len": 8})
    path = write_scenario(tmp_path / "p.yaml", poisson, "A Poisson scenario (test)")
    assert main(["plan", str(path), "--out", str(tmp_path / "x"), "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specsight: error: ") and "--target-qps" in err and err.count("\n") == 1
    assert main(["plan", str(path), "--out", str(tmp_path / "y"), "--max-replicas", "0"]) == 2
    assert "--max-replicas" in capsys.readouterr().err
