"""Tests of calibrate/sampling.py at one verify round: exactness, reference equality, validity.

Distribution tests are seeded and reject at ALPHA = 1e-3 (sampling_stats.py); each uses 10^6
draws. Multi-token sequence tests live in test_sampling_multitoken.py.
"""
from __future__ import annotations

import functools
import zlib

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sampling_stats import ALPHA, Z_ALPHA, chisquare_pvalue

from calibrate.sampling import _verify_chain_core, draw_uniforms, verify_chain, verify_greedy
from calibrate.sampling_fast import make_chain_verifier, verify_chain_blocked
from calibrate.sampling_reference import verify_chain_reference, verify_tree_reference
from calibrate.sampling_tree import _verify_tree_core, verify_tree
from calibrate.sampling_typical import verify_typical

NUM_SAMPLES = 1_000_000  # draws per single-position distribution test
CHUNK = 250_000  # rows per kernel call (bounds memory at about 100 MB)


def _dirichlet(rng: np.random.Generator, vocab: int, concentration: float = 1.0) -> np.ndarray:
    return rng.dirichlet(np.full(vocab, concentration)).astype(np.float32)


def _one_hot(vocab: int, token: int) -> np.ndarray:
    out = np.zeros(vocab, dtype=np.float32)
    out[token] = 1.0
    return out


def _single_position_case(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p_0, q_0, p_1): target and draft at the draft position, and the target at the bonus
    position; float32 [V] each, V in 8..32."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if name == "random":
        p, q = _dirichlet(rng, 16), _dirichlet(rng, 16)
    elif name == "disjoint_supports":  # q = 0 where p > 0 and vice versa: always rejected
        p = np.concatenate([_dirichlet(rng, 8), np.zeros(8, np.float32)])
        q = np.concatenate([np.zeros(8, np.float32), _dirichlet(rng, 8)])
    elif name == "partial_support":  # q = 0 on part of p's support, p = 0 on part of q's
        p = np.concatenate([_dirichlet(rng, 20), np.zeros(12, np.float32)])
        q = np.concatenate([np.zeros(10, np.float32), _dirichlet(rng, 22)])
    elif name == "q_equals_p":  # always accepted, the residual is empty
        p = _dirichlet(rng, 32)
        q = p.copy()
    elif name == "one_hot_q":
        p, q = _dirichlet(rng, 8), _one_hot(8, 3)
    elif name == "one_hot_p":
        p, q = _one_hot(8, 5), _dirichlet(rng, 8)
    elif name == "peaked":  # low-entropy target and draft that disagree on the mode
        p, q = _dirichlet(rng, 24, 0.1), _dirichlet(rng, 24, 0.1)
    else:
        raise KeyError(name)
    return p, q, _dirichlet(rng, p.size)


CASES = ["random", "disjoint_supports", "partial_support", "q_equals_p", "one_hot_q", "one_hot_p", "peaked"]


def _blocked_verify_chain(target, draft, tokens, generator):
    """The compiled fast path's algorithm (two-level inverse CDF, blocks of 3 tokens so that
    every V here spans several blocks and a padded tail), run eagerly."""
    num_draft = torch.full((tokens.shape[0],), tokens.shape[1])
    uniforms = draw_uniforms(tokens.shape[0], tokens.shape[1] + 1, generator, "cpu")
    return verify_chain_blocked(target, draft, tokens, num_draft, uniforms, block=3)


VERIFIERS = {"verify_chain": lambda t, d, x, g: verify_chain(t, d, x, generator=g),
             "blocked": _blocked_verify_chain}


