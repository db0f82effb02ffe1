"""Workload generation: arrival processes, length distributions, traces, common random numbers.

Statistical checks use fixed seeds and tolerances of >= 4 standard errors (two-sided p < 1e-4
for a correct implementation), or a KS test at alpha = 1e-3.
"""
import csv
import math

import numpy as np
import pytest

from simulator.common.paths import REPO_ROOT
from simulator.workload.workload import LengthDist, Requests, WorkloadSpec, generate_requests

TRACE = "data/traces/azure_llm_inference_2023_code.csv"


def spec(arrival, n=1000, prompt=100, output=50):
    return WorkloadSpec.from_mapping({"arrival": arrival, "num_requests": n, "prompt_len": prompt,
                                      "output_len": output})


def ks_statistic(samples, cdf):
    x = np.sort(samples)
    n = len(x)
    f = cdf(x)
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))


def test_poisson_gaps_are_exponential_with_mean_one_over_qps():
    qps, n = 5.0, 20_001
    r = generate_requests(spec({"process": "poisson", "qps": qps}, n), np.random.default_rng(11))
    gaps = np.diff(r.arrival_s)
    assert r.arrival_s[0] == 0.0 and np.all(gaps >= 0)
    # mean: standard error (1/qps)/sqrt(n); 4 SE
    assert abs(gaps.mean() - 1 / qps) < 4 * (1 / qps) / math.sqrt(len(gaps))
    # KS against Exp(qps) at alpha = 1e-3: asymptotic critical value sqrt(-ln(alpha/2)/2)/sqrt(n)
    d = ks_statistic(gaps, lambda x: 1 - np.exp(-qps * x))
    assert d < math.sqrt(-math.log(1e-3 / 2) / 2) / math.sqrt(len(gaps))


def test_gamma_gaps_have_requested_mean_and_cv():
    qps, cv, n = 2.0, 2.0, 100_001
    r = generate_requests(spec({"process": "gamma", "qps": qps, "cv": cv}, n), np.random.default_rng(3))
    gaps = np.diff(r.arrival_s)
    mean_se = cv / qps / math.sqrt(len(gaps))
    assert abs(gaps.mean() - 1 / qps) < 4 * mean_se
    # Gamma shape k = 1/cv^2 = 0.25 has kurtosis 3 + 6/k = 27: relative SE of the sample std is
    # sqrt((27 - 1) / (4 n)) ~ 0.008; with the mean's 0.0063 the CV's relative SE is ~0.01. 5 SE:
    assert abs(gaps.std() / gaps.mean() - cv) / cv < 0.05


def test_gamma_with_cv_one_matches_poisson_mean():
    r = generate_requests(spec({"process": "gamma", "qps": 10.0, "cv": 1.0}, 10_001), np.random.default_rng(4))
    gaps = np.diff(r.arrival_s)
    assert abs(gaps.std() / gaps.mean() - 1.0) < 0.05      # exponential: CV = 1, rel. SE ~0.01


def test_constant_and_closed_loop_arrivals_are_exact():
    r = generate_requests(spec({"process": "constant", "qps": 4.0}, 5), np.random.default_rng(0))
    np.testing.assert_allclose(r.arrival_s, [0, 0.25, 0.5, 0.75, 1.0])
    s = spec({"process": "closed_loop", "concurrency": 8, "think_time_s": 0.5}, 7)
    r = generate_requests(s, np.random.default_rng(0))
    assert s.is_closed_loop and s.concurrency == 8 and s.think_time_s == 0.5
    assert np.all(r.arrival_s == 0) and len(r) == 7


def test_lognormal_mean_and_median():
    n = 100_000
    d = LengthDist.from_value({"dist": "lognormal", "mean": 1000, "sigma": 0.5}, "x")
    x = d.sample(np.random.default_rng(5), n)
    sd = 1000 * math.sqrt(math.exp(0.25) - 1)             # lognormal standard deviation
    assert x.dtype == np.int64 and x.min() >= 1
    assert abs(x.mean() - 1000) < 5 * sd / math.sqrt(n)
    m = LengthDist.from_value({"dist": "lognormal", "median": 300, "sigma": 1.0}, "x")
    # median of n draws: SE = 1 / (2 f(m) sqrt(n)), f(m) = 1/(m sigma sqrt(2 pi))
    se = 300 * math.sqrt(2 * math.pi) / (2 * math.sqrt(n))
    assert abs(np.median(m.sample(np.random.default_rng(6), n)) - 300) < 5 * se + 1


