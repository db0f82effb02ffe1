"""Closed-form speculative decoding math (pure functions, floats or numpy arrays).

Terms: a round drafts K tokens; the target verifies them in one pass and keeps the longest
accepted prefix plus one token (recovered at the first rejection, or the bonus token when all
K are accepted). alpha is the per-token acceptance rate (Leviathan et al. 2022, arXiv 2211.17192,
section 3.1: alpha = E[sum_x min(p(x), q(x))]); alpha_k the conditional acceptance of position k.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .errors import SpecsightInputError, require_int, require_range


def check_alpha(alpha: float, field: str = "alpha") -> float:
    return require_range(field, alpha, 0.0, 1.0, hi_open=True)


def check_k(k: int, field: str = "k") -> int:
    return require_int(field, k, lo=0)


def expected_tokens_per_round(alpha, k):
    """E[tokens emitted per round] = (1 - alpha^(K+1)) / (1 - alpha) (Leviathan et al. 2022, eq. 1)."""
    alpha = np.asarray(alpha, dtype=float)
    out = (1.0 - alpha ** (np.asarray(k) + 1)) / (1.0 - alpha)
    return float(out) if out.ndim == 0 else out


def expected_tokens_per_position(alphas: Sequence[float]) -> float:
    """1 + sum_k prod_{j<=k} alpha_j for conditional per-position rates alpha_1..alpha_K."""
    total, run = 1.0, 1.0
    for i, a in enumerate(alphas):
        run *= check_alpha(a, f"alphas[{i}]")
        total += run
    return total


def accept_length_distribution(alphas: Sequence[float]) -> np.ndarray:
    """P(exactly a drafts accepted), a = 0..K, for conditional rates alpha_1..alpha_K."""
    k = len(alphas)
    probs = np.zeros(k + 1)
    surv = 1.0
    for a_idx, a in enumerate(alphas):
        probs[a_idx] = surv * (1.0 - a)
        surv *= a
    probs[k] = surv
    return probs


def speedup_batch1(alpha, k, c):
    """Walltime improvement at batch 1 (Leviathan et al. 2022, Thm 3.8):
    (1 - alpha^(K+1)) / ((1 - alpha)(K c + 1)), c = draft step time / target step time."""
    return expected_tokens_per_round(alpha, k) / (np.asarray(k) * c + 1.0)


def optimal_k(alpha: float, c: float, k_max: int = 32) -> int:
    """The integer K in 0..k_max maximising speedup_batch1 (K = 0 is plain decoding)."""
    check_alpha(alpha)
    require_range("c", c, 0.0)
    ks = np.arange(0, require_int("k_max", k_max, lo=0) + 1)
    return int(ks[np.argmax(speedup_batch1(alpha, ks, c))])


def compute_increase(alpha, k, c_hat):
    """Factor by which total arithmetic grows (Leviathan et al. 2022, Thm 3.11):
    (1 - alpha)(K c_hat + K + 1) / (1 - alpha^(K+1)), c_hat = draft/target arithmetic per token."""
    return (1.0 - np.asarray(alpha)) * (np.asarray(k) * c_hat + np.asarray(k) + 1.0) / \
        (1.0 - np.asarray(alpha) ** (np.asarray(k) + 1))


def tree_depth_acceptance(alpha: float, branches: int) -> float:
    """A depth is accepted if any of `branches` independent candidates is: 1 - (1 - alpha)^b."""
    if branches < 1:
        raise SpecsightInputError("branches", branches, "must be >= 1")
    return 1.0 - (1.0 - check_alpha(alpha)) ** branches


def candidate_alpha(depth_alpha: float, branches: int) -> float:
    """Inverse of tree_depth_acceptance: the per-candidate alpha whose any-of-`branches` rate is
    `depth_alpha` (a tree preset's published per-depth rate, turned back into the per-candidate
    alpha the analytic formulas take, so the tree rule is not applied twice)."""
    if branches < 1:
        raise SpecsightInputError("branches", branches, "must be >= 1")
    return 1.0 - (1.0 - check_alpha(depth_alpha)) ** (1.0 / branches)
