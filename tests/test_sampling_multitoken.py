"""Multi-token exactness: speculative decoding of a Markov-chain target with a different
Markov-chain draft, repeated REPETITIONS times (the batch dimension holds the repetitions).

The first SEQUENCE_LENGTH emitted tokens are compared with the exact target distribution
P(s1 s2 s3) = T[s0, s1] T[s1, s2] T[s2, s3] by a chi-square test rejected at ALPHA = 1e-3, for the
chain kernel (full and ragged num_draft), the tree kernel, and Medusa's typical acceptance, which
must be REJECTED (it is not distribution-preserving) and whose total-variation distance is
reported.
"""
from __future__ import annotations

import itertools

import numpy as np
import torch
from sampling_stats import ALPHA, chisquare_pvalue, total_variation

from calibrate.sampling import verify_chain
from calibrate.sampling_tree import verify_tree
from calibrate.sampling_typical import verify_typical

VOCAB = 5  # tokens of the toy Markov chains
START = 0  # the prompt: one token
SEQUENCE_LENGTH = 3  # tokens compared per repetition: 5^3 = 125 cells
REPETITIONS = 400_000  # sequences per test: at least 10 expected counts in the rarest cell


def _markov_matrix(seed: int, scale: float, floor: float = 0.03) -> torch.Tensor:
    """[V, V] row-stochastic float32 matrix, every entry >= about floor (keeps cells well filled)."""
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(scale * torch.randn(VOCAB, VOCAB, generator=g), dim=-1)
    probs = floor + (1 - VOCAB * floor) * probs
    return (probs / probs.sum(-1, keepdim=True)).float()


TARGET = _markov_matrix(1, 1.5)  # [V, V] T[a, b] = P(next = b | current = a)
DRAFT = _markov_matrix(2, 1.5)  # a different chain
DRAFT_2 = _markov_matrix(3, 2.5)  # a third one, for the tree's second root candidate


def _exact_sequence_probs() -> np.ndarray:
    """[V^3] exact target probabilities of (s1, s2, s3), s1 changing slowest."""
    t = TARGET.double().numpy()
    return np.array([t[START, a] * t[a, b] * t[b, c]
                     for a, b, c in itertools.product(range(VOCAB), repeat=SEQUENCE_LENGTH)])


