"""Slow scalar references for calibrate/sampling.py and sampling_tree.py, from the papers' algorithms.

Pure Python loops over sequences, positions and tokens; no tensor operations. They consume the
same pre-drawn uniforms as the kernels' internal cores (`_verify_chain_core`,
`_verify_tree_core`), and they repeat the kernels' floating-point steps one scalar at a time
(float32 residuals through numpy.float32 scalars, float64 acceptance tests and cumulative sums),
so tests can compare the outputs with torch.equal.

Chain: Leviathan et al. 2022 (arXiv 2211.17192), Algorithm 1; Chen et al. 2023 (arXiv 2302.01318),
Algorithm 2. Tree: SpecInfer (Miao et al., arXiv 2305.09781), multi-step speculative sampling.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

FALLBACK_WEIGHT = 2.0 ** -64  # as calibrate.sampling.FALLBACK_WEIGHT

Matrix = Sequence[Sequence[float]]


def _f32(x: float) -> np.float32:
    return np.float32(x)


def _inverse_cdf(weights: Sequence[float], u: float) -> int:
    """First v with sum(weights[:v+1]) > u * total (sums in float64, left to right)."""
    cdf, running = [], 0.0
    for w in weights:
        running += float(w)
        cdf.append(running)
    total = running
    threshold = min(u * total, math.nextafter(total, 0.0))
    for v, c in enumerate(cdf):
        if c > threshold:
            return v
    return len(weights) - 1  # all-zero row (invalid input): keep the id in range


def verify_chain_reference(target_probs: Sequence[Matrix], draft_probs: Sequence[Matrix],
                           draft_tokens: Sequence[Sequence[int]], num_draft: Sequence[int],
                           uniforms: Sequence[Sequence[float]]) -> tuple[list[list[int]], list[int]]:
    """Algorithm 1 for each sequence b, with uniforms[b][k] for the test of draft k and
    uniforms[b][K] for drawing the recovered or bonus token.

    target_probs [B][K+1][V], draft_probs [B][K][V] (float32 values as Python floats),
    draft_tokens [B][K], num_draft [B], uniforms [B][K+1] -> (tokens [B][K+1] padded with -1,
    num_emitted [B]).
    """
    all_tokens, all_emitted = [], []
    for b in range(len(draft_tokens)):
        k_total = len(draft_tokens[b])
        p, q, x, n = target_probs[b], draft_probs[b], draft_tokens[b], num_draft[b]
        emitted: list[int] = []
        rejected_at = None
        for k in range(n):
            # accept x_k with probability min(1, p_k(x_k) / q_k(x_k)): u < p/q, i.e. u * q < p
            if uniforms[b][k] * q[k][x[k]] < p[k][x[k]]:
                emitted.append(x[k])
            else:
                rejected_at = k
                break
        if rejected_at is None:  # every draft accepted: bonus token from p_n
            j = n
            weights = [_f32(pv) for pv in p[j]]
        else:  # recovered token from (p_j - q_j)+
            j = rejected_at
            weights = [max(_f32(pv) - _f32(qv), _f32(0.0)) for pv, qv in zip(p[j], q[j])]
        # a numerically empty residual falls back to p (see FALLBACK_WEIGHT in sampling.py)
        weights = [w + _f32(FALLBACK_WEIGHT) * _f32(pv) for w, pv in zip(weights, p[j])]
        emitted.append(_inverse_cdf(weights, uniforms[b][k_total]))
        all_emitted.append(len(emitted))
        all_tokens.append(emitted + [-1] * (k_total + 1 - len(emitted)))
    return all_tokens, all_emitted


def verify_tree_reference(target_probs: Sequence[Matrix], draft_probs: Sequence[Matrix],
                          tree_tokens: Sequence[Sequence[int]], parents: Sequence[int],
                          uniforms: Sequence[Sequence[float]],
                          ) -> tuple[list[list[int]], list[int], list[list[int]]]:
    """Recursive rejection sampling down a token tree, one sequence at a time.

    target_probs [B][N+1][V] (row 0: root; row i+1: after node i), draft_probs [B][N][V],
    tree_tokens [B][N], parents [N] (-1 for the root's children, parents[i] < i), uniforms
    [B][N+1] (column i: node i's test; column N: the final draw) -> (tokens [B][D+1],
    num_emitted [B], path [B][D]), D the tree depth.
    """
    depth = []
    for parent in parents:
        depth.append(0 if parent < 0 else depth[parent] + 1)
    max_depth = max(depth, default=-1) + 1
    children: dict[int, list[int]] = {}
    for node, parent in enumerate(parents):
        children.setdefault(parent, []).append(node)
    out_tokens, out_emitted, out_paths = [], [], []
    for b in range(len(tree_tokens)):
        current, path, emitted = -1, [], []
        dist = [_f32(v) for v in target_probs[b][0]]  # unnormalised current p
        mass = 1.0
        descended = True
        while descended:
            descended = False
            for child in children.get(current, []):
                x = tree_tokens[b][child]
                q = draft_probs[b][child]
                # accept with probability min(1, p(x)/q(x)), p = dist / mass
                if uniforms[b][child] * q[x] * mass < float(dist[x]):
                    current, descended = child, True
                    path.append(child)
                    emitted.append(x)
                    dist, mass = [_f32(v) for v in target_probs[b][child + 1]], 1.0
                    break
                residual = [max(d - _f32(mass) * _f32(qv), _f32(0.0)) for d, qv in zip(dist, q)]
                residual_mass = sum(float(r) for r in residual)
                if residual_mass > 0:  # an empty residual keeps p (the fallback)
                    dist, mass = residual, residual_mass
        emitted.append(_inverse_cdf(dist, uniforms[b][len(parents)]))
        out_emitted.append(len(emitted))
        out_tokens.append(emitted + [-1] * (max_depth + 1 - len(emitted)))
        out_paths.append(path + [-1] * (max_depth - len(path)))
    return out_tokens, out_emitted, out_paths