def test_uniform_fixed_clip_and_empirical():
    u = LengthDist.from_value({"dist": "uniform", "low": 3, "high": 5}, "x").sample(np.random.default_rng(1), 3000)
    assert set(np.unique(u)) == {3, 4, 5}
    assert np.all(LengthDist.from_value(7, "x").sample(np.random.default_rng(1), 4) == 7)
    c = LengthDist.from_value({"dist": "lognormal", "mean": 1000, "sigma": 1.0, "min": 200, "max": 2000}, "x")
    y = c.sample(np.random.default_rng(2), 5000)
    assert y.min() == 200 and y.max() == 2000
    e = LengthDist.from_value({"dist": "empirical", "path": TRACE, "column": "num_decode_tokens"}, "x")
    col = np.loadtxt(REPO_ROOT / TRACE, delimiter=",", skiprows=1, usecols=2)
    z = e.sample(np.random.default_rng(3), 2000)
    assert set(z.tolist()) <= set(col.astype(int).tolist())
    # sequential: the rows in order, cycling past the last, whatever the generator
    q = LengthDist.from_value({"dist": "empirical", "path": TRACE, "column": "num_decode_tokens",
                               "order": "sequential"}, "x")
    n = len(col)
    w = q.sample(np.random.default_rng(4), n + 5)
    assert w.tolist() == col.astype(int).tolist() + col.astype(int)[:5].tolist()
    with pytest.raises(ValueError, match=r"x\.order='shuffled'"):
        LengthDist.from_value({"dist": "empirical", "path": TRACE, "column": "num_decode_tokens", "order": "shuffled"},
                              "x")


def test_same_seed_same_requests_and_common_random_numbers():
    base = {"arrival": {"process": "poisson", "qps": 3.0}, "num_requests": 500,
            "prompt_len": {"dist": "lognormal", "mean": 800, "sigma": 0.7},
            "output_len": {"dist": "uniform", "low": 10, "high": 400}}
    a = generate_requests(WorkloadSpec.from_mapping(base), np.random.default_rng(42))
    b = generate_requests(WorkloadSpec.from_mapping(base), np.random.default_rng(42))
    c = generate_requests(WorkloadSpec.from_mapping(base), np.random.default_rng(43))
    for f in ("arrival_s", "prompt_len", "output_len"):
        assert np.array_equal(getattr(a, f), getattr(b, f))
        assert not np.array_equal(getattr(a, f), getattr(c, f))
    # independent streams: changing one distribution leaves the other two untouched
    other = dict(base, output_len=128)
    d = generate_requests(WorkloadSpec.from_mapping(other), np.random.default_rng(42))
    assert np.array_equal(a.arrival_s, d.arrival_s) and np.array_equal(a.prompt_len, d.prompt_len)
    # and the arrays are read-only
    with pytest.raises(ValueError):
        a.prompt_len[0] = 1


def test_trace_replay_equals_csv():
    with open(REPO_ROOT / TRACE, newline="") as fh:
        rows = list(csv.DictReader(fh))
    s = WorkloadSpec.from_mapping({"arrival": {"process": "trace", "path": TRACE}})
    r = generate_requests(s, np.random.default_rng(0))
    assert len(r) == len(rows)
    np.testing.assert_array_equal(r.arrival_s, [float(x["arrived_at"]) for x in rows])
    np.testing.assert_array_equal(r.prompt_len, [int(x["num_prefill_tokens"]) for x in rows])
    np.testing.assert_array_equal(r.output_len, [int(x["num_decode_tokens"]) for x in rows])
    # time_scale, max_requests, and a length override
    s2 = WorkloadSpec.from_mapping({"arrival": {"process": "trace", "path": str(REPO_ROOT / TRACE),
                                                "time_scale": 2.0, "max_requests": 10}, "output_len": 64})
    r2 = generate_requests(s2, np.random.default_rng(0))
    assert len(r2) == 10
    np.testing.assert_allclose(r2.arrival_s, 2.0 * r.arrival_s[:10])
    np.testing.assert_array_equal(r2.prompt_len, r.prompt_len[:10])
    assert np.all(r2.output_len == 64)


