"""calibrate/acceptance_source.py: kernel-backed accept lengths against the closed form.

With i.i.d. positions the accepted count is min(Geometric, k), so the mean tokens per round is
(1 - alpha^(k+1)) / (1 - alpha) with alpha = E[sum min(p, q)]. Intervals are two-sided at
ALPHA = 1e-3 and include the Monte Carlo error of alpha itself.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sampling_stats import ALPHA, Z_ALPHA

from calibrate.acceptance_source import KernelAcceptanceSource, overlap_for_alpha

ROUNDS = 40_000  # verify rounds per closed-form test


@pytest.mark.parametrize("overlap, k", [(0.3, 3), (0.8, 5)])
def test_mean_tokens_per_round_matches_the_closed_form(overlap, k):
    source = KernelAcceptanceSource(vocab_size=64, overlap=overlap, k_max=8, seed=0)
    accepted = source.sample_accept_lengths(ROUNDS, k, np.random.default_rng(1))
    assert accepted.dtype == np.int64 and accepted.shape == (ROUNDS,)
    assert accepted.min() >= 0 and accepted.max() <= k
    alpha, alpha_se = source.expected_alpha(), source.expected_alpha_stderr()
    closed_form = source.expected_tokens_per_round(k)  # (1 - alpha^(k+1)) / (1 - alpha)
    # d/d alpha of the closed form, to carry alpha's Monte Carlo error into the interval
    slope = sum(j * alpha ** (j - 1) for j in range(1, k + 1))
    half_width = Z_ALPHA * math.sqrt(accepted.var() / ROUNDS + (slope * alpha_se) ** 2)
    mean_tokens = accepted.mean() + 1
    assert abs(mean_tokens - closed_form) <= half_width, (
        f"mean tokens/round {mean_tokens:.4f} vs (1 - a^(k+1))/(1 - a) = {closed_form:.4f} at alpha "
        f"{alpha:.4f} (+-{half_width:.4f}, two-sided alpha={ALPHA})")
    # and the first position alone is accepted with probability alpha
    first = (accepted >= 1).mean()
    first_half_width = Z_ALPHA * math.sqrt(alpha * (1 - alpha) / ROUNDS + alpha_se ** 2)
    assert abs(first - alpha) <= first_half_width


def test_overlap_for_alpha_hits_the_requested_alpha():
    source = KernelAcceptanceSource.for_alpha(0.7, vocab_size=64, k_max=4, seed=3)
    assert 0.0 < source.overlap < 1.0
    # bisection ran on 20k draws; expected_alpha uses 50k others: both within Monte Carlo error
    assert abs(source.expected_alpha() - 0.7) < 0.01, source.expected_alpha()


def test_alpha_grows_with_overlap_and_reaches_one():
    alphas = [KernelAcceptanceSource(32, rho, 2, seed=0).expected_alpha() for rho in (0.0, 0.5, 0.9, 1.0)]
    assert alphas == sorted(alphas) and alphas[-1] == pytest.approx(1.0, abs=1e-6)
    assert KernelAcceptanceSource(32, 1.0, 3).sample_accept_lengths(500, 3, torch.Generator()).min() == 3


def test_torch_generator_is_reproducible_and_k_zero_is_empty():
    source = KernelAcceptanceSource(16, 0.5, 4, seed=0)
    a = source.sample_accept_lengths(300, 4, torch.Generator().manual_seed(5))
    b = source.sample_accept_lengths(300, 4, torch.Generator().manual_seed(5))
    assert np.array_equal(a, b)
    assert source.sample_accept_lengths(7, 0, np.random.default_rng(0)).tolist() == [0] * 7


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match=r"overlap=1.5: must lie in \[0, 1\]"):
        KernelAcceptanceSource(16, 1.5, 4)
    with pytest.raises(ValueError, match=r"k=5: must be an int in 0..k_max = 0..4"):
        KernelAcceptanceSource(16, 0.5, 4).sample_accept_lengths(10, 5, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"alpha=0.01: below"):
        overlap_for_alpha(0.01, vocab_size=16, sharpness=1.0)