def _sample_next(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One draw per row of probs [R, V] -> [R] int64."""
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


def _append(out: torch.Tensor, length: torch.Tensor, tokens: torch.Tensor, num_emitted: torch.Tensor,
            active: torch.Tensor) -> None:
    """Write each active row's emitted tokens after its current length (in place)."""
    width = tokens.shape[1]
    positions = length[:, None] + torch.arange(width)  # [R, W]
    write = (torch.arange(width) < num_emitted[:, None]) & active[:, None]  # [R, W]
    rows = torch.arange(out.shape[0])[:, None].expand(-1, width)  # [R, W]
    out[rows[write], positions[write]] = tokens[write]


def _decode(verify_round, repetitions: int, k: int, seed: int) -> np.ndarray:
    """Speculative decoding until every repetition has SEQUENCE_LENGTH tokens.

    verify_round(last [R], generator) -> (tokens [R, W], num_emitted [R]) runs one round for the
    rows' last tokens. Returns the counts of the V^3 first-three-token sequences.
    """
    generator = torch.Generator().manual_seed(seed)
    out = torch.full((repetitions, SEQUENCE_LENGTH + k + 8), -1, dtype=torch.int64)  # [R, L+K+8]
    length = torch.zeros(repetitions, dtype=torch.int64)  # [R]
    last = torch.full((repetitions,), START, dtype=torch.int64)  # [R]
    while bool((length < SEQUENCE_LENGTH).any()):
        active = length < SEQUENCE_LENGTH  # [R]
        tokens, num_emitted = verify_round(last, generator)
        _append(out, length, tokens, num_emitted, active)
        last = torch.where(active, tokens.gather(1, (num_emitted - 1)[:, None])[:, 0], last)
        length = torch.where(active, length + num_emitted, length)
    first = out[:, :SEQUENCE_LENGTH].numpy()
    index = (first * VOCAB ** np.arange(SEQUENCE_LENGTH - 1, -1, -1)).sum(axis=1)
    return np.bincount(index, minlength=VOCAB ** SEQUENCE_LENGTH)


def _draft_chain(last: torch.Tensor, k: int, generator: torch.Generator) -> torch.Tensor:
    """k tokens from the draft chain after `last`: [R, K]."""
    tokens, prev = [], last
    for _ in range(k):
        prev = _sample_next(DRAFT[prev], generator)
        tokens.append(prev)
    return torch.stack(tokens, dim=1) if tokens else torch.empty(last.shape[0], 0, dtype=torch.int64)


def _chain_round(k: int, ragged: bool):
    def verify_round(last, generator):
        draft = _draft_chain(last, k, generator)  # [R, K]
        context = torch.cat([last[:, None], draft], dim=1)  # [R, K+1] token each position conditions on
        num_draft = torch.randint(0, k + 1, last.shape, generator=generator) if ragged else None
        return verify_chain(TARGET[context], DRAFT[context[:, :k]], draft, num_draft, generator=generator)
    return verify_round


# Tree: two candidates at depth 1 (node 0 from DRAFT, node 1 from DRAFT_2), node 0 has two i.i.d.
# children (2, 3), node 1 one child (4), node 2 one child (5): depth 3.
PARENTS = [-1, -1, 0, 0, 1, 2]


def _tree_round(last, generator):
    node_tokens, node_draft = [], []  # per node: token [R], draft distribution [R, V]
    for node, parent in enumerate(PARENTS):
        parent_token = last if parent < 0 else node_tokens[parent]
        q = (DRAFT_2 if node == 1 else DRAFT)[parent_token]  # [R, V]
        node_tokens.append(_sample_next(q, generator))
        node_draft.append(q)
    tree_tokens = torch.stack(node_tokens, dim=1)  # [R, N]
    target = TARGET[torch.cat([last[:, None], tree_tokens], dim=1)]  # [R, N+1, V]
    tokens, num_emitted, _ = verify_tree(target, torch.stack(node_draft, dim=1), tree_tokens, PARENTS,
                                         generator=generator)
    return tokens, num_emitted


def test_chain_speculative_decoding_matches_the_target_sequence_distribution():
    counts = _decode(_chain_round(k=2, ragged=False), REPETITIONS, k=2, seed=10)
    pvalue = chisquare_pvalue(counts, _exact_sequence_probs())
    assert pvalue > ALPHA, f"chain: chi-square rejects at alpha={ALPHA} (p-value {pvalue:.2e})"


def test_chain_with_ragged_num_draft_matches_the_target_sequence_distribution():
    counts = _decode(_chain_round(k=3, ragged=True), REPETITIONS, k=3, seed=11)
    pvalue = chisquare_pvalue(counts, _exact_sequence_probs())
    assert pvalue > ALPHA, f"ragged chain: chi-square rejects at alpha={ALPHA} (p-value {pvalue:.2e})"


def test_tree_speculative_decoding_matches_the_target_sequence_distribution():
    counts = _decode(_tree_round, REPETITIONS, k=3, seed=12)
    pvalue = chisquare_pvalue(counts, _exact_sequence_probs())
    assert pvalue > ALPHA, f"tree: chi-square rejects at alpha={ALPHA} (p-value {pvalue:.2e})"


def test_harness_detects_a_biased_kernel():
    """Power check of the harness itself: emitting the DRAFT's tokens unverified is caught."""
    def unverified_round(last, generator):
        draft = _draft_chain(last, 2, generator)
        return draft, torch.full(last.shape, 2)
    counts = _decode(unverified_round, REPETITIONS, k=2, seed=13)
    assert chisquare_pvalue(counts, _exact_sequence_probs()) < ALPHA


def test_typical_acceptance_is_biased_and_the_bias_is_measured():
    """Medusa-2 typical acceptance with a strongly different draft (a chain that always moves to
    token 4, which the target gives only 0.03..0.4): chi-square REJECTS the target sequence
    distribution at alpha = 1e-3, and the total-variation distance is far above the exact
    kernel's sampling noise (reported on the same harness)."""
    always_four = torch.zeros(VOCAB, VOCAB)
    always_four[:, 4] = 1.0

    def typical_round(last, generator):
        k = 2
        draft = torch.full((last.shape[0], k), 4, dtype=torch.int64)
        context = torch.cat([last[:, None], draft], dim=1)
        return verify_typical(TARGET[context], draft, generator=generator)

    def exact_round(last, generator):
        k = 2
        draft = torch.full((last.shape[0], k), 4, dtype=torch.int64)
        context = torch.cat([last[:, None], draft], dim=1)
        return verify_chain(TARGET[context], always_four[context[:, :k]], draft, generator=generator)

    exact = _exact_sequence_probs()
    typical_counts = _decode(typical_round, REPETITIONS, k=2, seed=14)
    exact_counts = _decode(exact_round, REPETITIONS, k=2, seed=15)
    typical_tv, exact_tv = total_variation(typical_counts, exact), total_variation(exact_counts, exact)
    print(f"\n[typical acceptance] TV distance to the target's 3-token distribution: {typical_tv:.4f} "
          f"(exact kernel, same draft: {exact_tv:.4f})")
    assert chisquare_pvalue(typical_counts, exact) < ALPHA, "typical acceptance should be detectably biased"
    assert chisquare_pvalue(exact_counts, exact) > ALPHA, "the exact kernel with the same draft must pass"
    assert typical_tv > 10 * exact_tv and typical_tv > 0.05