@functools.cache
def _run_single_position(name: str, verifier: str = "verify_chain") -> dict:
    """10^6 rounds with K = 1 and x ~ q: counts of the first emitted token, of the bonus token
    when accepted, and the number accepted."""
    verify = VERIFIERS[verifier]
    p, q, p1 = _single_position_case(name)
    vocab = p.size
    generator = torch.Generator().manual_seed(1234)
    target = torch.from_numpy(np.stack([p, p1]))  # [2, V]
    draft = torch.from_numpy(q)[None]  # [1, V]
    first = np.zeros(vocab, np.int64)
    bonus = np.zeros(vocab, np.int64)
    accepted = 0
    for _ in range(NUM_SAMPLES // CHUNK):
        x = torch.multinomial(draft[0], CHUNK, replacement=True, generator=generator)[:, None]  # [N, 1]
        expanded = target.expand(CHUNK, 2, vocab), draft.expand(CHUNK, 1, vocab)  # no copies
        tokens, num_emitted = verify(*expanded, x, generator)
        first += np.bincount(tokens[:, 0].numpy(), minlength=vocab)
        was_accepted = num_emitted == 2  # [N]
        accepted += int(was_accepted.sum())
        bonus += np.bincount(tokens[was_accepted, 1].numpy(), minlength=vocab)
    return {"p": p, "q": q, "p1": p1, "first": first, "bonus": bonus, "accepted": accepted}


@pytest.mark.parametrize("name", CASES)
def test_single_position_emitted_token_is_distributed_as_target(name):
    run = _run_single_position(name)
    pvalue = chisquare_pvalue(run["first"], run["p"])
    assert pvalue > ALPHA, f"{name}: chi-square rejects p at alpha={ALPHA} (p-value {pvalue:.2e})"


@pytest.mark.parametrize("name", ["random", "disjoint_supports", "q_equals_p", "peaked"])
def test_single_position_blocked_fast_path_is_distributed_as_target(name):
    run = _run_single_position(name, "blocked")
    pvalue = chisquare_pvalue(run["first"], run["p"])
    assert pvalue > ALPHA, f"{name} (blocked): chi-square rejects p at alpha={ALPHA} (p-value {pvalue:.2e})"
    alpha = float(np.minimum(run["p"].astype(np.float64), run["q"]).sum())
    half_width = Z_ALPHA * np.sqrt(alpha * (1 - alpha) / NUM_SAMPLES)
    assert abs(run["accepted"] / NUM_SAMPLES - alpha) <= half_width + 1e-12


@pytest.mark.parametrize("name", CASES)
def test_single_position_acceptance_rate_is_sum_of_min(name):
    run = _run_single_position(name)
    alpha = float(np.minimum(run["p"].astype(np.float64), run["q"]).sum())
    rate = run["accepted"] / NUM_SAMPLES
    half_width = Z_ALPHA * np.sqrt(alpha * (1 - alpha) / NUM_SAMPLES)  # 0 when alpha is 0 or 1
    assert abs(rate - alpha) <= half_width + 1e-12, (
        f"{name}: acceptance {rate:.5f} vs sum min(p, q) = {alpha:.5f} (+-{half_width:.5f}, alpha={ALPHA})")


@pytest.mark.parametrize("name", ["random", "q_equals_p", "one_hot_q"])
def test_single_position_bonus_token_is_distributed_as_next_target(name):
    run = _run_single_position(name)
    pvalue = chisquare_pvalue(run["bonus"], run["p1"])
    assert pvalue > ALPHA, f"{name}: bonus tokens are not distributed as p_1 (p-value {pvalue:.2e}, alpha={ALPHA})"


# --- Exact outputs --------------------------------------------------------------------------

def _ragged_inputs(seed: int, batch: int, k: int, vocab: int, dtype=torch.float32):
    """Random probabilities with planted special rows: q = p, disjoint supports, one-hot q."""
    g = torch.Generator().manual_seed(seed)
    target = torch.softmax(3 * torch.randn(batch, k + 1, vocab, generator=g), -1)  # [B, K+1, V]
    draft = torch.softmax(3 * torch.randn(batch, k, vocab, generator=g), -1)  # [B, K, V]
    if batch >= 4 and k >= 1:
        draft[0] = target[0, :k]  # q = p: always accepted
        target[1, :, : vocab // 2] = 0.0  # disjoint supports
        draft[1, :, vocab // 2:] = 0.0
        target[1] /= target[1].sum(-1, keepdim=True)
        draft[1] /= draft[1].sum(-1, keepdim=True)
        draft[2] = 0.0
        draft[2, :, 1] = 1.0  # one-hot q
        target[3, 0] = 0.0
        target[3, 0, 2] = 1.0  # one-hot p
    target, draft = target.to(dtype), draft.to(dtype)
    tokens = torch.multinomial(draft.float().reshape(-1, vocab), 1, generator=g).view(batch, k)  # [B, K]
    num_draft = torch.randint(0, k + 1, (batch,), generator=g)  # [B]
    return target, draft, tokens, num_draft, g


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chain_kernel_equals_scalar_reference_for_the_same_uniforms(seed, dtype):
    batch, k, vocab = 96, 4, 24
    target, draft, tokens, num_draft, g = _ragged_inputs(seed, batch, k, vocab, dtype)
    uniforms = draw_uniforms(batch, k + 1, g, "cpu")  # [B, K+1]
    got_tokens, got_emitted = _verify_chain_core(target, draft, tokens, num_draft, uniforms)
    ref_tokens, ref_emitted = verify_chain_reference(
        target.float().tolist(), draft.float().tolist(), tokens.tolist(), num_draft.tolist(), uniforms.tolist())
    assert torch.equal(got_tokens, torch.tensor(ref_tokens))
    assert torch.equal(got_emitted, torch.tensor(ref_emitted))
    # the planted rows and the ragged lengths exercised every branch
    assert (got_emitted == num_draft + 1).any() and (got_emitted < num_draft + 1).any()


def test_verify_chain_draws_its_uniforms_as_one_block():
    """verify_chain(generator) == the core on draw_uniforms from an identically seeded generator."""
    target, draft, tokens, num_draft, _ = _ragged_inputs(5, 32, 3, 16)
    out = verify_chain(target, draft, tokens, num_draft, generator=torch.Generator().manual_seed(9))
    uniforms = draw_uniforms(32, 4, torch.Generator().manual_seed(9), "cpu")
    expected = _verify_chain_core(target, draft, tokens, num_draft, uniforms)
    assert torch.equal(out[0], expected[0]) and torch.equal(out[1], expected[1])


@pytest.mark.parametrize("parents", [[-1, -1, 0, 0, 1, 2, -1], [-1, 0, 1, 2], [-1, -1, -1], []])
def test_tree_kernel_equals_scalar_reference_for_the_same_uniforms(parents):
    batch, vocab = 128, 12
    n = len(parents)
    g = torch.Generator().manual_seed(len(parents))
    target = torch.softmax(2 * torch.randn(batch, n + 1, vocab, generator=g), -1)  # [B, N+1, V]
    draft = torch.softmax(2 * torch.randn(batch, n, vocab, generator=g), -1)  # [B, N, V]
    tokens = torch.multinomial(draft.reshape(-1, vocab), 1, generator=g).view(batch, n)  # [B, N]
    uniforms = draw_uniforms(batch, n + 1, g, "cpu")
    got = _verify_tree_core(target, draft, tokens, parents, uniforms)
    ref = verify_tree_reference(target.tolist(), draft.tolist(), tokens.tolist(), parents, uniforms.tolist())
    for got_t, ref_t in zip(got, ref):
        assert torch.equal(got_t, torch.tensor(ref_t, dtype=torch.int64).reshape(got_t.shape))


def test_seeded_determinism():
    target, draft, tokens, num_draft, _ = _ragged_inputs(3, 64, 5, 40)
    runs = [verify_chain(target, draft, tokens, num_draft, generator=torch.Generator().manual_seed(s))
            for s in (11, 11, 12)]
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])
    assert not torch.equal(runs[0][0], runs[2][0]), "another seed should change some token"


# --- Off-by-one guards ----------------------------------------------------------------------

def test_bonus_token_comes_from_the_position_after_the_last_draft():
    """p = q (bitwise) at every real draft position, so all are accepted; the target at position
    num_draft[b] is one-hot on a marker distinct for each position. Drawing the bonus from
    position num_draft - 1 (or from K instead of num_draft) would emit another marker."""
    batch, k, vocab = 40, 4, 16
    g = torch.Generator().manual_seed(0)
    num_draft = torch.arange(batch) % (k + 1)  # [B] every length 0..K
    draft = torch.softmax(torch.randn(batch, k, vocab, generator=g), -1)  # [B, K, V]
    target = torch.empty(batch, k + 1, vocab)
    target[:, :k] = draft
    for position in range(k + 1):  # marker token V-1-position at position `position`
        rows = num_draft == position
        target[rows, position] = 0.0
        target[rows, position, vocab - 1 - position] = 1.0
    target[:, k] = torch.where((num_draft == k)[:, None], target[:, k], draft[:, 0])
    tokens = torch.multinomial(draft.reshape(-1, vocab), 1, generator=g).view(batch, k)
    out, num_emitted = verify_chain(target, draft, tokens, num_draft, generator=g)
    assert torch.equal(num_emitted, num_draft + 1)
    assert torch.equal(out.gather(1, num_draft[:, None])[:, 0], vocab - 1 - num_draft)
    for b in range(batch):
        n = int(num_draft[b])
        assert out[b, :n].tolist() == tokens[b, :n].tolist() and out[b, n + 1:].tolist() == [-1] * (k - n)


def test_recovered_token_comes_from_the_rejected_position():
    """Accept (p = q) before position j, reject surely at j (q one-hot on a token p gives 0);
    the recovered token must be p_j's (one-hot) token, not p_{j+1}'s or p_{j-1}'s."""
    k, vocab = 4, 10
    for j in range(k):
        draft = torch.full((1, k, vocab), 1.0 / vocab)  # [1, K, V]
        target = torch.full((1, k + 1, vocab), 1.0 / vocab)  # [1, K+1, V]
        draft[0, j] = 0.0
        draft[0, j, 0] = 1.0  # q_j one-hot on token 0
        target[0, j] = 0.0
        target[0, j, 7] = 1.0  # p_j one-hot on token 7: token 0 has p = 0, always rejected
        tokens = torch.zeros(1, k, dtype=torch.int64)
        out, num_emitted = verify_chain(target, draft, tokens, generator=torch.Generator().manual_seed(j))
        assert num_emitted.tolist() == [j + 1]
        assert out[0, j].item() == 7 and out[0, :j].tolist() == [0] * j


# --- Property tests over shapes, ragged lengths and dtypes -----------------------------------

@settings(max_examples=60, deadline=None)
@given(batch=st.integers(1, 6), k=st.integers(0, 5), vocab=st.integers(2, 40),
       dtype=st.sampled_from([torch.float32, torch.float16, torch.bfloat16]),
       sharpness=st.sampled_from([0.0, 1.0, 8.0]), seed=st.integers(0, 2**31 - 1))
def test_chain_outputs_are_valid(batch, k, vocab, dtype, sharpness, seed):
    g = torch.Generator().manual_seed(seed)
    target = torch.softmax(sharpness * torch.randn(batch, k + 1, vocab, generator=g), -1).to(dtype)
    draft = torch.softmax(sharpness * torch.randn(batch, k, vocab, generator=g), -1).to(dtype)
    tokens = torch.randint(0, vocab, (batch, k), generator=g)  # any tokens, not only draws from q
    num_draft = torch.randint(0, k + 1, (batch,), generator=g)
    out, num_emitted = verify_chain(target, draft, tokens, num_draft, generator=g)
    assert out.shape == (batch, k + 1) and out.dtype == torch.int64 and num_emitted.dtype == torch.int64
    assert ((num_emitted >= 1) & (num_emitted <= num_draft + 1)).all()
    for b in range(batch):
        n = int(num_emitted[b])
        assert out[b, : n - 1].tolist() == tokens[b, : n - 1].tolist()  # accepted prefix = drafts
        assert 0 <= int(out[b, n - 1]) < vocab
        assert (out[b, n:] == -1).all()
        # the recovered or bonus token always has positive target probability at its position
        assert float(target[b, n - 1, out[b, n - 1]]) > 0


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 5), k=st.integers(0, 5), vocab=st.integers(2, 30), seed=st.integers(0, 2**31 - 1),
       dtype=st.sampled_from([torch.float32, torch.float16, torch.bfloat16]))
