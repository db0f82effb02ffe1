"""Invariants on random valid scenarios (hypothesis): every request finishes having emitted its
output length, TTFT <= E2E, no NaN or negative time, the same seed gives the same result, and
K = 0 gives the baseline's result."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.run import simulate
from simulator.run.seeds import SEED_WORKLOAD
from simulator.scenario.scenario import load_scenario
from simulator.workload.workload import generate_requests

SETTINGS = settings(max_examples=100, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

rates = st.floats(0.0, 1.0, allow_nan=False)


@st.composite
def lengths(draw, hi: int):
    kind = draw(st.sampled_from(["int", "uniform", "lognormal"]))
    if kind == "int":
        return draw(st.integers(1, hi))
    if kind == "uniform":
        lo = draw(st.integers(1, hi))
        return {"dist": "uniform", "low": lo, "high": draw(st.integers(lo, hi))}
    return {"dist": "lognormal", "mean": draw(st.floats(1.0, hi)), "sigma": draw(st.floats(0.0, 1.5)), "max": hi}


@st.composite
def scenarios(draw, speculative: bool | None = None):
    roofline = draw(st.booleans())
    sc: dict = {"name": "prop", "seed": draw(st.integers(0, 2 ** 32))}
    if roofline:
        sc["hardware"] = {"gpu": draw(st.sampled_from(["h100-sxm", "a100-80gb-sxm", "l40s"])),
                          "replicas": draw(st.integers(1, 2))}
        sc["model"] = "llama-3.1-8b"
        drafters = [{"method": "eagle3", "model": "eagle3-llama-3.1-8b"},
                    {"method": "draft_model", "model": "llama-3.2-1b"}, {"method": "ngram"}]
    else:
        sc["hardware"] = {"kind": "fixed", "target_step_s": draw(st.floats(1e-4, 0.1)),
                          "draft_step_s": draw(st.floats(0.0, 0.01)), "replicas": draw(st.integers(1, 3))}
        drafters = [{"method": "ngram", "match_probability": draw(rates)}, {"method": "suffix"}]
    spec = draw(st.booleans()) if speculative is None else speculative
    if spec:
        d = dict(draw(st.sampled_from(drafters)))
        d["num_speculative_tokens"] = draw(st.integers(1, 5))
        sc["drafter"] = d
        sc["acceptance"] = draw(st.one_of(
            rates, st.fixed_dictionaries({"model": st.just("beta"), "alpha": st.floats(0.05, 0.95),
                                          "concentration": st.floats(0.5, 50)}),
            st.fixed_dictionaries({"model": st.just("per_position"),
                                   "alphas": st.lists(rates, min_size=1, max_size=6)})))
        sc["policy"] = draw(st.sampled_from([{"kind": "static"}, {"kind": "adaptive"}, {"kind": "goodput"},
                                             {"kind": "batch_schedule", "schedule": [[4, d["num_speculative_tokens"]],
                                                                                     [16, 1]]}]))
    arrival = draw(st.sampled_from(["poisson", "gamma", "constant", "closed_loop"]))
    arr: dict = {"process": arrival}
    if arrival == "closed_loop":
        arr.update(concurrency=draw(st.integers(1, 10 ** 8)), think_time_s=draw(st.floats(0.0, 1.0)))
    else:
        arr["qps"] = draw(st.floats(0.1, 100.0))
        if arrival == "gamma":
            arr["cv"] = draw(st.floats(0.2, 4.0))
    sc["workload"] = {"arrival": arr, "num_requests": draw(st.integers(1, 25)),
                      "prompt_len": draw(lengths(600)), "output_len": draw(lengths(80))}
    seqs = draw(st.integers(1, 64))
    sc["engine"] = {"max_num_seqs": seqs, "max_num_batched_tokens": draw(st.integers(max(seqs, 64), 4096)),
                    "block_size": draw(st.sampled_from([1, 8, 16, 32])),
                    "router": draw(st.sampled_from(["round_robin", "least_outstanding"]))}
    if not roofline and draw(st.booleans()):
        sc["engine"]["num_gpu_blocks"] = 800            # holds the longest request at block size 1
    return sc


def _requested_output(sc) -> np.ndarray:
    ss = np.random.SeedSequence(sc.seed).spawn(4)
    return generate_requests(sc.workload, np.random.default_rng(ss[SEED_WORKLOAD])).output_len


@SETTINGS
@given(scenarios())
def test_every_request_finishes_with_its_output_and_sane_times(raw):
    sc = load_scenario(raw)
    r = simulate(sc).requests
    assert (r["output_tokens"].to_numpy() == _requested_output(sc)).all()
    t = r[["arrival_s", "first_token_s", "finish_s"]].to_numpy()
    assert np.isfinite(t).all() and (t >= 0).all()
    ttft, e2e = t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]
    assert (ttft >= 0).all() and (ttft <= e2e).all()


@settings(SETTINGS, max_examples=30)
@given(scenarios())
def test_same_seed_same_result(raw):
    a, b = simulate(raw), simulate(raw)
    assert a.requests.equals(b.requests) and a.iterations.equals(b.iterations)
    assert {k: v for k, v in a.summary.items() if v == v} == {k: v for k, v in b.summary.items() if v == v}


@settings(SETTINGS, max_examples=50)
@given(scenarios(speculative=True))
def test_k_zero_equals_the_baseline(raw):
    raw = dict(raw, policy={"kind": "static", "k": 0})
    res = simulate(raw, baseline=True)
    assert res.requests.equals(res.baseline.requests)
    cols = [c for c in res.iterations.columns if c != "k"]
    assert res.iterations[cols].equals(res.baseline.iterations[cols])
