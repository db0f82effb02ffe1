"""The host-side work of a speculative round: draws, the exact verify kernel, the commit.

The ground truth runs these between its forward passes; the calibration times `host_work_fn` on
random probabilities at several (batch, K) to fit the host overheads (`calibrate.fit_host`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .sampling import _inverse_cdf, draw_uniforms, verify_chain


def draw(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One token per row from probs [B, V] (float32) -> [B] int64, exactly distributed as probs.

    NOTE: the inverse CDF with one float64 uniform per row, the draw calibrate.sampling uses for
    its recovered and bonus tokens, not torch.multinomial: on a CPU multinomial draws V random
    numbers per row (0.5-0.6 ms per row at V = 16k on the development Xeon, 15-20x the inverse
    CDF), a cost no serving engine pays and the cost model does not describe (it charges the
    sampler one read of the probabilities)."""
    return _inverse_cdf(probs, draw_uniforms(probs.shape[0], 1, generator, probs.device)[:, 0])


def commit(buf: torch.Tensor, committed: torch.Tensor, new: torch.Tensor, num_new: torch.Tensor) -> torch.Tensor:
    """Write new [B, W] tokens after each sequence's committed ones in buf [B, S]; entries past
    num_new (and -1 padding) land beyond the new committed length and are overwritten later.
    Returns the new committed lengths [B]."""
    idx = committed[:, None] + torch.arange(new.shape[1], device=buf.device)[None, :]
    buf.scatter_(1, idx, new.clamp_min(0))
    return committed + num_new


def host_work_fn(batch: int, k: int, vocab: int, generator: torch.Generator) -> Callable[[], Any]:
    """One round's sampling and bookkeeping on random probabilities (K draws from the draft's q,
    verify_chain and commit; K = 0: one draw and commit): what a round spends outside the
    forward passes. `specsight calibrate` times it at several (B, K) to fit overheads.iteration_us,
    sampling_row_us and verify_round_us (calibrate.fit_host.host_overhead)."""
    dev = generator.device
    p = torch.softmax(torch.randn(batch, k + 1, vocab, device=dev, generator=generator), -1)   # [B, K+1, V]
    q = torch.softmax(torch.randn(batch, max(k, 1), vocab, device=dev, generator=generator), -1)
    buf = torch.zeros(batch, 64, dtype=torch.int64, device=dev)
    committed = torch.full((batch,), 8, dtype=torch.int64, device=dev)

    def run():
        if k == 0:
            x = draw(p[:, 0], generator)
            return commit(buf, committed, x[:, None], torch.ones_like(committed))
        xs = [draw(q[:, j], generator) for j in range(k)]
        tokens, n = verify_chain(p, q[:, :k].contiguous(), torch.stack(xs, 1), generator=generator)
        c = commit(buf, committed, tokens, n)
        return n.tolist(), c
    return run
