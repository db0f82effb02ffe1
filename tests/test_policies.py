"""Speculation policies: table lookups, a scripted hysteresis trajectory, goodput closed forms."""
import numpy as np
import pytest

from simulator.speculation.acceptance import IIDAcceptance
from simulator.speculation.policies import (
    AdaptivePolicy,
    BatchSchedulePolicy,
    GoodputPolicy,
    OffPolicy,
    PolicyState,
    StaticPolicy,
)
from simulator.speculation.policy_spec import PolicySpec
from simulator.speculation.spec_math import optimal_k

STATE = PolicyState()


def test_static_and_off():
    assert PolicySpec.from_mapping(None, k_max=5).choose_k(32, STATE) == 5
    assert PolicySpec.from_mapping({"kind": "static", "k": 2}, k_max=5).choose_k(1, STATE) == 2
    p = PolicySpec.from_mapping("off", k_max=5)
    assert isinstance(p, OffPolicy) and p.choose_k(1, STATE) == 0 and p.k_max == 5


def test_batch_schedule_lookups_and_zero_past_last_threshold():
    p = PolicySpec.from_mapping({"kind": "batch_schedule", "schedule": [[4, 5], [16, 3], [64, 1]]}, k_max=5)
    assert isinstance(p, BatchSchedulePolicy)
    got = {b: p.choose_k(b, STATE) for b in (1, 4, 5, 16, 17, 64, 65, 1000)}
    assert got == {1: 5, 4: 5, 5: 3, 16: 3, 17: 1, 64: 1, 65: 0, 1000: 0}


def test_adaptive_hysteresis_trajectory():
    # ema_decay 0.5; up 0.8; down 0.4; K in [1, 4], starting at 2.
    p = PolicySpec.from_mapping({"kind": "adaptive", "up": 0.8, "down": 0.4, "ema_decay": 0.5,
                                 "k_min": 1, "k_init": 2}, k_max=4)
    assert isinstance(p, AdaptivePolicy)
    # accepted per sequence for each round; the round proposes the policy's current K.
    # ratio r, ema after the round, then K:
    #   2/2=1    ema 1        -> up to 3
    #   3/3=1    ema 1        -> 4
    #   4/4=1    ema 1        -> stays 4 (k_max)
    #   0        ema .5       -> holds (inside the band)
    #   0        ema .25      -> 3
    #   0        ema .125     -> 2
    #   1/2      ema .3125    -> 1
    #   1/1      ema .65625   -> holds 1
    #   1/1      ema .828125  -> 2
    script = [[2, 2], [3], [4], [0], [0], [0], [1], [1], [1]]
    ks = [p.choose_k(8, STATE)]
    for acc in script:
        p.observe(ks[-1], np.array(acc))
        ks.append(p.choose_k(8, STATE))
    assert ks == [2, 3, 4, 4, 4, 3, 2, 1, 1, 2]
    assert p.ema == pytest.approx(0.828125)
    p.reset()
    assert p.choose_k(8, STATE) == 2 and p.ema is None


def test_goodput_counts_attempts_per_position():
    g = GoodputPolicy(k_max=3, prior_alphas=[0.5, 0.5, 0.5], prior_strength=1.0)
    g.observe(3, np.array([0, 1, 3]))
    # position 1 reached by all 3, accepted by 2; position 2 reached by 2, accepted by 1; position 3: 1 of 1
    np.testing.assert_array_equal(g.attempts, [3, 2, 1])
    np.testing.assert_array_equal(g.successes, [2, 1, 1])
    np.testing.assert_allclose(g.alpha_hat(), [(0.5 + 2) / 4, (0.5 + 1) / 3, (0.5 + 1) / 2])


def test_goodput_picks_zero_when_verify_is_steep_and_kmax_when_free():
    prior = IIDAcceptance(0.7).alphas(6)
    g = PolicySpec.from_mapping({"kind": "goodput", "prior_strength": 1e9}, k_max=6, prior_alphas=prior)
    assert isinstance(g, GoodputPolicy)
    steep = PolicyState(round_time_s=lambda b, k: 0.01 * (1 + 10 * k))   # each draft costs 10 steps
    free = PolicyState(round_time_s=lambda b, k: 0.01)                  # verify costs nothing extra
    assert g.choose_k(16, steep) == 0
    assert g.choose_k(16, free) == 6


@pytest.mark.parametrize("alpha, c", [(0.8, 0.05), (0.6, 0.2), (0.9, 0.01), (0.5, 0.6)])
def test_goodput_matches_leviathan_optimal_k(alpha, c):
    # round_time = t (1 + c K): goodput's argmax is Leviathan et al.'s batch-1 optimal K (Thm 3.8)
    g = GoodputPolicy(k_max=12, prior_alphas=np.full(12, alpha), prior_strength=1e12)
    state = PolicyState(round_time_s=lambda b, k: 0.02 * (1 + c * k))
    assert g.choose_k(4, state) == optimal_k(alpha, c, k_max=12)


def test_goodput_learns_online_acceptance():
    # prior says 0.9; the drafter really accepts 0.3 i.i.d.: after 20,000 sequence-rounds each
    # estimate sits within 4 SE (binomial, on its own attempts) plus the prior's pull of 0.3, and
    # K falls to Leviathan's optimum for alpha 0.3 (K = 1 at c = 0.2; K = 4 under the prior)
    model = IIDAcceptance(0.3)
    g = GoodputPolicy(k_max=4, prior_alphas=np.full(4, 0.9), prior_strength=10)
    state = PolicyState(round_time_s=lambda b, k: 0.01 * (1 + 0.2 * k))
    k_before = g.choose_k(8, state)
    rng = np.random.default_rng(0)
    for _ in range(500):
        g.observe(4, model.sample(np.arange(40), 4, rng))
    n = g.attempts[:2]
    assert n[0] == 20_000
    tol = 4 * np.sqrt(0.21 / n) + 10 * 0.6 / n
    assert np.all(np.abs(g.alpha_hat()[:2] - 0.3) < tol)
    assert k_before == optimal_k(0.9, 0.2, k_max=4) == 4
    assert g.choose_k(8, state) == optimal_k(0.3, 0.2, k_max=4) == 1
    g.reset()
    np.testing.assert_allclose(g.alpha_hat(), 0.9)


