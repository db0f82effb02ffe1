"""Replicas running on past arrivals that a router reading every replica may not send them, going back
to the one it does (simulator/serving/run_on.py): every run must be the one the stop at every
arrival gives (`RunOn.ON = False`, run_ahead.py alone), bit for bit: each request's replica (the
router's every pick), times, rounds and drafts, every iteration's log row, the summary. Each case
must run on a real share of its stretches and go back from a real share of them, and a replica
that skipped going back must fail the comparison."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from golden_cases import fixed_ties_scenario
from same_run import assert_same_run

from simulator.run import simulate
from simulator.scenario.scenario import load_scenario
from simulator.serving.metrics import IterationLog
from simulator.serving.replica import Replica
from simulator.serving.router import LeastOutstandingRouter
from simulator.serving.run_on import RunOn
from tests.same_run import assert_same_summary_to_rounding

EAGLE = "scenarios/llama8b-h100-eagle3-chat.yaml"


def _fleet(router: str, qps: float, n: int = 400, replicas: int = 4) -> list[str]:
    ov = [f"workload.num_requests={n}", f"workload.arrival={{process: poisson, qps: {qps}}}",
          f"hardware.replicas={replicas}", f"engine.router={router}"]
    if router == "prefix_aware":
        ov += ["engine.prefix_caching=true", "workload.prefix={shared_tokens: 64, turns: 3}"]
    return ov


def _both(sc, monkeypatch, iterations="memory"):
    """(the run running on, the run stopping at every arrival, {ran on, went back, declined}); least
    outstanding runs on too (it does not by default, where it does not pay: router.py)."""
    monkeypatch.setattr(LeastOutstandingRouter, "runs_on", True)
    counts = dict.fromkeys(("on", "back", "declined"), 0)
    run_on, go_back = RunOn._run_on, RunOn._go_back

    def counted_run_on(self, t, h):
        wake = run_on(self, t, h)
        counts["on" if wake is not None else "declined"] += 1
        return wake

    def counted_go_back(self):
        counts["back"] += 1
        go_back(self)
    monkeypatch.setattr(RunOn, "_run_on", counted_run_on)
    monkeypatch.setattr(RunOn, "_go_back", counted_go_back)
    a = simulate(sc, baseline=True, iterations=iterations)
    seen = dict(counts)
    monkeypatch.setattr(RunOn, "ON", False)
    b = simulate(sc, baseline=True, iterations=iterations)
    assert counts == seen            # (the reference ran on nowhere)
    return a, b, seen


@pytest.mark.parametrize("router", ["least_outstanding", "prefix_aware"])
@pytest.mark.parametrize("qps", [6.0, 30.0])
def test_running_on_keeps_every_pick_and_the_trajectory(router, qps, monkeypatch):
    a, b, seen = _both(load_scenario(EAGLE, _fleet(router, qps)), monkeypatch)
    assert_same_run(a, b)
    assert seen["on"] > 200 and seen["back"] > 50, seen


def test_plain_decoding_runs_on_too(monkeypatch):
    """Speculation off (every baseline): one token a round, the catch-up counters advanced by rounds."""
    a, b, seen = _both(load_scenario(EAGLE, _fleet("least_outstanding", 12.0) + ["policy={kind: off}"]), monkeypatch)
    assert_same_run(a, b)
    assert seen["on"] > 200 and seen["back"] > 50, seen


def test_a_replica_that_skips_going_back_changes_the_run(monkeypatch):
    """The comparison catches a replica that takes a request on the rounds it ran on (not going
    back to the arrival): its later rounds, and the requests' times, move."""
    sc = load_scenario(EAGLE, _fleet("prefix_aware", 12.0))
    ref = simulate(sc)
    monkeypatch.setattr(RunOn, "_go_back", lambda self: setattr(self, "_on", None))
    broken = simulate(sc)
    assert not broken.requests.equals(ref.requests)


def test_exact_ties_are_left_to_the_stops(tmp_path, monkeypatch):
    """Fixed step costs exact in binary and arrivals on the same grid, 0.125 s to 1.5 s apart:
    some of the rounds a replica would run on end at an arrival, where it does not run on (it waits
    for the round in flight, and run_ahead.py decides the tie)."""
    rng = np.random.default_rng(3)
    at = np.cumsum(rng.integers(1, 13, size=120)) * 0.125
    out = rng.integers(1, 40, size=120)
    path = tmp_path / "grid.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n"
                    + "".join(f"{a!r},4,{o}\n" for a, o in zip(at.tolist(), out.tolist())))
    spec = fixed_ties_scenario(3, {"process": "trace", "path": str(path)}, 1, False)
    spec["workload"] = {"arrival": {"process": "trace", "path": str(path)}}
    spec["engine"] = {"router": "least_outstanding"}
    a, b, seen = _both(load_scenario(spec), monkeypatch)
    assert_same_run(a, b)
    assert seen["on"] > 10 and seen["declined"] > 10 and seen["back"] > 0, seen


def test_the_decode_pool_of_a_disaggregated_fleet_runs_on(monkeypatch):
    """A decode pool under least outstanding (PhasedDisagg's open loop over the KV arrivals)."""
    sc = {"hardware": {"gpu": "h100-sxm", "tp": 1}, "model": "llama-3.1-8b", "seed": 7,
          "workload": {"arrival": {"process": "poisson", "qps": 40.0}, "num_requests": 400,
                       "prompt_len": {"dist": "lognormal", "median": 800, "sigma": 0.8, "max": 6000},
                       "output_len": {"dist": "lognormal", "median": 120, "sigma": 0.8, "max": 1500}},
          "disaggregation": {"prefill": {"instances": 2}, "decode": {"instances": 3}},
          "engine": {"router": "least_outstanding"},
          "drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3},
          "acceptance": {"model": "iid", "alpha": 0.7}}
    a, b, seen = _both(load_scenario(sc), monkeypatch)
    assert_same_run(a, b)
    assert seen["on"] > 50 and seen["back"] > 20, seen


def test_a_dropped_log_has_the_same_run_and_summary_to_rounding(monkeypatch):
    """Folded mid-run (blocks of 97 rows), the rows run on logged in another order."""
    monkeypatch.setattr(IterationLog, "FOLD_ROWS", 97)
    a, b, seen = _both(load_scenario(EAGLE, _fleet("prefix_aware", 12.0)), monkeypatch, iterations="none")
    pd.testing.assert_frame_equal(a.requests, b.requests)
    assert seen["on"] > 200
    assert_same_summary_to_rounding(a.summary, b.summary)


def test_no_running_on_without_the_compiled_rounds_with_a_trace_or_under_least_outstanding(monkeypatch):
    calls = [0]
    run_on = RunOn._run_on

    def counted(self, j, h):
        calls[0] += 1
        return run_on(self, j, h)
    monkeypatch.setattr(RunOn, "_run_on", counted)
    sc = load_scenario(EAGLE, _fleet("prefix_aware", 12.0, n=120))
    simulate(sc)
    assert calls[0] > 0
    calls[0] = 0
    simulate(sc, trace=True)
    simulate(load_scenario(EAGLE, _fleet("least_outstanding", 12.0, n=120)))
    monkeypatch.setattr(Replica, "KERNEL", False)
    simulate(sc)
    assert calls[0] == 0