def test_greedy_equals_greedy_decoding_of_the_target(batch, k, vocab, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, k + 1, vocab, generator=g).to(dtype)  # [B, K+1, V]
    greedy = logits.argmax(-1)  # [B, K+1]
    # drafts agree with the target's argmax on a random prefix, then deviate
    agree = torch.randint(0, k + 1, (batch,), generator=g)
    tokens = torch.where(torch.arange(k) < agree[:, None], greedy[:, :k], (greedy[:, :k] + 1) % vocab)
    num_draft = torch.randint(0, k + 1, (batch,), generator=g)
    out, num_emitted = verify_greedy(logits, tokens, num_draft)
    expected_accepted = torch.minimum(agree, num_draft)
    assert torch.equal(num_emitted, expected_accepted + 1)
    for b in range(batch):
        n = int(num_emitted[b])
        assert out[b, :n].tolist() == greedy[b, :n].tolist()  # = step-by-step greedy decoding
        assert (out[b, n:] == -1).all()


def test_greedy_hand_built():
    logits = torch.tensor([[[0., 5, 1], [4, 0, 0], [0, 0, 9]],  # argmax 1, 0, 2
                           [[0., 5, 1], [4, 0, 0], [0, 0, 9]]])
    out, num_emitted = verify_greedy(logits, torch.tensor([[1, 0], [1, 2]]))
    assert out.tolist() == [[1, 0, 2], [1, 0, -1]] and num_emitted.tolist() == [3, 2]
    out, num_emitted = verify_greedy(logits, torch.tensor([[1, 0], [2, 0]]), num_draft=torch.tensor([1, 2]))
    assert out.tolist() == [[1, 0, -1], [1, -1, -1]] and num_emitted.tolist() == [2, 1]


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 5), vocab=st.integers(2, 20), seed=st.integers(0, 2**31 - 1),
       parents=st.sampled_from([[], [-1], [-1, -1], [-1, 0, 0, 1], [-1, -1, 0, 1, 2, 2, 4]]))
