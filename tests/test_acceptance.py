"""Acceptance models against closed forms, hand examples and published figures.

Monte Carlo checks use fixed seeds; tolerances are stated in standard errors (>= 4 SE, two-sided
p < 1e-4 for a correct sampler) or as the brief's 1 % on >= 20,000 rounds (>= 5 SE here).
"""
import math

import numpy as np
import pytest

from simulator.common.errors import SpecsightInputError
from simulator.speculation.acceptance import (
    BetaAcceptance,
    IIDAcceptance,
    KernelAcceptance,
    PerPositionAcceptance,
    PrefixBlockSampler,
    TreeAcceptance,
    expected_tokens,
    sample_prefix_accepts,
    tree_acceptance,
    use_kernel_source,
)
from simulator.speculation.acceptance_presets import PRESETS, alpha_for_tau
from simulator.speculation.acceptance_spec import AcceptanceSpec
from simulator.speculation.acceptance_trace import TraceAcceptance, alphas_from_accept_lengths, alphas_from_counters
from simulator.speculation.spec_math import accept_length_distribution, expected_tokens_per_round, tree_depth_acceptance


def conditional_rates(accepted, k):
    """Empirical alpha_j = #(A >= j) / #(A >= j - 1), j = 1..k, and their standard errors."""
    rates, ses = [], []
    for j in range(1, k + 1):
        n = np.count_nonzero(accepted >= j - 1)
        p = np.count_nonzero(accepted >= j) / n
        rates.append(p)
        ses.append(math.sqrt(p * (1 - p) / n))
    return np.array(rates), np.array(ses)


@pytest.mark.parametrize("alpha, k", [(0.8, 4), (0.6, 7), (0.3, 2)])
def test_iid_mean_tokens_within_one_percent_of_closed_form(alpha, k):
    n = 40_000
    m = IIDAcceptance(alpha).bind(n, np.random.default_rng(0))
    acc = m.sample(np.arange(n), k, np.random.default_rng(1))
    assert acc.dtype == np.int64 and acc.min() >= 0 and acc.max() <= k
    closed = expected_tokens_per_round(alpha, k)
    assert abs(1 + acc.mean() - closed) / closed < 0.01
    assert m.expected_tokens(k) == pytest.approx(closed)
    # the whole accept-length distribution: each P(A = a) within 4 SE
    p = accept_length_distribution([alpha] * k)
    emp = np.bincount(acc, minlength=k + 1) / n
    assert np.all(np.abs(emp - p) < 4 * np.sqrt(p * (1 - p) / n) + 1e-12)


def test_per_position_empirical_conditional_rates_match():
    m = PerPositionAcceptance([0.9, 0.6, 0.3])
    np.testing.assert_allclose(m.alphas(5), [0.9, 0.6, 0.3, 0.3, 0.3])    # the last repeats
    n = 50_000
    acc = m.sample(np.zeros(n, dtype=np.int64), 5, np.random.default_rng(2))
    rates, ses = conditional_rates(acc, 5)
    assert np.all(np.abs(rates - m.alphas(5)) < 4 * ses)


def test_beta_per_request_mean_and_population_rates():
    n = 40_000
    m = BetaAcceptance(alpha=0.7, concentration=4.0).bind(n, np.random.default_rng(3))
    a, b = 0.7 * 4, 0.3 * 4
    sd = math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
    assert abs(m.request_alpha.mean() - 0.7) < 4 * sd / math.sqrt(n)
    # one round per request at K = 3: conditional rates follow (a + j - 1) / (a + b + j - 1)
    acc = m.sample(np.arange(n), 3, np.random.default_rng(4))
    rates, ses = conditional_rates(acc, 3)
    np.testing.assert_allclose(m.alphas(3), [a / (a + b), (a + 1) / (a + b + 1), (a + 2) / (a + b + 2)])
    assert np.all(np.abs(rates - m.alphas(3)) < 4 * ses)
    # a request keeps its own alpha: high-alpha requests accept more
    hi = m.request_alpha > 0.9
    many = m.sample(np.repeat(np.arange(n), 1), 1, np.random.default_rng(5))
    assert many[hi].mean() > many[~hi].mean()


