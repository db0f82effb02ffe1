"""Bounded work: closed-loop users cost nothing until they send a request; a scenario beyond its
work limits is refused before it runs, naming the limit and how to raise it."""
from __future__ import annotations

import tracemalloc

import pytest
from fuzz_mutate import with_value

from simulator.common.errors import SpecsightInputError
from simulator.run import simulate
from simulator.scenario.scenario import load_scenario

CLOSED = {"name": "closed", "seed": 3, "hardware": {"kind": "fixed", "target_step_s": 0.01, "draft_step_s": 0.001},
          "drafter": {"method": "ngram", "num_speculative_tokens": 2}, "acceptance": 0.6,
          "workload": {"arrival": {"process": "closed_loop", "concurrency": 16_000_000, "think_time_s": 0.05},
                       "num_requests": 20, "prompt_len": {"dist": "uniform", "low": 2, "high": 30}, "output_len": 9}}


def _with(path: str, value, base: dict = CLOSED) -> dict:
    return with_value(base, path, value)


def _peak_bytes(raw: dict):
    tracemalloc.start()
    res = simulate(raw)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return res, peak


def test_sixteen_million_users_with_twenty_requests_cost_twenty_requests():
    simulate(CLOSED)                                     # imports and compiled kernels out of the way
    same, peak_20 = _peak_bytes(_with("workload.arrival.concurrency", 20))
    res, peak = _peak_bytes(CLOSED)
    assert len(res.requests) == 20 and res.requests["finish_s"].notna().all()
    assert peak < peak_20 + 5e6, f"{peak / 1e6:.1f} MB against {peak_20 / 1e6:.1f} MB"   # a list per user: 128 MB
    assert res.requests.equals(same.requests) and res.iterations.equals(same.iterations)


def test_users_reissue_after_their_think_time():
    res = simulate(_with("workload.arrival.concurrency", 2))
    r = res.requests.sort_values("arrival_s")
    assert (r["arrival_s"].iloc[:2] == 0).all() and (r["arrival_s"].iloc[2:] > 0).all()
    # every later request was issued think_time_s after some earlier request finished
    finishes = sorted(r["finish_s"])
    for t in r["arrival_s"].iloc[2:]:
        assert min(abs(t - (f + 0.05)) for f in finishes) < 1e-12


def test_huge_request_counts_are_refused_before_anything_is_allocated():
    tracemalloc.start()
    for n in (2_147_483_648, 1e30):
        with pytest.raises(SpecsightInputError, match="workload.num_requests"):
            load_scenario(_with("workload.num_requests", n))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50e6


def test_requests_beyond_the_limit_name_the_limit_and_the_override():
    with pytest.raises(SpecsightInputError) as ei:
        load_scenario(_with("workload.num_requests", 5_000_000))
    e = ei.value
    assert e.field == "workload.num_requests" and "limits.max_requests = 2,000,000" in e.allowed
    assert "--set limits.max_requests=" in e.allowed
    raised = _with("limits", {"max_requests": 5_000_000, "max_tokens": 10 ** 9})
    assert load_scenario(_with("workload.num_requests", 5_000_000, raised)).workload.n_requests == 5_000_000


def test_tokens_beyond_the_limit_are_refused():
    big = _with("workload.output_len", {"dist": "lognormal", "mean": 9_000_000, "sigma": 1})
    big["workload"]["num_requests"] = 1000
    with pytest.raises(SpecsightInputError, match=r"limits\.max_tokens = 2,000,000,000"):
        load_scenario(big)
    assert load_scenario(big, ["limits.max_tokens=100000000000"]).workload.n_requests == 1000
    with pytest.raises(SpecsightInputError, match="max_tokens"):
        load_scenario(CLOSED, ["limits.max_tokens=100"])


def test_batch_slots_beyond_the_limit_are_refused():
    raw = _with("engine", {"max_num_seqs": 65_536, "max_num_batched_tokens": 65_536})
    raw["hardware"]["replicas"] = 1000
    with pytest.raises(SpecsightInputError, match=r"engine\.max_num_seqs.*limits\.max_batch_slots"):
        load_scenario(raw)


def test_lengths_never_exceed_the_schema_limit():
    import numpy as np

    from simulator.workload.length_dist import MAX_LENGTH_TOKENS
    sc = load_scenario(_with("workload.output_len", {"dist": "lognormal", "mean": 9_000_000, "sigma": 5}))
    x = sc.workload.output_len.sample(np.random.default_rng(0), 10_000)
    assert x.min() >= 1 and x.max() == MAX_LENGTH_TOKENS


def test_replicas_beyond_the_limit_are_refused():
    with pytest.raises(SpecsightInputError, match=r"hardware\.replicas.*limits\.max_replicas = 10,000"):
        load_scenario(_with("hardware.replicas", 20_000))
    assert load_scenario(_with("hardware.replicas", 20_000), ["limits.max_replicas=20000"]).hardware.replicas == 20_000