def test_tree_outputs_are_valid(batch, vocab, seed, parents):
    n = len(parents)
    g = torch.Generator().manual_seed(seed)
    target = torch.softmax(2 * torch.randn(batch, n + 1, vocab, generator=g), -1)
    draft = torch.softmax(2 * torch.randn(batch, n, vocab, generator=g), -1)
    tokens = torch.randint(0, vocab, (batch, n), generator=g)
    out, num_emitted, path = verify_tree(target, draft, tokens, parents, generator=g)
    depth = path.shape[1]
    assert out.shape == (batch, depth + 1) and ((num_emitted >= 1) & (num_emitted <= depth + 1)).all()
    for b in range(batch):
        nodes = [i for i in path[b].tolist() if i >= 0]
        assert len(nodes) == int(num_emitted[b]) - 1
        assert all(parents[c] == (nodes[i - 1] if i else -1) for i, c in enumerate(nodes))  # a root path
        assert out[b, : len(nodes)].tolist() == [int(tokens[b, c]) for c in nodes]
        last = nodes[-1] + 1 if nodes else 0
        assert float(target[b, last, out[b, len(nodes)]]) > 0 and (out[b, len(nodes) + 1:] == -1).all()


def test_typical_outputs_are_valid_and_accept_typical_tokens():
    # thresholds min(0.09, 0.3 exp(-H)): 0.09 at positions 0 and 1, 0.09 at the uniform position 2
    target = torch.tensor([[[0.6, 0.35, 0.05], [0.1, 0.8, 0.1], [1 / 3, 1 / 3, 1 / 3]]])  # [1, 3, 3]
    out, num_emitted = verify_typical(target, torch.tensor([[1, 1]]), generator=torch.Generator().manual_seed(0))
    assert num_emitted.tolist() == [3] and out[0, :2].tolist() == [1, 1] and int(out[0, 2]) in (0, 1, 2)
    for seed in range(20):  # p(2) = 0.05 < 0.09: rejected; the next token is drawn from {0, 1} only
        out, num_emitted = verify_typical(target, torch.tensor([[2, 1]]),
                                          generator=torch.Generator().manual_seed(seed))
        assert num_emitted.tolist() == [1] and int(out[0, 0]) in (0, 1) and out[0, 1:].tolist() == [-1, -1]


