"""Quiet iterations run inline (`Replica.run`, no SimPy event between them): the trajectory must
be the one a SimPy timeout per iteration gives, bit for bit (`Replica.INLINE = False`)."""
from __future__ import annotations

import pandas as pd
import pytest

from simulator.replica import Replica
from simulator.run import simulate
from simulator.scenario import load_scenario

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
    pd.testing.assert_frame_equal(a.requests, b.requests)
    pd.testing.assert_frame_equal(a.iterations, b.iterations)
    pd.testing.assert_frame_equal(a.baseline.iterations, b.baseline.iterations)
    assert a.trace == b.trace
    assert a.summary == b.summary