def test_block_sampler_draws_exactly_what_per_round_sampling_draws():
    # The engine's fast path hands out rows of pre-drawn blocks and rewinds the generator when K
    # changes or a block runs short. Rounds of varying batch and K (including K changes mid-block,
    # blocks running out, and batches larger than a block) must give the same accepted counts, in
    # the same order, as one sample_prefix_accepts call per round on one generator, and the
    # generator must end where per-round sampling leaves it.
    m = PerPositionAcceptance([0.9, 0.7, 0.5, 0.3, 0.8])
    plan = [(7, 3)] * 30 + [(1, 1), (64, 5), (200, 5)] + [(50, 5)] * 40 + [(3, 2), (3, 3), (130, 3)] * 5
    fast = PrefixBlockSampler(m.alphas, np.random.default_rng(11), k_max=5)
    ref_rng = np.random.default_rng(11)
    hist = np.zeros((6, 6), dtype=np.int64)
    for b, k in plan:
        em, total = fast.take(b, k)
        ref = sample_prefix_accepts(np.broadcast_to(m.alphas(k), (b, k)), ref_rng)
        np.testing.assert_array_equal(em, ref + 1)
        assert total == int(ref.sum()) + b
        hist[k, : k + 1] += np.bincount(ref, minlength=k + 1)
    np.testing.assert_array_equal(fast.counts(), hist)
    fast.take(1, 4)                      # a K change opens a block at the per-round position
    ref_rng.random((1, 4))
    fast._refill(1, 1)                   # closing a block early rewinds to just after its rows
    assert fast.state0 == ref_rng.bit_generator.state


def test_beta_requires_bind():
    with pytest.raises(RuntimeError, match="bind"):
        BetaAcceptance(0.5, 2.0).sample(np.arange(3), 2, np.random.default_rng(0))


def test_sampler_edge_cases():
    rng = np.random.default_rng(0)
    assert IIDAcceptance(0.5).sample(np.arange(4), 0, rng).tolist() == [0, 0, 0, 0]
    assert IIDAcceptance(0.5).sample(np.arange(0), 3, rng).shape == (0,)
    assert IIDAcceptance(1.0).sample(np.arange(5), 3, rng).tolist() == [3] * 5
    assert IIDAcceptance(0.0).sample(np.arange(5), 3, rng).tolist() == [0] * 5
    assert sample_prefix_accepts(np.array([[1.0, 0.0, 1.0]]), rng).tolist() == [1]
    assert expected_tokens(np.ones(4)) == 5.0


def test_seeded_sampling_is_deterministic():
    m = PerPositionAcceptance([0.8, 0.5])
    a = m.sample(np.arange(100), 4, np.random.default_rng(9))
    b = m.sample(np.arange(100), 4, np.random.default_rng(9))
    assert np.array_equal(a, b)


def test_tree_rule_on_per_position_rates():
    np.testing.assert_allclose(tree_depth_acceptance([0.6, 0.5], 3), [1 - 0.4 ** 3, 1 - 0.5 ** 3])
    np.testing.assert_allclose(tree_depth_acceptance([0.6], 1), [0.6])
    # per request, alpha 1
    np.testing.assert_allclose(tree_depth_acceptance(np.array([[0.6], [1.0]]), 2), [[0.84], [1.0]])


def test_tree_acceptance_folds_branches_into_per_token_models_only():
    # per-token models: a depth is accepted if any of b branches is, 1 - (1 - alpha)^b
    t = tree_acceptance(IIDAcceptance(0.5), 2)
    np.testing.assert_allclose(t.alphas(3), [0.75, 0.75, 0.75])
    assert t.is_population and t.per_depth
    assert tree_acceptance(t, 2) is t                      # never folded twice
    assert tree_acceptance(IIDAcceptance(0.5), 1).alphas(2).tolist() == [0.5, 0.5]
    # a tree preset's figure is already the any-branch rate: tau 6.13 at depth 7 stays 6.13
    preset = AcceptanceSpec.from_mapping("eagle3-llama-3.1-8b-mtbench")
    assert tree_acceptance(preset, 4) is preset
    assert tree_acceptance(preset, 4).expected_tokens(7) == pytest.approx(6.13, abs=1e-9)
    # a per-token preset (not a tree figure) is folded
    qwen = AcceptanceSpec.from_mapping("qwen3-next-mtp-k3")
    assert isinstance(tree_acceptance(qwen, 2), TreeAcceptance)