def test_k_zero_emits_the_bonus_token_only():
    target = torch.zeros(3, 1, 5)
    target[:, 0, 4] = 1.0
    out, num_emitted = verify_chain(target, torch.zeros(3, 0, 5), torch.zeros(3, 0, dtype=torch.int64))
    assert out.tolist() == [[4]] * 3 and num_emitted.tolist() == [1] * 3


@pytest.mark.parametrize("block", [1024, 7])
def test_compiled_blocked_verifier_matches_eager(block):
    """make_chain_verifier(compile=True): the blocked two-level sampler traced by dynamo (backend
    'eager' keeps CI fast; the GPU benchmark uses inductor). V = 20 in blocks of 1024 (one block)
    and 7 (three, the last padded) gives the same tokens as verify_chain. (cuda_graph=True is
    exercised on a GPU by the benchmark's check; on CPU tensors it runs the same path.)"""
    target, draft, tokens, num_draft, _ = _ragged_inputs(8, 50, 3, 20)
    compiled = make_chain_verifier(compile=True, cuda_graph=True, backend="eager", block=block)
    for seed in (1, 2):
        expected = verify_chain(target, draft, tokens, num_draft, generator=torch.Generator().manual_seed(seed))
        got = compiled(target, draft, tokens, num_draft, generator=torch.Generator().manual_seed(seed))
        assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])


