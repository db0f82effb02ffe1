"""The replica's glue to the compiled decode rounds (decode_kernel): every call into the kernel
is here.

`Replica.run` calls `_kernel_rounds` before planning an iteration inline; it runs the uneventful
decode rounds that follow in compiled code and leaves the replica's state where the Python path
would have left it after those rounds (tests/test_decode_kernel.py). `_kernel_plan` decides once
per run whether the kernel applies (`Replica._kern`, None where it does not); `_kernel_terms`,
`_kernel_first_index` and `_kernel_first_row` build the cost terms the kernel reads.

A mixin of `Replica` (simulator/replica.py): it reads and writes the decode batch's fields
(decode_batch.py) and the replica's clock directly.
"""
from __future__ import annotations

import numpy as np

from .step_cost import FixedStepCost, RooflineStepCost


class CompiledRounds:
    """Runs stretches of uneventful decode rounds in decode_kernel (a `Replica` mixin)."""

    def _kernel_plan(self):
        """What decode_kernel needs that holds for the whole run, or None where it does not apply:
        no n-gram matching, no policy that observes rounds; speculating, a static or batch-schedule
        K and accept lengths from the block sampler; fixed step costs, or the roofline with a
        drafter whose K steps are CostModel.steps_time_s (chained; none needed for K = 0 only)."""
        if self._observes or self.ngram or (self.spec_on and (self._block is None or self._k_of_n is None)):
            return None
        from . import decode_kernel as dk
        fn = dk.kernel()
        if fn is None:
            return None
        cost = self.cost
        plan = dict(fn=fn, kind=0, no_hot=np.zeros(dk.HOT_SIZE), z=np.zeros((1, 4)), no_em=np.zeros(1, dtype=np.int64),
                    ft=0.0, fd=0.0, first_is_b=False, branches=1, out=np.zeros((dk.MAX_ROUNDS, dk.ROW_COLUMNS)),
                    terms={}, tc=None, dc=None)
        if isinstance(cost, FixedStepCost):
            plan.update(ft=cost.target_step_s, fd=cost.draft_step_s)
            return plan
        if not isinstance(cost, RooflineStepCost) or "time_s" in cost.cm.__dict__ or cost.target_s != cost.cm.time_s:
            return None                                              # (instrumented: keep its calls)
        plan.update(kind=1, tc=cost.cm)
        if not self.spec_on:
            return plan
        drafter = cost.drafter
        if drafter is None or drafter.draft_cost is None:
            return None
        m = drafter.spec.method
        if m in ("medusa", "parallel") or (m == "self_spec" and drafter.spec.kv_budget_tokens):
            return None
        dc = drafter.draft_cost
        if "time_s" in dc.__dict__ or cost.draft_s != drafter.propose_time_s:
            return None
        plan.update(dc=dc, first_is_b=m == "self_spec", branches=int(drafter.branches))
        return plan

    def _kernel_terms(self, n: int, k: int):
        """For n decode sequences at K = k: the target pass's (weights, head, rest, all-reduce)
        terms ([1, 4]) and the drafter's ([rows, 4]: row 0 a later step's, n x branches tokens;
        row 1 + f - n a first step ingesting f = n .. n (k + 1) tokens, NaN until a round needs it:
        `_kernel_first_row`), computed by the cost models' own terms_row with the Python ints
        the replica passes them; and the target's and drafter's constants for passes over n
        sequences (CostModel.kernel_constants)."""
        kp = self._kern
        if kp["kind"] == 0:
            return kp["z"], kp["z"], kp["no_hot"], kp["no_hot"]
        tc, dc = kp["tc"], kp["dc"]
        T = n * self.widths[k]
        tterms = tc.terms_row(T, T)[None, :]
        thot = tc.kernel_constants(n)
        if not k:
            return tterms, kp["z"], thot, kp["no_hot"]
        nb = n * kp["branches"]
        dterms = np.full((2 if kp["first_is_b"] else n * k + 2, 4), np.nan)
        dterms[0] = dc.terms_row(nb, nb)
        return tterms, dterms, thot, dc.kernel_constants(n)

    def _kernel_first_index(self, dterms: np.ndarray, n: int) -> int:
        """The row of dterms the next round's first draft step reads (1 + f - n, f the tokens it
        ingests), or 0 where f lies outside the table."""
        r = 1 + (n if self._kern["first_is_b"] else self.pend_sum) - n
        return r if 1 <= r < len(dterms) else 0

    def _kernel_first_row(self, dterms: np.ndarray, n: int) -> bool:
        """Build the catch-up row the next round's first draft step needs, if it is in the table
        and not built yet; True if it built one."""
        r = self._kernel_first_index(dterms, n)
        if not r or dterms[r, 0] == dterms[r, 0]:
            return False
        dterms[r] = self._kern["dc"].terms_row(r - 1 + n, n)
        return True

    def _kernel_rounds(self, start: float, peek_s: float) -> int:
        """Run the uneventful decode rounds that follow in decode_kernel (none where the next
        round is not one), retiring the sequences a round finishes and going on after them;
        returns how many rounds ran. start: the clock the inline chain started at."""
        kp, blk = self._kern, self._block
        total = 0
        while self.n:
            n = self.n
            k = self._k_of_n[n] if self.spec_on else 0
            if k != self._kv_k or (k and (blk.k != k or blk.pos + n > blk.rows)):
                break
            blocks = self._blocks
            if blocks is None:
                blocks = self._blocks = self._count_blocks(n)
            if self.waiting and n < self.max_seqs and self.max_tokens > n * self.widths[k]:
                # the queue's head stays out only if it does not fit now: the rounds only take KV away
                if self._first_chunk(self.waiting[0], self.max_tokens - n * self.widths[k])[2] \
                        <= self.capacity - blocks - self.pf_blocks:
                    break
            ent = kp["terms"].get(n)
            if ent is None:
                ent = kp["terms"][n] = self._kernel_terms(n, k)
            tterms, dterms, thot, dhot = ent
            first_x, xterms = -1, dterms
            if k and kp["kind"]:
                if not self._kernel_first_index(dterms, n):
                    first_x = self.pend_sum      # a first step outside the table (catching up on a prompt)
                    xterms = np.array([dterms[0], kp["dc"].terms_row(first_x, n)])
                else:
                    self._kernel_first_row(dterms, n)
            m, now, sum_ctx, pend_sum, rem_lb, blocks, pos, last, finished = kp["fn"](
                self.d_kvc, self.d_lim, blk.em if k else kp["no_em"], kp["out"], self._scratch, thot, tterms,
                dhot, dterms, xterms, first_x, n, k, self.widths[k], self.bs, self.capacity, self._ctx_shift,
                self.sum_ctx, self.pend_sum, self.rem_lb, blocks, blk.pos if k else 0, blk.rows if k else 0,
                float(self.now), float(start), float(peek_s), self.silent_finish, self.track_catchup, kp["kind"],
                kp["first_is_b"], kp["branches"], kp["ft"], kp["fd"],
                self._spec_overhead_s if k else self._overhead_s, self.index)
            if not m:
                break
            total += m
            self._logbuf.frombytes(kp["out"][:m].tobytes())
            self.now, self.sum_ctx, self.rem_lb, self._blocks, self._res = now, sum_ctx, rem_lb, blocks, None
            self.rounds_cum += m
            if k:
                blk.pos = pos
                self.k_cum += k * m
                if self.track_catchup:
                    self._pend_em = self._scratch[:n].copy() if finished else blk.em[last:last + n]
                    self.pend_sum = pend_sum
            elif self.track_catchup:      # plain decode: every sequence emitted one token a round (the
                if self._pend_em is not None:     # block counter's _res is recounted when next needed,
                    self._sync_pend()             # whatever _phase says)
                self.d_pend[:n] += m
                self.pend_sum += n * m
            if not finished:
                if k and kp["kind"] and self._kernel_first_row(dterms, n):
                    continue                     # it stopped for a catch-up row not built yet
                break
            self._retire(n, now)
        return total