def test_requests_requires_equal_lengths():
    with pytest.raises(ValueError):
        Requests(np.zeros(2), np.ones(3, dtype=np.int64), np.ones(2, dtype=np.int64))


@pytest.mark.parametrize("raw, match", [
    ({"arrival": {"process": "poison", "qps": 1}, "prompt_len": 1, "output_len": 1},
     r"workload\.arrival\.process.*poisson"),
    ({"arrival": {"process": "poisson"}, "prompt_len": 1, "output_len": 1}, r"workload\.arrival\.qps"),
    ({"arrival": {"process": "poisson", "qps": -1}, "prompt_len": 1, "output_len": 1}, r"workload\.arrival\.qps"),
    ({"arrival": {"process": "gamma", "qps": 1, "cv": 0}, "prompt_len": 1, "output_len": 1}, r"workload\.arrival\.cv"),
    ({"arrival": {"process": "poisson", "qps": 1, "cv": 2}, "prompt_len": 1, "output_len": 1},
     r"workload\.arrival\.cv.*unknown"),
    ({"arrival": {"process": "poisson", "qps": 1}, "prompt_len": 1}, r"workload\.output_len"),
    ({"arrival": {"process": "poisson", "qps": 1}, "prompt_len": 1, "output_len": 1, "seed": 3},
     r"workload\.seed.*unknown"),
    ({"arrival": {"process": "poisson", "qps": 1}, "prompt_len": 0, "output_len": 1}, r"workload\.prompt_len"),
    ({"arrival": {"process": "poisson", "qps": 1}, "num_requests": 0, "prompt_len": 1, "output_len": 1},
     r"workload\.num_requests"),
    ({"arrival": {"process": "poisson", "qps": 1}, "output_len": 1,
      "prompt_len": {"dist": "lognormal", "mean": 100, "sigma": -1}}, r"workload\.prompt_len\.sigma"),
    ({"arrival": {"process": "poisson", "qps": 1}, "output_len": 1,
      "prompt_len": {"dist": "lognormal", "mean": 100, "median": 90, "sigma": 1}}, r"workload\.prompt_len\.mean"),
    ({"arrival": {"process": "poisson", "qps": 1}, "output_len": 1,
      "prompt_len": {"dist": "uniform", "low": 10, "high": 5}}, r"workload\.prompt_len\.high"),
    ({"arrival": {"process": "poisson", "qps": 1}, "output_len": 1,
      "prompt_len": {"dist": "normal", "mean": 5}}, r"workload\.prompt_len\.dist"),
    ({"arrival": {"process": "poisson", "qps": 1}, "output_len": 1,
      "prompt_len": {"dist": "empirical", "path": TRACE, "column": "tokens"}}, r"workload\.prompt_len\.column"),
    ({"arrival": {"process": "trace", "path": "no/such/file.csv"}}, r"workload\.arrival\.path.*not found"),
    ({"arrival": {"process": "closed_loop", "concurrency": 0}, "prompt_len": 1, "output_len": 1},
     r"workload\.arrival\.concurrency"),
])
def test_bad_input_names_the_key_path(raw, match):
    with pytest.raises(ValueError, match=match):
        WorkloadSpec.from_mapping(raw)


def test_bad_input_under_another_prefix():
    with pytest.raises(ValueError, match=r"scenario\.workload\.arrival\.qps"):
        WorkloadSpec.from_mapping({"arrival": {"process": "poisson", "qps": 0}, "prompt_len": 1, "output_len": 1},
                                  where="scenario.workload")