# --- Input validation -----------------------------------------------------------------------

def _good():
    return torch.full((2, 3, 4), 0.25), torch.full((2, 2, 4), 0.25), torch.zeros(2, 2, dtype=torch.int64)


@pytest.mark.parametrize("mutate, match", [
    (lambda t, d, x, n: (t[0], d, x, n), r"target_probs must be 3-D \[B, K\+1, V\]; got shape \(3, 4\)"),
    (lambda t, d, x, n: (t, d[:, :1], x, n), r"draft_probs must have shape \[B, K, V\] = \(2, 2, 4\)"),
    (lambda t, d, x, n: (t, d, x.int(), n), r"draft_tokens must be int64"),
    (lambda t, d, x, n: (t, d, x[:, :1], n), r"draft_tokens must have shape \[B, K\] = \(2, 2\); got \(2, 1\)"),
    (lambda t, d, x, n: (t, d, x + 4, n), r"draft_tokens holds token ids outside 0..3"),
    (lambda t, d, x, n: (t.long(), d, x, n), r"target_probs must be float32"),
    (lambda t, d, x, n: (t, d, x, torch.tensor([0, 3])), r"num_draft values must lie in 0..K = 0..2"),
    (lambda t, d, x, n: (t, d, x, torch.tensor([1])), r"num_draft must have shape \[B\] = \(2,\); got \(1,\)"),
    (lambda t, d, x, n: (t, d, x, torch.tensor([1.0, 1.0])), r"num_draft must be an integer tensor"),
])
def test_verify_chain_rejects_bad_inputs(mutate, match):
    with pytest.raises(ValueError, match=match):
        verify_chain(*mutate(*_good(), None))


def test_verify_tree_rejects_bad_parents():
    target, draft = torch.full((1, 3, 4), 0.25), torch.full((1, 2, 4), 0.25)
    tokens = torch.zeros(1, 2, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"parents\[1\] = 1: must be -1 \(root\) or an earlier node"):
        verify_tree(target, draft, tokens, [-1, 1])
    with pytest.raises(ValueError, match=r"parents must list N = 2 nodes; got 1"):
        verify_tree(target, draft, tokens, [-1])
