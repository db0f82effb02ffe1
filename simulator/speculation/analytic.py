"""Batch-aware analytic speedup from the cost model (no queueing, no simulation).

Plain decode of B sequences at context c costs one target pass of B tokens; a speculative round
costs draft(B, K) + verify(B (K+1) tokens, logits at every position) and emits
E[tokens](alpha, K) per sequence. Both pay the per-iteration host overhead once. Then

    speedup(B) = E[tokens] * t_plain(B) / t_spec(B, K)

and the break-even batch is where speedup(B) crosses 1 (scipy brentq on continuous B).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..costs.cost_model import CostModel
from ..costs.pass_shape import causal_pairs
from .drafters import Drafter
from .spec_math import expected_tokens_per_round, tree_depth_acceptance


def plain_step_time_s(cm: CostModel, batch: float | np.ndarray, context: float | np.ndarray) -> float | np.ndarray:
    """One decode iteration of `batch` sequences, each with `context` cached tokens."""
    return cm.time_s(batch, batch * context, batch * causal_pairs(1, context), batch, batch) + cm.round_overhead_s(0)


def effective_alpha(drafter: Drafter, alpha: float) -> float:
    """Per-depth acceptance: trees accept a depth if any of its branches is accepted."""
    s = drafter.spec
    return tree_depth_acceptance(alpha, s.branches) if s.branches > 1 else alpha


def expected_tokens(drafter: Drafter, alpha: float, k: int) -> float:
    """Mean tokens emitted per sequence per round, counting rounds where an n-gram finds no match."""
    e = expected_tokens_per_round(effective_alpha(drafter, alpha), k)
    if drafter.spec.is_lookup:
        m = drafter.spec.match_probability
        return m * e + (1.0 - m) * 1.0
    return e


def spec_step_time_s(cm: CostModel, drafter: Drafter, batch: float | np.ndarray, context: float | np.ndarray, k: int,
                     alpha: float) -> float | np.ndarray:
    """One speculative round: propose k, verify the verify width, plus the iteration overhead and
    the verification step's fixed time."""
    if k <= 0:
        return plain_step_time_s(cm, batch, context)
    w = drafter.verify_tokens_per_seq(k)
    if drafter.spec.is_lookup:   # unmatched sequences verify one position
        m = drafter.spec.match_probability
        w = m * w + (1.0 - m)
    e_tok = expected_tokens(drafter, alpha, k)
    t_draft = drafter.propose_time_s(batch, k, batch * context, catchup_tokens=batch * e_tok)
    t_verify = cm.time_s(batch * w, batch * context, batch * causal_pairs(w, context), batch * w, batch)
    return t_draft + t_verify + cm.round_overhead_s(k)


def speedup(cm: CostModel, drafter: Drafter, batch: float | np.ndarray, context: float | np.ndarray, k: int,
            alpha: float) -> float | np.ndarray:
    """Output-token throughput of speculation over plain decoding at the same batch and context."""
    return expected_tokens(drafter, alpha, k) * plain_step_time_s(cm, batch, context) / \
        spec_step_time_s(cm, drafter, batch, context, k, alpha)


def max_batch_in_memory(cm: CostModel, drafter: Drafter | None, context: float, k: int,
                        gpu_memory_utilization: float = 0.9) -> float:
    """Sequences whose KV (context + K + 1 lookahead slots) fits beside the weights on the TP group:
    (HBM x utilisation - weights - drafter weights) / (KV bytes per sequence), all per GPU."""
    free = cm.hw.memory_bytes * gpu_memory_utilization - cm.weight_bytes_per_gpu
    kv_per_token = cm.kv_bytes_per_token
    if drafter is not None:
        free -= drafter.weight_bytes_per_gpu()
        kv_per_token += drafter.kv_bytes_per_token_per_gpu()
    return max(0.0, free / (kv_per_token * (context + k + 1)))


@dataclass(frozen=True)
class BreakEven:
    k: int
    breakeven_batch: float | None   # batch where speedup falls through 1; None if it never does in range
    speedup_at_batch1: float
    never_pays: bool                # speedup < 1 already at batch 1


def breakeven_batch(cm: CostModel, drafter: Drafter, context: float, k: int, alpha: float,
                    max_batch: float = 4096.0) -> BreakEven:
    """Solve speedup(B) = 1 for B in [1, max_batch] (the first crossing from above)."""
    from scipy.optimize import brentq  # NOTE: imported here; scipy.optimize costs seconds at CLI start-up

    def f(b: float) -> float:
        return float(speedup(cm, drafter, b, context, k, alpha)) - 1.0

    s1 = f(1.0) + 1.0
    if s1 < 1.0:
        return BreakEven(k, None, s1, True)
    grid = np.unique(np.geomspace(1.0, max_batch, 64))
    vals = speedup(cm, drafter, grid, context, k, alpha) - 1.0
    below = np.nonzero(vals < 0)[0]
    if below.size == 0:
        return BreakEven(k, None, s1, False)
    i = int(below[0])
    b = brentq(f, grid[i - 1], grid[i], xtol=1e-6)
    return BreakEven(k, float(b), s1, False)
