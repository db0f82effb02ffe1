"""Closed-form speculative decoding math (pure functions, floats or numpy arrays).

Terms: a round drafts K tokens; the target verifies them in one pass and keeps the longest
accepted prefix plus one token (recovered at the first rejection, or the bonus token when all
K are accepted). alpha is the per-token acceptance rate (Leviathan et al. 2022, arXiv 2211.17192,
section 3.1: alpha = E[sum_x min(p(x), q(x))]); alpha_k the conditional acceptance of position k.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..common.errors import SpecsightInputError, require_int, require_range

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def check_alpha(alpha: float, field: str = "alpha") -> float:
    return require_range(field, alpha, 0.0, 1.0, hi_open=True)


def check_k(k: int, field: str = "k") -> int:
    return require_int(field, k, lo=0)


def expected_tokens_by_k(alphas: ArrayLike) -> np.ndarray:
    """[K + 1] E[tokens emitted per round] at each K = 0..K for conditional per-position rates
    alpha_1..alpha_K: 1 + sum_{k<=K} prod_{j<=k} alpha_j (1 at K = 0; valid at alpha = 1).
    The one writing of the rule: expected_tokens, the acceptance models and the goodput policy call it;
    expected_tokens_per_round is its closed form for one i.i.d. alpha."""
    return 1.0 + np.concatenate(([0.0], np.cumsum(np.cumprod(np.asarray(alphas, dtype=float)))))


def expected_tokens(alphas: ArrayLike) -> float:
    """E[tokens emitted per round] at K = len(alphas) (expected_tokens_by_k's last entry)."""
    return float(expected_tokens_by_k(alphas)[-1])


def expected_tokens_per_round(alpha: ArrayLike, k: ArrayLike) -> float | np.ndarray:
    """E[tokens emitted per round] = (1 - alpha^(K+1)) / (1 - alpha) (Leviathan et al. 2022, eq. 1):
    expected_tokens_by_k's closed form for one i.i.d. alpha < 1, on floats or numpy arrays."""
    alpha = np.asarray(alpha, dtype=float)
    out = (1.0 - alpha ** (np.asarray(k) + 1)) / (1.0 - alpha)
    return float(out) if out.ndim == 0 else out


def expected_tokens_per_position(alphas: Sequence[float]) -> float:
    """expected_tokens for conditional per-position rates alpha_1..alpha_K, each checked to lie in [0, 1)."""
    return expected_tokens([check_alpha(a, f"alphas[{i}]") for i, a in enumerate(alphas)])


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


def speedup_batch1(alpha: ArrayLike, k: ArrayLike, c: ArrayLike) -> float | np.ndarray:
    """Walltime improvement at batch 1 (Leviathan et al. 2022, Thm 3.8):
    (1 - alpha^(K+1)) / ((1 - alpha)(K c + 1)), c = draft step time / target step time."""
    return expected_tokens_per_round(alpha, k) / (np.asarray(k) * c + 1.0)


def optimal_k(alpha: float, c: float, k_max: int = 32) -> int:
    """The integer K in 0..k_max maximising speedup_batch1 (K = 0 is plain decoding)."""
    check_alpha(alpha)
    require_range("c", c, 0.0)
    ks = np.arange(0, require_int("k_max", k_max, lo=0) + 1)
    return int(ks[np.argmax(speedup_batch1(alpha, ks, c))])


def compute_increase(alpha: ArrayLike, k: ArrayLike, c_hat: ArrayLike) -> float | np.ndarray:
    """Factor by which total arithmetic grows (Leviathan et al. 2022, Thm 3.11):
    (1 - alpha)(K c_hat + K + 1) / (1 - alpha^(K+1)), c_hat = draft/target arithmetic per token."""
    return (1.0 - np.asarray(alpha)) * (np.asarray(k) * c_hat + np.asarray(k) + 1.0) / \
        (1.0 - np.asarray(alpha) ** (np.asarray(k) + 1))


def tree_depth_acceptance(alpha: ArrayLike, branches: int) -> float | np.ndarray:
    """A depth of a tree is accepted if any of its `branches` independent candidates is:
    1 - (1 - alpha)^b. alpha: a float (checked to lie in [0, 1)), or rates as a sequence or numpy
    array (per position, per request; returned as a float array of the same shape)."""
    b = require_int("branches", branches, lo=1)
    if isinstance(alpha, (list, tuple, np.ndarray)):
        return 1.0 - (1.0 - np.asarray(alpha, dtype=float)) ** b
    return 1.0 - (1.0 - check_alpha(alpha)) ** b


def candidate_alpha(depth_alpha: float, branches: int) -> float:
    """Inverse of tree_depth_acceptance: the per-candidate alpha whose any-of-`branches` rate is
    `depth_alpha` (a tree preset's published per-depth rate, turned back into the per-candidate
    alpha the analytic formulas take, so the tree rule is not applied twice)."""
    if branches < 1:
        raise SpecsightInputError("branches", branches, "must be >= 1")
    return 1.0 - (1.0 - check_alpha(depth_alpha)) ** (1.0 / branches)
