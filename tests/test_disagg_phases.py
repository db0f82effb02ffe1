"""The two engines of a disaggregated run (simulator/serving/disagg.py) give the same run: the
prefill pool and then the decode pool, each running ahead (`PhasedDisagg`, what an open loop
without a trace takes), against both pools in one SimPy environment with a KV arrival an event
(`DisaggEngine`, the reference): every request's times, rounds and drafts, every iteration's log
row and the summary, bit for bit."""
from __future__ import annotations

import pytest

from simulator.run import simulate
from simulator.serving.disagg import DisaggEngine, PhasedDisagg
from tests.same_run import assert_same_run

SPEC = {"drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3},
        "acceptance": {"model": "iid", "alpha": 0.7}}
LENGTHS = {"prompt_len": {"dist": "lognormal", "median": 800, "sigma": 0.8, "max": 6000},
           "output_len": {"dist": "lognormal", "median": 120, "sigma": 0.8, "max": 1500}}


def scenario(pools: dict, workload: dict, **extra) -> dict:
    return {"hardware": {"gpu": "h100-sxm", "tp": 1}, "model": "llama-3.1-8b", "workload": workload,
            "disaggregation": pools, "seed": 7, **extra}


def both_engines(sc: dict, monkeypatch) -> tuple:
    """The run with PhasedDisagg, then with DisaggEngine; checks that each took the engine meant."""
    taken: list[type] = []
    for cls in (PhasedDisagg, DisaggEngine):
        monkeypatch.setattr(cls, "run", lambda self, _run=cls.run: (taken.append(type(self)), _run(self))[1])
    phased = simulate(sc)
    monkeypatch.setattr(PhasedDisagg, "ON", False)
    reference = simulate(sc)
    assert taken == [PhasedDisagg, DisaggEngine]
    return phased, reference


@pytest.mark.parametrize("router,qps", [("round_robin", 40.0), ("least_outstanding", 40.0), ("round_robin", 3.0)])
def test_phases_equal_the_coupled_engine_with_speculation_on_decode(router, qps, monkeypatch):
    """Poisson arrivals (2 prefill, 3 decode instances) at a load that batches both pools, and at
    one where decode instances often run one sequence, so that KV arrives during a compiled round
    that finishes the instance's last sequence; the decode pool's router in KV-arrival order."""
    wl = {"arrival": {"process": "poisson", "qps": qps}, "num_requests": 600, **LENGTHS}
    sc = scenario({"prefill": {"instances": 2}, "decode": {"instances": 3}}, wl, engine={"router": router}, **SPEC)
    phased, reference = both_engines(sc, monkeypatch)
    assert_same_run(phased, reference)
    assert phased.summary["num_requests"] == 600


def test_phases_equal_the_coupled_engine_with_prefix_routing_and_decode_preemptions(monkeypatch):
    """Prefix caching and cache-aware routing on the prefill pool (decode: least outstanding), and a
    decode pool short of KV, so that decode sequences are preempted and recomputed there."""
    wl = {"arrival": {"process": "poisson", "qps": 30.0}, "num_requests": 400, **LENGTHS,
          "prefix": {"shared_tokens": 256, "turns": 3}}
    pools = {"prefill": {"instances": 2}, "decode": {"instances": 2, "num_gpu_blocks": 900}}
    sc = scenario(pools, wl, engine={"prefix_caching": True, "router": "prefix_aware"}, **SPEC)
    phased, reference = both_engines(sc, monkeypatch)
    assert_same_run(phased, reference)
    assert phased.requests["preemptions"].sum() > 0
    assert phased.summary["prefix_cache_hit_rate"] > 0


def test_phases_running_ahead_equal_a_timeout_per_iteration(monkeypatch):
    """Each pool's replicas running ahead with compiled rounds crossing their next arrival give the
    run without the crossing and the run of one SimPy timeout per iteration (`Replica.INLINE` off),
    prefix-aware routing on the prefill pool."""
    from simulator.serving.replica import Replica
    wl = {"arrival": {"process": "poisson", "qps": 20.0}, "num_requests": 300, **LENGTHS,
          "prefix": {"shared_tokens": 256}}
    sc = scenario({"prefill": {"instances": 2}, "decode": {"instances": 3}}, wl,
                  engine={"prefix_caching": True, "router": "prefix_aware"}, **SPEC)
    a = simulate(sc)
    monkeypatch.setattr(Replica, "CROSS", False)
    b = simulate(sc)
    monkeypatch.setattr(Replica, "INLINE", False)
    c = simulate(sc)
    assert_same_run(a, b)
    assert_same_run(a, c)
