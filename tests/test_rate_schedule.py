"""The `schedule` arrival process: a piecewise rate over a repeating period, its non-homogeneous
Poisson arrivals, and every bad field refused by name.

Distribution tests: counts of arrivals in disjoint windows of a Poisson process of rate lambda(t)
are independent Poisson variables with means Lambda(window) (the integral of the rate, computed
here by hand: rectangles or trapezoids, not by the code under test), so
X = sum (count - mean)^2 / mean is approximately chi-square with one degree of freedom per window
(every mean here is >= 100). Each test rejects at ALPHA = 1e-3 with a fixed seed; a wrong process
(homogeneous arrivals at the mean rate) must be rejected by the same test.
"""
import numpy as np
import pytest
from scipy import stats

from simulator.common.errors import SpecsightInputError
from simulator.workload.rate_schedule import RateSchedule
from simulator.workload.workload import WorkloadSpec, generate_requests
from tests.sampling_stats import ALPHA

ROWS = [[0, 2.0], [3600, 6.0], [7200, 0.0], [10800, 4.0]]     # requests/s; a silent third piece
PERIOD_S = 14400.0


def workload(arrival: dict, n: int | None = None) -> WorkloadSpec:
    return WorkloadSpec.from_mapping({"arrival": {"process": "schedule", **arrival}, "num_requests": n,
                                      "prompt_len": 10, "output_len": 5})


def poisson_counts_pvalue(counts: np.ndarray, means: np.ndarray) -> float:
    """P(chi-square_m >= X) for m independent Poisson counts with known means (all large)."""
    x = float(((counts - means) ** 2 / means).sum())
    return float(stats.chi2.sf(x, len(means)))


def window_means(rows, shape: str, period_s: float, edges: np.ndarray) -> np.ndarray:
    """Expected arrivals between consecutive `edges` (s, within whole periods), by hand."""
    starts = np.array([r[0] for r in rows] + [period_s], dtype=float)
    q = np.array([r[1] for r in rows], dtype=float)
    q_end = q if shape == "step" else np.append(q[1:], q[0])

    def rate(t):
        x = np.mod(t, period_s)
        i = np.searchsorted(starts, x, side="right") - 1
        return q[i] + (q_end[i] - q[i]) * (x - starts[i]) / (starts[i + 1] - starts[i])
    means = []
    for a, b in zip(edges[:-1], edges[1:]):
        lo = rate(np.array([a]))[0]
        hi = rate(np.array([np.nextafter(b, a)]))[0]           # the rate just inside the window's end
        means.append(0.5 * (lo + hi) * (b - a))                 # exact: the rate is linear inside a window
    return np.array(means)


def sub_windows(period_s: float, starts: list[float], periods: int, parts: int) -> np.ndarray:
    """Window edges: each piece cut into `parts` equal parts, over `periods` periods."""
    bounds = np.array(starts + [period_s], dtype=float)
    one = np.concatenate([np.linspace(a, b, parts + 1)[:-1] for a, b in zip(bounds[:-1], bounds[1:])])
    return np.concatenate([one + k * period_s for k in range(periods)] + [[periods * period_s]])


@pytest.mark.parametrize("shape", ["step", "linear"])
def test_counts_per_window_match_the_rate_integral(shape):
    sch = RateSchedule.from_rows(ROWS, shape, PERIOD_S)
    periods = 3
    edges = sub_windows(PERIOD_S, [r[0] for r in ROWS], periods, parts=4)
    means = window_means(ROWS, shape, PERIOD_S, edges)
    keep = means > 0
    n = int(periods * sch.requests_per_period + 10 * np.sqrt(periods * sch.requests_per_period))
    t = sch.arrivals(n, np.random.default_rng(2026))
    assert t[-1] > edges[-1]                      # every window lies before the last arrival
    assert np.all(np.diff(t) >= 0)
    counts = np.histogram(t, bins=edges)[0].astype(float)
    assert counts[~keep].sum() == 0               # no request while the rate is 0
    assert poisson_counts_pvalue(counts[keep], means[keep]) > ALPHA


def test_the_count_test_rejects_homogeneous_arrivals_at_the_mean_rate():
    sch = RateSchedule.from_rows(ROWS, "step", PERIOD_S)
    edges = sub_windows(PERIOD_S, [r[0] for r in ROWS], 3, parts=4)
    means = window_means(ROWS, "step", PERIOD_S, edges)
    rate = sch.requests_per_period / PERIOD_S
    t = np.cumsum(np.random.default_rng(2026).exponential(1.0 / rate, int(3.2 * sch.requests_per_period)))
    counts = np.histogram(t, bins=edges)[0].astype(float)
    keep = means > 0
    assert poisson_counts_pvalue(counts[keep], means[keep]) < ALPHA