def test_goodput_needs_round_time():
    with pytest.raises(ValueError, match="round_time_s"):
        GoodputPolicy(k_max=2).choose_k(4, PolicyState())


def test_static_policy_direct():
    assert StaticPolicy(4).choose_k(100, STATE) == 4


@pytest.mark.parametrize("raw, match", [
    ({"kind": "adaptve"}, r"policy\.kind.*adaptive"),
    ({"kind": "static", "k": 9}, r"policy\.k\b"),
    ({"kind": "static", "K": 2}, r"policy\.K.*unknown"),
    ({"kind": "batch_schedule"}, r"policy\.schedule"),
    ({"kind": "batch_schedule", "schedule": [[8, 3], [4, 1]]}, r"policy\.schedule\[1\]\[0\].*increase"),
    ({"kind": "batch_schedule", "schedule": [[8, 7]]}, r"policy\.schedule\[0\]\[1\]"),
    ({"kind": "batch_schedule", "schedule": [[8]]}, r"policy\.schedule\[0\]"),
    ({"kind": "adaptive", "up": 0.3, "down": 0.5}, r"policy\.down"),
    ({"kind": "adaptive", "k_min": 0}, r"policy\.k_min"),
    ({"kind": "adaptive", "ema_decay": 1.0}, r"policy\.ema_decay"),
    ({"kind": "goodput", "prior_strength": -1}, r"policy\.prior_strength"),
    (["static"], r"policy="),
])
def test_bad_input_names_the_key_path(raw, match):
    with pytest.raises(ValueError, match=match):
        PolicySpec.from_mapping(raw, k_max=4)


def iteration(decode_s, prefill_s=0.0, once_s=0.0):
    """A PolicyState.iteration_s from a decode-round time per K ([k_max + 1] s), a prefill time shared
    by every K (s) and a one-off catch-up for every K >= 1 (s)."""
    decode_s = np.asarray(decode_s, dtype=float)
    once = np.where(np.arange(decode_s.size) > 0, once_s, 0.0)
    return lambda tokens: (decode_s + prefill_s, decode_s, once)


@pytest.mark.parametrize("alpha, c", [(0.8, 0.05), (0.6, 0.2), (0.5, 0.6)])
def test_goodput_prices_only_what_k_adds_to_a_pass_with_prefill(alpha, c):
    # decode round t (1 + c K) plus a prefill part P shared by every K: P drops out of the choice,
    # which stays Leviathan's optimum; maximising tokens / (decode + P) would pick a larger K
    g = GoodputPolicy(k_max=12, prior_alphas=np.full(12, alpha), prior_strength=1e12)
    decode = 0.02 * (1 + c * np.arange(13))
    for prefill in (0.0, 0.2):
        state = PolicyState(iteration_s=iteration(decode, prefill), remaining_tokens=1e9)
        assert g.choose_k(4, state) == optimal_k(alpha, c, k_max=12)
    tokens = g.expected_tokens()
    assert int(np.argmax(tokens / (decode + 0.2))) > optimal_k(alpha, c, k_max=12)


def test_goodput_amortises_the_catch_up_over_the_remaining_tokens():
    # alpha 0.8, round time 0.02 (1 + 0.05 K): K = 4 pays (Leviathan) without catch-up. A one-off
    # catch-up of 0.1 s (5 plain rounds) is worth paying for sequences with 500 tokens to go, not
    # for ones with 5; charging it whole to one round would turn speculation off in both.
    g = GoodputPolicy(k_max=6, prior_alphas=np.full(6, 0.8), prior_strength=1e12)
    decode = 0.02 * (1 + 0.05 * np.arange(7))
    k_free = optimal_k(0.8, 0.05, k_max=6)
    assert g.choose_k(8, PolicyState(iteration_s=iteration(decode, once_s=0.1), remaining_tokens=500)) == k_free
    assert g.choose_k(8, PolicyState(iteration_s=iteration(decode, once_s=0.1), remaining_tokens=5)) == 0
    # closed form of the switch (B = 8, v = decode_K* / (B E_K*)): on iff v B E_K - t_K - once E_K / R > v B - t_0
    tokens = g.expected_tokens()
    v = np.min(decode / (8 * tokens))
    for r in (5, 50, 500):
        net = v * 8 * tokens - decode - 0.1 * np.minimum(1, tokens / r) * (np.arange(7) > 0)
        state = PolicyState(iteration_s=iteration(decode, once_s=0.1), remaining_tokens=r)
        assert g.choose_k(8, state) == int(np.argmax(net))


def test_each_kind_declares_what_it_needs():
    decl = {kind: (p.speculates, p.k_by_batch, p.observes_rounds, p.prices_rounds)
            for kind, p in ((k, PolicySpec.from_mapping(raw, k_max=3)) for k, raw in
                            (("static", "static"), ("off", "off"),
                             ("batch_schedule", {"kind": "batch_schedule", "schedule": [[4, 2]]}),
                             ("adaptive", "adaptive"), ("goodput", "goodput")))}
    assert decl == {"static": (True, True, False, False), "off": (False, True, False, False),
                    "batch_schedule": (True, True, False, False), "adaptive": (True, False, True, False),
                    "goodput": (True, False, True, True)}