def test_tree_of_beta_uses_each_requests_own_alpha():
    # Request r has A_r ~ Beta(a, b); its depth is accepted with 1 - (1 - A_r)^m (m branches).
    # Over requests: P(depth 1 accepted) = 1 - E[(1 - A)^m] = 1 - prod_{i<m} (b + i) / (a + b + i)
    # (Beta moments), which is not the tree rule on the population rate a / (a + b).
    n, m = 60_000, 3
    a, b = 0.5 * 2.0, 0.5 * 2.0
    t = tree_acceptance(BetaAcceptance(alpha=0.5, concentration=2.0), m).bind(n, np.random.default_rng(6))
    assert not t.is_population
    acc = t.sample(np.arange(n), 1, np.random.default_rng(7))
    closed = 1.0 - np.prod([(b + i) / (a + b + i) for i in range(m)])          # 0.75
    population = float(tree_depth_acceptance([a / (a + b)], m)[0])                        # 0.875
    se = math.sqrt(closed * (1 - closed) / n)
    assert abs(acc.mean() - closed) < 4 * se
    assert abs(population - closed) > 20 * se


def test_counter_conversion_hand_example(tmp_path):
    # 100 rounds; position 0 accepted 80 times, position 1 60, position 2 30:
    # alpha_1 = 80/100, alpha_2 = 60/80, alpha_3 = 30/60
    np.testing.assert_allclose(alphas_from_counters(100, np.array([80, 60, 30])), [0.8, 0.75, 0.5])
    f = tmp_path / "vllm.csv"
    f.write_text("num_drafts,num_accepted_tokens_per_pos_0,num_accepted_tokens_per_pos_1,num_accepted_tokens_per_pos_2\n"
                 "40,32,24,12\n60,48,36,18\n")
    m = AcceptanceSpec.from_mapping({"model": "trace", "path": str(f)})
    assert isinstance(m, TraceAcceptance) and m.format == "vllm_counters" and m.rounds == 100
    np.testing.assert_allclose(m.alphas(3), [0.8, 0.75, 0.5])
    cum = AcceptanceSpec.from_mapping({"model": "trace", "path": str(f), "counters": "cumulative"})
    np.testing.assert_allclose(cum.alphas(3), [0.8, 0.75, 0.5])     # last row: 48/60, 36/48, 18/36


def test_accept_length_conversion_hand_example(tmp_path):
    # rows (accepted, k): (1,1) (0,2) (2,3) (1,3)
    # alpha_1: reached by all 4, accepted by 3 -> 0.75
    # alpha_2: reached by k >= 2 and accepted >= 1: (2,3), (1,3) -> accepted by (2,3) -> 0.5
    # alpha_3: reached by (2,3) only, never accepted -> 0.0
    acc, k = np.array([1, 0, 2, 1]), np.array([1, 2, 3, 3])
    np.testing.assert_allclose(alphas_from_accept_lengths(acc, k), [0.75, 0.5, 0.0])
    f = tmp_path / "acc.csv"
    f.write_text("accepted,k\n1,1\n0,2\n2,3\n1,3\n")
    alphas = AcceptanceSpec.from_mapping({"model": "trace", "path": str(f)}).alphas(3)
    np.testing.assert_allclose(alphas, [0.75, 0.5, 0.0])


def test_trace_resampling_reproduces_recorded_distribution(tmp_path):
    rec = PerPositionAcceptance([0.85, 0.7, 0.55, 0.4]).sample(np.arange(20_000), 4, np.random.default_rng(7))
    f = tmp_path / "acc.csv"
    f.write_text("accepted\n" + "\n".join(map(str, rec)) + "\n")
    m = AcceptanceSpec.from_mapping({"model": "trace", "path": str(f), "k": 4})
    n = 40_000
    out = m.sample(np.arange(n), 4, np.random.default_rng(8))
    p = np.bincount(rec, minlength=5) / len(rec)
    emp = np.bincount(out, minlength=5) / n
    assert np.all(np.abs(emp - p) < 4 * np.sqrt(p * (1 - p) / n))


