"""How the replica asks its policy for K, and what it tells the policies that price K.

`_choose_k(n)` asks the policy for the K of a decode batch of n sequences and lowers it while the
decode positions would exceed max_num_batched_tokens. What the policy hears depends on what it
declares (policies.Policy): a policy with `k_by_batch` is asked once per batch size at start-up
(`_k_by_batch_table`); one with `prices_rounds` gets this iteration's state and prices
(`_iteration_s`: the pass `Replica._schedule` would build at each K, priced with the same
cost-model calls); one with `reads_request_counts` gets the requests the previous iteration
scheduled and the requests the replica holds; the others get `round_time_s` alone.

A mixin of `Replica` (simulator/serving/replica.py).
"""
from __future__ import annotations

import numpy as np

from ..costs.pass_shape import causal_pairs
from .policies import PolicyState


class KChoice:
    """K for the decode batch, and its price at each K (a `Replica` mixin)."""

    def _k_by_batch_table(self) -> list[int] | None:
        """K for each decode batch size 0..max_num_seqs, for the policies whose K depends on
        nothing else (None for the others, or with speculation off)."""
        if not (self.spec_on and self.policy.k_by_batch):
            return None
        return [0] + [self._choose_k(b) for b in range(1, self.max_seqs + 1)]

    def _round_time_s(self, batch: int, k: int) -> float:
        mean_ctx = self.sum_ctx / self.n if self.n else 0.0
        return self.cost.round_time_s(batch, k, mean_ctx, self.widths[k])

    def _choose_k(self, n: int) -> int:
        if self.prices_rounds:
            # NOTE: the mean tokens the running sequences still have to emit comes from their true
            # output lengths, which the simulator knows and a server would have to estimate
            # (max_tokens, a length predictor); goodput uses it only to amortise catch-up.
            remaining = (float(self.d_lim[:n].sum()) - self.sum_ctx) / n
            self.state = PolicyState(round_time_s=self._round_time_s, mean_context=self.sum_ctx / n,
                                     num_waiting=len(self.waiting), now_s=self.now,
                                     iteration_s=self._iteration_s, remaining_tokens=remaining)
        elif self._counts_requests:
            # the previous iteration's log row holds the requests it scheduled (ITER_COLUMNS "batch":
            # decode sequences + prefill chunks); none before the first
            held = n + len(self.prefills) + len(self.waiting)
            self.state = PolicyState(round_time_s=self._round_time_s, num_waiting=len(self.waiting), now_s=self.now,
                                     scheduled_requests=self._row[3] if self._row else 0,
                                     active_requests=min(held, self.max_seqs))
        k = self.policy.choose_k(n, self.state)
        while k and n * self.widths[k] > self.max_tokens:    # the decode positions must fit the budget
            k -= 1
        return k

    def _iteration_s(self, tokens_per_seq: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What this iteration costs at each K = 0..k_max, priced with the cost-model calls
        `_schedule` makes (for the goodput policy). tokens_per_seq: [k_max + 1] expected tokens a
        round at K emits per sequence. Returns three [k_max + 1] arrays of seconds:

          pass_s    drafter proposal + ONE fused target pass over the decode positions and this
                    iteration's prefill chunks + host overhead. The chunks are the ones K = 0 would
                    schedule (the prefill walk's dry run at K = 0's token budget): where a larger K
                    leaves too little token budget for all of them, the pass is priced with them
                    anyway, which is what the chunks it pushes out cost in the next, equally
                    compute-bound pass;
          decode_s  the same without the prefill chunks (a decode round on its own);
          once_s    the drafter's one-off catch-up. Of the pend_sum tokens the drafter must ingest,
                    min(pend_sum, n x tokens_per_seq[K]) is what a round at K leaves for the next
                    one (in pass_s and decode_s); the rest (tokens emitted while K was 0, prompts
                    new to the drafter) is here. The catch-up is the first draft step's input
                    (later steps see one token per sequence), so it is priced on a one-step proposal.
        inf where the decode positions exceed the token budget (`_choose_k` would lower that K).
        NOTE: one scalar cost-model call per K and term: on K_max + 1 = 5 candidates that is several
        times cheaper than one call on numpy arrays."""
        n, target, draft, oh, oh_spec = self.n, self._target_s, self._draft_s, self._overhead_s, self._spec_overhead_s
        sum_c = float(self.sum_ctx - n)                                       # cached before this pass
        mean_c = sum_c / n
        m = self.match_p * n if self.ngram else float(n)      # sequences that verify K + 1 (ngram: expected)
        pf = None
        if self.prefills or self.waiting:
            dec_blocks = self._blocks if self._blocks is not None else self._count_blocks(n)
            _, tok, ctx, pairs, logits, _ = self._walk_prefills(
                n, self.max_tokens - n, self.capacity - dec_blocks - self.pf_blocks, dry_run=True)
            if tok:
                pf = (float(tok), float(ctx), float(pairs), float(logits))
        u = float(self.pend_sum)
        K1 = self.k_max + 1
        pass_s, decode_s, once_s = np.full(K1, np.inf), np.full(K1, np.inf), np.zeros(K1)
        d1_all = draft(n, 1, sum_c, u) if u > n * float(tokens_per_seq[1]) else 0.0   # one-off part at any K
        for k in range(K1):
            w = float(self.widths[k])
            if k and n * w > self.max_tokens:          # `_choose_k` would lower this K
                break
            if k:
                dec_tok = m * w + (n - m)
                dec_pairs = m * causal_pairs(w, mean_c) + (n - m) * causal_pairs(1, mean_c)
                u_rec = min(u, n * float(tokens_per_seq[k]))
                d = draft(n, k, sum_c, u_rec)
                if u > u_rec:
                    once_s[k] = d1_all - draft(n, 1, sum_c, u_rec)
            else:
                dec_tok, dec_pairs, d = float(n), sum_c + n, 0.0
            decode_s[k] = target(dec_tok, sum_c, dec_pairs, dec_tok, n) + d + (oh_spec if k else oh)
            if pf is None:
                pass_s[k] = decode_s[k]
            else:
                pass_s[k] = target(dec_tok + pf[0], sum_c + pf[1], dec_pairs + pf[2], dec_tok + pf[3],
                                   self._rows(n, pf[0])) + d + (oh_spec if k else oh)
        return pass_s, decode_s, once_s
