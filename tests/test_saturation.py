"""Saturation and KV limits, flagged by `simulate --json` and `breakeven`, on scenarios built to
saturate at a load known in closed form.

Fixed step costs (`hardware.kind: fixed`): every iteration costs TARGET_S whatever it holds, so
with at most SEQS sequences running, each occupying its slot for OUTPUT iterations (one prefill
iteration emits its first token, OUTPUT - 1 decode iterations the rest), plain decoding serves at
most MU = SEQS / (OUTPUT x TARGET_S) requests/s: below MU the queue is stable, above it it grows
by (rate - MU) requests/s.

With the KV cache set to BLOCKS blocks of 16 tokens, a request at full length (prompt + output +
K lookahead) needs ceil((8 + 64 + 3) / 16) = 5 blocks, so BLOCKS = 40 holds 8 such requests at
once: 4 closed-loop users fit, 16 cannot (the scheduler preempts).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from scenario_files import write_scenario

from specsight.cli import main
from specsight.studies.breakeven.study import breakeven
from specsight.studies.shared.saturation import is_saturated, queue_growth

TARGET_S, DRAFT_S = 0.02, 0.004           # s per target pass / per draft step
SEQS, OUTPUT = 8, 32                      # engine.max_num_seqs, output tokens per request
MU = SEQS / (OUTPUT * TARGET_S)           # 12.5 requests/s: plain decoding's service rate
SATURATING = {
    "name": "fixed-saturation", "seed": 3,
    "hardware": {"kind": "fixed", "target_step_s": TARGET_S, "draft_step_s": DRAFT_S},
    "drafter": {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 3},
    "acceptance": {"model": "iid", "alpha": 0.6},
    "workload": {"arrival": {"process": "poisson", "qps": MU}, "num_requests": 300, "prompt_len": 8,
                 "output_len": OUTPUT},
    "engine": {"max_num_seqs": SEQS, "max_num_batched_tokens": 512},
    "slo": {"tpot_ms_p99": 30},
}
BLOCKS = 40
KV_BOUND = {
    "name": "fixed-kv", "seed": 3,
    "hardware": {"kind": "fixed", "target_step_s": TARGET_S, "draft_step_s": DRAFT_S},
    "drafter": {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 3},
    "acceptance": {"model": "iid", "alpha": 0.6},
    "workload": {"arrival": {"process": "closed_loop", "concurrency": 1}, "num_requests": 24, "prompt_len": 8,
                 "output_len": 64},
    "engine": {"num_gpu_blocks": BLOCKS},
}
LOADS = (0.5, 0.7, 1.25, 2.0)             # x MU


def test_the_queue_rule_on_its_own():
    ok = {"ttft_first_quarter_s": 0.10, "ttft_last_quarter_s": 0.15, "e2e_ms_p50": 800}
    assert queue_growth(ok) == (False, "ok") and not is_saturated(ok) and not is_saturated(None)
    # 2 x 0.10 + 0.25 x 0.8 = 0.40 s: the bound itself passes, just above it grows
    assert not is_saturated(dict(ok, ttft_last_quarter_s=0.40))
    grown = dict(ok, ttft_last_quarter_s=0.41)
    assert is_saturated(grown) and "queue growing" in queue_growth(grown)[1]


@pytest.mark.parametrize("load", LOADS)
def test_simulate_json_flags_saturation_above_the_service_rate(tmp_path, capsys, load):
    path = write_scenario(tmp_path / "sat.yaml", SATURATING, "Where does a fixed-cost replica saturate? (test)")
    rc = main(["simulate", str(path), "--set", "policy=off", "--set", f"workload.arrival.qps={load * MU}", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["saturated"] is (load > 1.0), (load, out["ttft_ms_p50"])
    assert out["kv_limited"] is False and out["achieved_mean_batch"] == out["mean_batch"]
    assert out["achieved_mean_batch"] <= SEQS
    if load > 1.0:      # past MU the replica runs full: throughput is the closed form's
        assert out["output_tokens_per_s"] == pytest.approx(MU * OUTPUT, rel=0.05)


@pytest.mark.parametrize("load", [0.5, 2.0])
def test_simulate_json_flags_the_baseline_too(tmp_path, capsys, load):
    """With --baseline the plain run is judged by the same rule: past the plain service rate MU it
    saturates, at half of it it does not."""
    path = write_scenario(tmp_path / "sat.yaml", SATURATING, "Where does a fixed-cost replica saturate? (test)")
    rc = main(["simulate", str(path), "--baseline", "--set", f"workload.arrival.qps={load * MU}", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["baseline_saturated"] is (load > 1.0)
    assert out["baseline_kv_limited"] is False and out["baseline_achieved_mean_batch"] <= SEQS


@pytest.fixture(scope="module")
def qps_study(tmp_path_factory):
    path = write_scenario(tmp_path_factory.mktemp("sat") / "sat.yaml", SATURATING, "saturation (test)")
    return path, breakeven(path, axis="qps", values=[f * MU for f in LOADS], ks=[3], workers=1, progress=False,
                           capacity=False)


def test_breakeven_marks_saturated_points_and_names_the_load(qps_study):
    _, res = qps_study
    df = res.frame.sort_values("qps")
    assert list(df["base_saturated"]) == [False, False, True, True]
    sat = res.verdict.saturation
    assert sat["plain"] == pytest.approx(LOADS[2] * MU)
    # speculation emits more tokens per slot-second here: it saturates no earlier than plain decoding
    assert sat["K=3"] is None or sat["K=3"] >= sat["plain"]
    assert res.verdict.status["K=3"] in ("pays below saturation", "never pays below saturation", "crosses")
    assert res.verdict.status["K=3"] != "pays throughout"
    assert res.verdict.kv_limited == {"plain": None, "K=3": None}


def test_breakeven_text_csv_and_plot_say_so(qps_study, tmp_path, capsys):
    path, _ = qps_study
    vals = ",".join(f"{f * MU:g}" for f in LOADS)
    rc = main(["breakeven", str(path), "--axis", "qps", "--values", vals, "--k", "3", "--out", str(tmp_path),
               "--workers", "1", "--no-progress", "--no-capacity"])
    text = capsys.readouterr().out
    assert rc == 0
    assert f"the replica saturates (queue grows): without speculation from qps = {LOADS[2] * MU:g}" in text
    assert "(stable at 8.75)" in text and "S: saturated" in text and "pays throughout" not in text
    import pandas as pd
    csv = pd.read_csv(tmp_path / "breakeven_qps.csv")
    assert {"saturated", "kv_limited", "base_saturated", "base_kv_limited"} <= set(csv.columns)
    assert (tmp_path / "breakeven_qps.png").stat().st_size > 0


def test_batch_axis_reports_the_batch_achieved_and_the_kv_limit(tmp_path, capsys):
    path = write_scenario(tmp_path / "kv.yaml", KV_BOUND, "How many users does a small KV cache hold? (test)")
    res = breakeven(path, axis="batch", values=[4, 16], ks=[3], workers=1, progress=False)
    df = res.frame.set_index("batch")
    assert not df.loc[4, "base_kv_limited"] and df.loc[16, "base_kv_limited"] and df.loc[16, "kv_limited"]
    assert df.loc[4, "base_mean_batch"] <= 4 and df.loc[16, "base_mean_batch"] < 16
    # the cache holds BLOCKS x 16 tokens / (8 + 64) tokens per request = 8.9 requests
    assert df.loc[16, "kv_sequences"] == pytest.approx(BLOCKS * 16 / (8 + 64))
    assert res.verdict.kv_limited["plain"] == 16
    rc = main(["breakeven", str(path), "--axis", "batch", "--values", "4,16", "--k", "3", "--out", str(tmp_path),
               "--workers", "1", "--no-progress", "--no-plot"])
    text = capsys.readouterr().out
    assert rc == 0 and "achieved B" in text and " KV" in text and "holds about 9 requests" in text


def test_closed_loop_never_saturates_and_a_trace_is_not_judged(tmp_path, capsys):
    """Closed-loop users cannot outnumber themselves: past the KV cache the batch is capped
    (kv_limited) and the queue rule does not apply. A trace's arrivals are not stationary, so
    its quarters are not compared (null)."""
    path = write_scenario(tmp_path / "kv.yaml", KV_BOUND, "closed loop past the KV cache (test)")
    assert main(["simulate", str(path), "--set", "workload.arrival.concurrency=16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["saturated"] is False and out["kv_limited"] is True and out["preemptions"] > 0
    shipped = Path(__file__).resolve().parents[1] / "scenarios" / "codellama34b-h100-code-ngram.yaml"
    trace = ["simulate", str(shipped), "--set", "workload.arrival.max_requests=12", "--json"]
    assert main(trace) == 0
    assert json.loads(capsys.readouterr().out)["saturated"] is None


def test_kv_sequences_is_capped_by_the_sliding_window_slots():
    """A sliding-window model's running batch is capped by its slots: the KV cache holds the
    fewer of what the block pool and the slots hold."""
    from specsight.studies.shared.saturation import kv_sequences
    base = {"num_requests": 10, "prompt_tokens": 9000, "output_tokens": 1000, "kv_capacity_blocks": 640}
    assert kv_sequences(base, 16) == pytest.approx(640 * 16 / 1000)
    assert kv_sequences({**base, "kv_sliding_slots": 7}, 16) == 7
    assert kv_sequences({**base, "kv_sliding_slots": 70}, 16) == pytest.approx(10.24)