def test_presets_cite_sources_and_reproduce_their_figures():
    assert len(PRESETS) >= 8
    for name in ("eagle3-llama-3.1-8b-mtbench", "eagle-vicuna-13b", "medusa-vicuna-13b", "sps-vicuna-68m",
                 "pld-vicuna-7b-specbench", "deepseek-v3-mtp", "qwen3-next-mtp-k3", "t5-small-ende",
                 "minimax-m3-eagle3", "magicdec-streamingllm"):
        p = PRESETS[name]
        m = AcceptanceSpec.from_mapping({"model": "preset", "name": name})
        assert p.source and p.conditions and p.conversion and p.source in m.source
        if p.kind == "tau":
            assert m.expected_tokens(p.k) == pytest.approx(p.figure[0], abs=1e-9)
        elif p.kind == "alpha":
            assert m.mean_alpha == p.figure[0]
    assert AcceptanceSpec.from_mapping("eagle3-llama-3.1-8b-mtbench").per_depth
    assert not AcceptanceSpec.from_mapping("qwen3-next-mtp-k3").per_depth
    mm = AcceptanceSpec.from_mapping("minimax-m3-eagle3")
    np.testing.assert_allclose(np.cumprod(mm.alphas(3)), [0.76, 0.56, 0.43])
    assert alpha_for_tau(1.0, 3) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError):
        alpha_for_tau(5.0, 3)


def test_shorthands():
    assert isinstance(AcceptanceSpec.from_mapping(0.7), IIDAcceptance)
    assert AcceptanceSpec.from_mapping("t5-small-ende").mean_alpha == 0.75


@pytest.mark.parametrize("raw, match", [
    ({"model": "idd", "alpha": 0.5}, r"acceptance\.model.*iid"),
    ({"model": "iid"}, r"acceptance\.alpha.*required"),
    ({"model": "iid", "alpha": 1.5}, r"acceptance\.alpha"),
    ({"model": "iid", "alpha": 0.5, "k": 3}, r"acceptance\.k.*unknown"),
    ({"model": "per_position", "alphas": [0.5, 1.2]}, r"acceptance\.alphas\[1\]"),
    ({"model": "per_position", "alphas": []}, r"acceptance\.alphas"),
    ({"model": "beta", "alpha": 1.0, "concentration": 3}, r"acceptance\.alpha"),
    ({"model": "beta", "alpha": 0.5, "concentration": 0}, r"acceptance\.concentration"),
    ({"model": "preset", "name": "eagle3-llama-8b"}, r"acceptance\.name.*did you mean"),
    ({"model": "trace", "path": "missing.csv"}, r"acceptance\.path.*not found"),
    ({"model": "kernel", "vocab_size": 100}, r"acceptance\.overlap"),
    ({"model": "kernel", "vocab_size": 1, "alpha": 0.5}, r"acceptance\.vocab_size"),
    (1.3, r"acceptance="),
])
def test_bad_input_names_the_key_path(raw, match):
    with pytest.raises(ValueError, match=match):
        AcceptanceSpec.from_mapping(raw)


def test_trace_with_bad_columns(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("accept\n1\n")
    with pytest.raises(ValueError, match=r"acceptance\.path.*needs column"):
        AcceptanceSpec.from_mapping({"model": "trace", "path": str(f)})
    g = tmp_path / "bad2.csv"
    g.write_text("accepted,k\n3,2\n")
    with pytest.raises(ValueError, match=r"accepted > k"):
        AcceptanceSpec.from_mapping({"model": "trace", "path": str(g)})


@pytest.fixture
def kernel_factory():
    """KernelAcceptance's factory as this test sets it, restored after."""
    before = KernelAcceptance.source_factory
    yield
    use_kernel_source(before)


def test_kernel_model_without_a_kernel_is_refused_by_name(kernel_factory):
    use_kernel_source(None)
    m = AcceptanceSpec.from_mapping({"model": "kernel", "vocab_size": 32, "overlap": 0.8, "seed": 1}, k_max=4)
    with pytest.raises(SpecsightInputError, match=r"acceptance\.model.*kernel.*use_kernel_source"):
        m.alphas(2)


@pytest.mark.slow
def test_kernel_model_delegates_to_calibrate(kernel_factory):
    pytest.importorskip("torch")
    from calibrate.acceptance_source import kernel_source
    use_kernel_source(kernel_source)
    m = AcceptanceSpec.from_mapping({"model": "kernel", "vocab_size": 32, "overlap": 0.8, "seed": 1}, k_max=4)
    acc = m.sample(np.arange(1000), 4, np.random.default_rng(0))
    assert acc.shape == (1000,) and acc.min() >= 0 and acc.max() <= 4
    alpha = m.mean_alpha
    assert 0.0 < alpha < 1.0
    # i.i.d. positions: mean tokens per round ~ closed form; SE of (1 + A) <= sqrt(var)/sqrt(n)
    closed = expected_tokens_per_round(alpha, 4)
    assert abs(1 + acc.mean() - closed) < 4 * acc.std() / math.sqrt(len(acc)) + 0.01
