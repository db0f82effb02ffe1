"""The real-engine table's noise floor (calibrate/measurement_noise.py) against closed forms."""
import math

import numpy as np
from scipy.stats import norm

from calibrate.measurement_noise import exact_predictor_errors, log_speedups, noise_floor, pooled_log_sd


def _runs(sd: float, n: int, repeats: int, seed: int, model: str = "m") -> list[dict]:
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0.4, 3.0, n)              # each run its own speedup: the pooled sd ignores it
    return [{"model": model, "method": "eagle", "k": 2, "speedups": list(t * np.exp(rng.normal(0, sd, repeats)))}
            for t in truth]


def test_pooled_log_sd_recovers_the_repeats_scatter():
    """2000 runs of 3 repeats: 4000 degrees of freedom, so the estimate's relative standard error is
    1 / sqrt(2 * 4000) = 1.1 %; 5 % is 4.5 standard errors (two-sided p ~ 1e-5)."""
    sd, dof = pooled_log_sd(_runs(0.2, 2000, 3, seed=1))
    assert dof == 4000
    assert abs(sd / 0.2 - 1) < 0.05


def test_a_run_without_recorded_ratios_takes_its_repeats_against_its_baseline():
    run = {"repeats": [{"tpot_ms": 2.0}, {"tpot_ms": 4.0}], "baseline_repeats": [{"tpot_ms": 3.0}, {"tpot_ms": 4.0}]}
    assert np.allclose(log_speedups(run), [math.log(1.5), 0.0])


def test_no_noise_means_an_exact_predictor_has_no_error():
    e = exact_predictor_errors([(0.0, 3, 40)], (0.10, 0.20), draws=50)
    assert e["median_error"] == 0.0 and e["max_error"] == 0.0 and e["p_max_goal"] == 1.0


def test_the_max_goal_share_matches_the_median_of_three_order_statistic():
    """P(max over n runs <= g) = p^n, p = P(-ln(1+g) <= median <= -ln(1-g)), the median of 3 draws
    having CDF 3 F^2 - 2 F^3. The draws' share is binomial: within 4 of its standard errors."""
    sd, n, g, draws = 0.12, 20, 0.2, 20000
    med_cdf = lambda t: 3 * norm.cdf(t / sd) ** 2 - 2 * norm.cdf(t / sd) ** 3   # noqa: E731
    p = (med_cdf(-math.log(1 - g)) - med_cdf(-math.log(1 + g))) ** n
    got = exact_predictor_errors([(sd, 3, n)], (0.1, g), seed=7, draws=draws)["p_max_goal"]
    se = math.sqrt(p * (1 - p) / draws)
    assert abs(got - p) < 4 * se, (got, p)
    assert 0.05 < p < 0.95          # the case tests something: neither certain nor impossible


def test_noise_floor_pools_each_model_apart_and_skips_plain_runs():
    runs = _runs(0.05, 300, 3, seed=2, model="big") + _runs(0.3, 300, 3, seed=3, model="small")
    runs.append({"model": "big", "method": "plain", "k": 0, "speedups": [1.0, 10.0, 0.1]})
    nf = noise_floor(runs, (0.1, 0.2), draws=200)
    assert abs(nf["models"]["big"]["log_sd"] / 0.05 - 1) < 0.1
    assert abs(nf["models"]["small"]["log_sd"] / 0.3 - 1) < 0.1
    assert nf["models"]["big"]["runs"] == 300
    assert nf["models"]["small"]["exact"]["max_error"] > nf["models"]["big"]["exact"]["max_error"]
