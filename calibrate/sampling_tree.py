"""Exact verification of a token tree: recursive rejection sampling over siblings.

SpecInfer (Miao et al. 2024, arXiv 2305.09781, "multi-step speculative sampling"); Yang et al.
2024, "Multi-Candidate Speculative Decoding" (arXiv 2401.06706). Conventions, input checks and
the shared pieces (uniforms, inverse CDF, emitted layout) are calibrate.sampling's; the scalar
reference `calibrate.sampling_reference.verify_tree_reference` consumes the same uniforms as
`_verify_tree_core` and gives identical tokens (tests/test_sampling.py).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .sampling import _check_probs, _check_same_device, _check_tokens, _emit, _inverse_cdf, _shape, draw_uniforms


def tree_depths(parents: Sequence[int]) -> list[int]:
    """Depth of each node (0 for children of the root); checks parents[i] in -1..i-1."""
    depths: list[int] = []
    for i, parent in enumerate(parents):
        if not -1 <= parent < i:
            raise ValueError(f"parents[{i}] = {parent}: must be -1 (root) or an earlier node 0..{i - 1}")
        depths.append(0 if parent < 0 else depths[parent] + 1)
    return depths


def _verify_tree_core(target_probs: torch.Tensor, draft_probs: torch.Tensor,
                      tree_tokens: torch.Tensor, parents: Sequence[int],
                      uniforms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """verify_tree on pre-drawn uniforms [B, N+1] float64 (column i: node i's acceptance test;
    column N: the final inverse-CDF draw). Loops over the N nodes in index order (the tree is
    static and small); everything else is batched.

    State per sequence: `current` node (-1 = root), `dist` the unnormalised distribution to
    verify the next child against (a target row, or the residual left by rejected siblings) and
    its `mass` (float64). A child c of the current node is accepted when u * q_c(x_c) * mass <
    dist(x_c), i.e. with probability min(1, p(x_c) / q_c(x_c)) for the normalised p; on rejection
    dist becomes (dist - mass * q_c)+, the unnormalised residual (SpecInfer's multi-step
    speculative sampling). An accepted child moves `current` down and resets dist to its target
    row. After the last node, the token is drawn from dist: the bonus after a leaf, or the
    recovered token after every child of `current` was rejected.
    """
    batch, num_nodes = tree_tokens.shape
    depths = tree_depths(parents)
    max_depth = max(depths, default=-1) + 1
    device = tree_tokens.device
    current = torch.full((batch,), -1, dtype=torch.int64, device=device)  # [B]
    dist = target_probs[:, 0].float()  # [B, V]
    mass = torch.ones(batch, dtype=torch.float64, device=device)  # [B]
    path = torch.full((batch, max_depth), -1, dtype=torch.int64, device=device)  # [B, D]
    for node, parent in enumerate(parents):
        at_parent = current == parent  # [B] this node is a child of the current node
        x = tree_tokens[:, node, None]  # [B, 1]
        q_node = draft_probs[:, node].float()  # [B, V]
        p_x = dist.gather(1, x)[:, 0].double()  # [B]
        q_x = q_node.gather(1, x)[:, 0].double()  # [B]
        accept = at_parent & (uniforms[:, node] * q_x * mass < p_x)  # [B]
        residual = (dist - mass.float()[:, None] * q_node).clamp_min(0.0)  # [B, V]
        residual_mass = residual.double().sum(dim=1)  # [B]
        # NOTE: an empty residual (probability-0 rejection, or rounding) keeps the current
        # distribution: the fallback to p.
        reject = at_parent & ~accept & (residual_mass > 0)  # [B]
        dist = torch.where(accept[:, None], target_probs[:, node + 1].float(),
                           torch.where(reject[:, None], residual, dist))  # [B, V]
        mass = torch.where(accept, 1.0, torch.where(reject, residual_mass, mass))  # [B]
        current = torch.where(accept, node, current)  # [B]
        path[:, depths[node]] = torch.where(accept, node, path[:, depths[node]])
    sampled = _inverse_cdf(dist, uniforms[:, num_nodes])  # [B] dist is never empty (see NOTE)
    num_accepted = (path >= 0).sum(dim=1)  # [B]
    path_tokens = tree_tokens.gather(1, path.clamp(min=0)) if num_nodes else path  # [B, D]
    path_tokens = torch.where(path >= 0, path_tokens, -1)  # [B, D]
    tokens, num_emitted = _emit(path_tokens, num_accepted, sampled)
    return tokens, num_emitted, path


def verify_tree(target_probs: torch.Tensor, draft_probs: torch.Tensor, tree_tokens: torch.Tensor,
                parents: Sequence[int] | torch.Tensor, generator: torch.Generator | None = None,
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exact verification of a token tree (several candidates per position), emitting one path.

    Recursive rejection sampling over siblings (SpecInfer, Miao et al. 2024, arXiv 2305.09781,
    "multi-step speculative sampling"; Yang et al. 2024, "Multi-Candidate Speculative Decoding",
    arXiv 2401.06706): the children of the current node are tried in index order; each
    is accepted with probability min(1, p(x)/q(x)) against the current p, and a rejection replaces
    p by norm((p - q)+). Exact (the emitted tokens are distributed as the target's samples) when
    each node's token was drawn independently from its draft_probs row given its parent, e.g.
    siblings drawn i.i.d. with replacement from one draft distribution.

    Args:
        target_probs: [B, N+1, V]; row 0 is the target's distribution after the prefix (root),
            row i+1 its distribution after the path to node i.
        draft_probs: [B, N, V]; row i is the distribution node i's token was drawn from
            (siblings drawn from one distribution share identical rows).
        tree_tokens: [B, N] int64, the token of each node.
        parents: N ints (list or 1-D tensor, shared by the batch): parent node of each node,
            -1 for children of the root; parents[i] < i (topological order, siblings in the
            order they are tried).
        generator: torch.Generator on the tensors' device.
    Returns:
        tokens: [B, D+1] int64, D the tree depth: the accepted path's tokens, then the recovered
            or bonus token, then -1 padding.
        num_emitted: [B] int64 in 1..D+1.
        path: [B, D] int64 accepted node indices (for the KV cache), -1 padded.
    """
    _check_probs("target_probs", target_probs, "[B, N+1, V]")
    _check_probs("draft_probs", draft_probs, "[B, N, V]")
    batch, n_plus_1, vocab = _shape(target_probs)
    if n_plus_1 < 1 or _shape(draft_probs) != (batch, n_plus_1 - 1, vocab):
        raise ValueError(f"draft_probs must have shape [B, N, V] = ({batch}, {n_plus_1 - 1}, {vocab}) "
                         f"to match target_probs {_shape(target_probs)} [B, N+1, V]; got {_shape(draft_probs)}")
    _check_tokens("tree_tokens", tree_tokens, batch, n_plus_1 - 1, vocab, "[B, N]")
    parents = [int(p) for p in (parents.tolist() if isinstance(parents, torch.Tensor) else parents)]
    if len(parents) != n_plus_1 - 1:
        raise ValueError(f"parents must list N = {n_plus_1 - 1} nodes; got {len(parents)}")
    device = _check_same_device(generator, target_probs, draft_probs, tree_tokens)
    uniforms = draw_uniforms(batch, n_plus_1, generator, device)  # [B, N+1]
    return _verify_tree_core(target_probs, draft_probs, tree_tokens, parents, uniforms)
