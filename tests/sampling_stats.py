"""Goodness-of-fit helpers for the sampling tests (chi-square against exact probabilities)."""
from __future__ import annotations

import numpy as np
from scipy import stats

# Every distribution test rejects at this significance level (two-sided intervals use the
# matching normal quantile): with about 20 seeded distribution tests, a correct kernel fails one
# by chance with probability about 2 %, and a seed that passes keeps passing (tests are seeded).
ALPHA = 1e-3
Z_ALPHA = float(stats.norm.isf(ALPHA / 2))  # 3.29: two-sided normal quantile at ALPHA


def chisquare_pvalue(counts, probs, min_expected: float = 5.0) -> float:
    """Pearson chi-square p-value of observed `counts` against exact `probs` (same length).

    Cells of probability 0 must have count 0 (asserted: drawing an impossible token is a hard
    failure, not a statistical one); cells expecting fewer than `min_expected` are pooled.
    """
    counts = np.asarray(counts, dtype=float)
    probs = np.asarray(probs, dtype=float)
    impossible = probs <= 0
    assert counts[impossible].sum() == 0, f"drew {counts[impossible].sum():.0f} tokens of probability 0"
    n = counts.sum()
    expected = n * probs[~impossible] / probs[~impossible].sum()
    observed = counts[~impossible]
    small = expected < min_expected
    if small.any():
        expected = np.append(expected[~small], expected[small].sum())
        observed = np.append(observed[~small], observed[small].sum())
    if expected.size < 2:
        return 1.0  # one possible outcome: nothing to test beyond the zero-probability check
    return float(stats.chisquare(observed, expected).pvalue)


def total_variation(counts, probs) -> float:
    """0.5 * sum |empirical - exact|."""
    counts = np.asarray(counts, dtype=float)
    return 0.5 * float(np.abs(counts / counts.sum() - np.asarray(probs, dtype=float)).sum())
