"""Closed forms of speculative decoding (Leviathan et al. 2022)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.common.errors import SpecsightInputError
from simulator.speculation import spec_math as sm


def test_issue_figures():
    # alpha = 0.7, K = 3: (1 - 0.7^4) / 0.3 = 2.533 tokens per round; with c = 0.05: 2.533 / 1.15 = 2.20x
    assert sm.expected_tokens_per_round(0.7, 3) == pytest.approx(2.533, abs=5e-4)
    assert sm.speedup_batch1(0.7, 3, 0.05) == pytest.approx(2.2026, abs=5e-4)


@given(st.floats(0, 0.99), st.integers(0, 12))
@settings(max_examples=60, deadline=None)
def test_iid_equals_per_position_with_equal_rates(alpha, k):
    closed_form = sm.expected_tokens_per_round(alpha, k)
    assert sm.expected_tokens_per_position([alpha] * k) == pytest.approx(closed_form, rel=1e-9)


@given(st.lists(st.floats(0, 0.99), min_size=0, max_size=8))
@settings(max_examples=60, deadline=None)
def test_accept_length_distribution_sums_to_one_and_matches_mean(alphas):
    p = sm.accept_length_distribution(alphas)
    assert p.sum() == pytest.approx(1.0)
    assert (p >= 0).all()
    assert 1 + float(np.arange(len(p)) @ p) == pytest.approx(sm.expected_tokens_per_position(alphas))


def test_optimal_k_is_argmax_and_monotone_in_alpha():
    ks = np.arange(0, 33)
    for alpha, c in [(0.6, 0.05), (0.8, 0.05), (0.9, 0.01), (0.3, 0.5)]:
        k = sm.optimal_k(alpha, c)
        assert sm.speedup_batch1(alpha, k, c) == pytest.approx(sm.speedup_batch1(alpha, ks, c).max())
    assert sm.optimal_k(0.9, 0.05) >= sm.optimal_k(0.6, 0.05)
    assert sm.optimal_k(0.1, 1.0) == 0     # a draft as slow as the target never pays


def test_compute_increase_at_zero_k_is_one():
    assert sm.compute_increase(0.7, 0, 0.1) == pytest.approx(1.0)
    assert sm.compute_increase(0.7, 3, 0.05) > 1.0


def test_tree_depth_acceptance():
    assert sm.tree_depth_acceptance(0.5, 1) == 0.5
    assert sm.tree_depth_acceptance(0.5, 3) == pytest.approx(0.875)


@pytest.mark.parametrize("alpha", [-0.1, 1.0, 1.5, float("nan"), float("inf")])
def test_bad_alpha(alpha):
    with pytest.raises(SpecsightInputError, match="alpha"):
        sm.check_alpha(alpha)


@pytest.mark.parametrize("k", [-1, 2.5, "x"])
def test_bad_k(k):
    with pytest.raises(SpecsightInputError, match="k="):
        sm.check_k(k)


@given(st.floats(0.0, 0.99), st.integers(1, 8))
def test_candidate_alpha_inverts_the_tree_rule(depth_alpha, branches):
    a = sm.candidate_alpha(depth_alpha, branches)
    assert 0.0 <= a <= depth_alpha + 1e-12          # one candidate never accepts more than any of b
    assert sm.tree_depth_acceptance(a, branches) == pytest.approx(depth_alpha, abs=1e-12)


def test_expected_tokens_by_k_is_the_closed_form_at_every_k():
    np.testing.assert_allclose(sm.expected_tokens_by_k([0.7] * 5),
                               [sm.expected_tokens_per_round(0.7, k) for k in range(6)], rtol=1e-12)
    assert sm.expected_tokens_by_k([]).tolist() == [1.0]
    assert sm.expected_tokens([1.0, 1.0]) == 3.0                 # alpha = 1: K + 1, where the closed form divides by 0


def test_tree_rule_rejects_fewer_than_one_branch():
    with pytest.raises(SpecsightInputError, match="branches"):
        sm.tree_depth_acceptance(0.5, 0)
    with pytest.raises(SpecsightInputError, match="branches"):
        sm.tree_depth_acceptance([0.5], 0)
