"""Quiet iterations run inline (`Replica.run`, no SimPy event between them): the trajectory must
be the one a SimPy timeout per iteration gives, bit for bit (`Replica.INLINE = False`)."""
from __future__ import annotations

import pandas as pd
import pytest
from golden_cases import fixed_ties_scenario
from same_run import assert_same_run

from simulator.run import simulate
from simulator.scenario.scenario import load_scenario
from simulator.serving.replica import Replica

CASES = {
    # open loop, speculation with a static K, two replicas behind least-outstanding routing
    "poisson-eagle3-2rep": ("scenarios/llama8b-h100-eagle3-chat.yaml",
                            ["workload.num_requests=300", "workload.arrival={process: poisson, qps: 6}",
                             "hardware.replicas=2", "engine.router=least_outstanding"]),
    # closed loop: a finish schedules the user's next request
    "closed-goodput": ("scenarios/llama8b-h100-draft1b-chat.yaml",
                       ["workload.num_requests=300", "policy.kind=goodput"]),
    # KV pressure: preemption and recompute
    "preempt-adaptive": ("scenarios/llama8b-h200-eagle3-batch.yaml",
                         ["workload.num_requests=300", "engine.num_gpu_blocks=600", "policy.kind=adaptive"]),
    # n-gram drafting (matches drawn per round)
    "ngram": ("scenarios/llama70b-tp4-h100-chat-ngram.yaml", ["workload.num_requests=300"]),
}


def _run(path, overrides, inline, monkeypatch):
    monkeypatch.setattr(Replica, "INLINE", inline)
    return simulate(load_scenario(path, overrides), baseline=True, trace=True)


@pytest.mark.parametrize("case", sorted(CASES))
def test_inline_iterations_give_the_same_trajectory(case, monkeypatch):
    path, overrides = CASES[case]
    a = _run(path, overrides, True, monkeypatch)
    b = _run(path, overrides, False, monkeypatch)
    assert_same_run(a, b)


# Fixed step costs exact in binary make ties: iterations that end exactly when a request arrives
# or another replica's iteration ends (the inline rule must stop at t == peek()), closed-loop users
# whose 1-token requests finish at their first token (a prefill iteration must end on an event).
_fixed = fixed_ties_scenario


TIES = [(reps, arrival, out, ngram)
        for reps in (1, 2)
        for arrival in ({"process": "constant", "qps": 4},
                        {"process": "closed_loop", "concurrency": 3, "think_time_s": 0.5})
        for out in (1, {"dist": "uniform", "low": 1, "high": 9})
        for ngram in (False, True)]


@pytest.mark.parametrize("reps,arrival,out,ngram", TIES)
def test_inline_iterations_keep_ties_and_one_token_requests(reps, arrival, out, ngram, monkeypatch):
    runs = []
    for inline in (True, False):
        monkeypatch.setattr(Replica, "INLINE", inline)
        runs.append(simulate(_fixed(reps, arrival, out, ngram), trace=True))
    a, b = runs
    pd.testing.assert_frame_equal(a.iterations, b.iterations)
    pd.testing.assert_frame_equal(a.requests, b.requests)
    assert a.trace == b.trace


def test_an_iteration_that_adds_no_time_runs_inline_too():
    # 1e-20 s passes: the replica's clock does not move past SimPy's (0 + 1e-20 == 1e-20 but 1.0 +
    # 1e-20 == 1.0); the request at t = 1 finishes at t = 1 exactly.
    r = simulate({"name": "tiny", "seed": 0, "hardware": {"kind": "fixed", "target_step_s": 1e-20},
                  "workload": {"arrival": {"process": "constant", "qps": 1}, "num_requests": 2,
                               "prompt_len": 4, "output_len": 3}}, trace=True)
    t = 0.0
    for _ in range(3):         # prefill, then two decode iterations
        t += 1e-20
    assert r.requests["finish_s"].tolist() == [t, 1.0]
