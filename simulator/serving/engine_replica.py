"""The replica under a real engine: the same loop (simulator/serving/replica.py), with the engine's host
time added to each iteration (EngineStepCost.host_s), which depends on the iteration's batch and
GPU time and so cannot be one constant. The iteration log's overhead column carries it. The
compiled decode rounds do not apply (they take the roofline or fixed step costs only), so every
iteration runs in Python, with the same semantics.
"""
from __future__ import annotations

from .replica import Replica

OVERHEAD_COLUMN = 12      # the iteration row's host-overhead slot (Replica._schedule, ITER_COLUMNS order)
PREFILL_TOKENS_COLUMN = 5
DRAFT_COLUMN = 9


class EngineReplica(Replica):
    """A Replica whose iterations pay the engine's host model; where the engine's drafter runs in
    the prefill step (EngineStepCost.drafts_in_prefill) an iteration with prefill chunks pays the
    drafter's pass over them (before the first token), and a sequence joins the decode batch with
    one token (its first) for the drafter to ingest instead of its whole context."""

    def _schedule(self) -> float | None:
        dt = Replica._schedule(self)
        if dt is None:
            return None
        row = self._row
        if row[PREFILL_TOKENS_COLUMN] and self.spec_on and self.cost.drafts_in_prefill:
            n, k = self._nd, self._k
            pf = self._pf_sched                    # [rid, need_t, done, chunk, held] each
            extra = self.cost.prefill_draft_s(n, k if n and k else self.k_max, self.sum_ctx - n,
                                              self.pend_sum if n and k else 0, len(pf),
                                              sum(e[3] for e in pf), sum(e[2] for e in pf))
            row[DRAFT_COLUMN] += extra
            dt += extra
        host = self.cost.host_s(self._nd, self._k, row[PREFILL_TOKENS_COLUMN], dt)
        row[OVERHEAD_COLUMN] += host
        return dt + host

    def _join(self, rid: int, ctx: int, prompt: int, output: int, remaining: int) -> None:
        Replica._join(self, rid, ctx, prompt, output, remaining)
        if self.track_catchup and self.cost.drafts_in_prefill:     # the drafter has seen the prompt
            self.d_pend[self.n - 1] = 1
            self.pend_sum += 1 - ctx