@pytest.mark.parametrize("shape", ["step", "linear"])
def test_the_integral_and_its_inverse_in_closed_form(shape):
    sch = RateSchedule.from_rows(ROWS, shape, PERIOD_S)
    # Lambda at the piece boundaries: running sums of rectangles (step) or trapezoids (linear)
    knots = np.array([r[0] for r in ROWS] + [PERIOD_S])
    want = np.concatenate(([0.0], np.cumsum(window_means(ROWS, shape, PERIOD_S, knots))))
    np.testing.assert_allclose(sch.cumulative(knots), want, rtol=1e-12)
    assert sch.requests_per_period == pytest.approx(want[-1], rel=1e-12)
    # the period repeats, and Lambda(Lambda^-1(u)) = u everywhere, across periods
    t = np.linspace(0.0, PERIOD_S, 97)
    np.testing.assert_allclose(sch.cumulative(t + 2 * PERIOD_S), sch.cumulative(t) + 2 * want[-1], rtol=1e-12)
    u = np.linspace(0.0, 3.0 * want[-1], 1001)
    np.testing.assert_allclose(sch.cumulative(sch.inverse(u)), u, rtol=1e-9, atol=1e-7)
    # no arrival falls in the silent piece: the inverse skips it
    x = np.mod(sch.inverse(u), PERIOD_S)
    assert not np.any((x > 7200.0) & (x < 10800.0)) if shape == "step" else True


def test_compression_and_scale_equal_60_keep_the_count_and_divide_every_time():
    plain = RateSchedule.from_rows(ROWS, "linear", PERIOD_S)
    fast = RateSchedule.from_rows(ROWS, "linear", PERIOD_S, time_compression=60.0, rate_scale=60.0)
    assert fast.period_s == PERIOD_S / 60 and fast.requests_per_period == pytest.approx(plain.requests_per_period)
    a = plain.arrivals(5000, np.random.default_rng(7))
    b = fast.arrivals(5000, np.random.default_rng(7))
    np.testing.assert_allclose(b, a / 60.0, rtol=1e-9)
    # compression alone: the rates stay, the expected count falls 60-fold
    only = RateSchedule.from_rows(ROWS, "linear", PERIOD_S, time_compression=60.0)
    assert only.requests_per_period == pytest.approx(plain.requests_per_period / 60.0)
    assert only.qps == plain.qps


def test_num_requests_null_is_the_expected_count_and_same_seed_same_arrivals():
    arr = {"rates": ROWS, "period_s": PERIOD_S, "time_compression": 10}
    w = workload(arr)
    assert w.n_requests == round(RateSchedule.from_rows(ROWS, period_s=PERIOD_S,
                                                        time_compression=10).requests_per_period)
    assert workload(arr, n=123).n_requests == 123
    a = generate_requests(w, np.random.default_rng(42))
    b = generate_requests(workload(arr), np.random.default_rng(42))
    c = generate_requests(workload(arr), np.random.default_rng(43))
    assert len(a) == w.n_requests
    assert np.array_equal(a.arrival_s, b.arrival_s) and not np.array_equal(a.arrival_s, c.arrival_s)
    # the flat form (`arrival: schedule` with its keys beside it) is the same workload
    from simulator.scenario.scenario import load_scenario
    flat = load_scenario({"hardware": {"kind": "fixed", "target_step_s": 0.01}, "seed": 1,
                          "workload": {"arrival": "schedule", **arr, "prompt_len": 10, "output_len": 5}})
    assert flat.workload.schedule == w.schedule


BAD = [
    ({"rates": [[1, 2.0]]}, r"workload\.arrival\.rates\[0\]\[0\].*0"),
    ({"rates": [[0, 2.0], [50, 1.0], [50, 3.0]]}, r"workload\.arrival\.rates\[2\]\[0\].*increasing"),
    ({"rates": [[0, 2.0], [100, 1.0]], "period_s": 100}, r"workload\.arrival\.period_s"),
    ({"rates": [[0, 0.0], [100, 0.0]]}, r"workload\.arrival\.rates.*at least one rate > 0"),
    ({"rates": [[0, -1.0]]}, r"workload\.arrival\.rates\[0\]\[1\]"),
    ({"rates": [[0, 1.0, 2.0]]}, r"workload\.arrival\.rates\[0\]"),
    ({"rates": []}, r"workload\.arrival\.rates"),
    ({"rates": [[0, 1.0]], "shape": "cubic"}, r"workload\.arrival\.shape.*step"),
    ({"rates": [[0, 1.0]], "time_compression": 0}, r"workload\.arrival\.time_compression"),
    ({"rates": [[0, 1.0]], "rate_scale": 0}, r"workload\.arrival\.rate_scale"),
    ({"rates": [[0, 1.0]], "qps": 3}, r"workload\.arrival\.qps.*unknown"),
    ({}, r"workload\.arrival\.rates.*required"),
]


@pytest.mark.parametrize("arrival, match", BAD)
def test_every_bad_field_is_one_input_error_naming_it(arrival, match):
    with pytest.raises(SpecsightInputError, match=match):
        workload(arrival)


def test_python_callers_are_refused_by_field_too():
    with pytest.raises(SpecsightInputError, match=r"time_compression"):
        RateSchedule.from_rows(ROWS, time_compression=float("nan"))
    with pytest.raises(SpecsightInputError, match=r"workload\.arrival\.shape"):
        RateSchedule((0.0,), (1.0,), "spline")
    with pytest.raises(SpecsightInputError, match=r"workload\.arrival\.rates"):
        WorkloadSpec(arrival="schedule", prompt_len=None, output_len=None)
