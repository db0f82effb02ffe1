"""The replica's glue to the compiled decode rounds (decode_kernel): every call into the kernel
is here.

`Replica.run` calls `_kernel_rounds` before planning an iteration inline; it runs the uneventful
decode rounds that follow in compiled code and leaves the replica's state where the Python path
would have left it after those rounds (tests/test_decode_kernel.py). `_kernel_plan` decides once
per run whether the kernel applies (`Replica._kern`, a KernelPlan, None where it does not);
`_kernel_rounds` picks and builds the first-step rows the kernel reads (decode_kernel.KernelPlan
holds the rest: the per-batch-size terms and constants).

A mixin of `Replica` (simulator/serving/replica.py): it reads and writes the decode batch's fields
(decode_batch.py) and the replica's clock directly.
"""
from __future__ import annotations

import dataclasses

from .step_cost import FixedStepCost, RooflineStepCost


class CompiledRounds:
    """Runs stretches of uneventful decode rounds in decode_kernel (a `Replica` mixin)."""
    crosses = False      # the rounds may run past peek_s, the last of them crossing it (RunAhead.crosses)
    _crossed_n = 0       # the round crossing peek_s finished sequences among its first n: retired at its end
    holds_crossed_row = False      # the crossing round's log row too waits for its end (Replica.run)
    _crossed_row: bytes | None = None

    def _complete_crossed(self) -> None:
        """What `_complete` does at the end of a round that the compiled rounds ran before it
        (Replica.run): its finishes retired, its log row written."""
        if self._crossed_n:
            self._retire_crossed()
        self._logbuf.frombytes(self._crossed_row)
        self._crossed_row = None

    def _retire_crossed(self) -> None:
        """Retire what the round that crossed peek_s finished, at its end (self.now): a router
        reading the replicas at an arrival during that round sees them before it, as SimPy's
        timeout per iteration shows them (a finish is all such a round changes that a router reads:
        `outstanding`, a prefix cache)."""
        n, self._crossed_n = self._crossed_n, 0
        self._retire(n, self.now)

    def _kernel_plan(self):
        """What decode_kernel needs that holds for the whole run, or None where it does not apply.
        Its RoundCosts (by decode batch size) are shared by the replicas of a run, which share the
        step costs and the K of each batch size: a dict kept on the step-cost object; so is the
        buffer the rounds write their log rows to (copied to the log before any other replica
        runs: one buffer in the caches for all replicas)."""
        kp = self._own_kernel_plan()
        if kp is None:
            return None
        shared = self.cost.__dict__
        return dataclasses.replace(kp, costs=shared.setdefault("_kernel_round_costs", {}),
                                   out=shared.setdefault("_kernel_out", kp.out))

    def _own_kernel_plan(self):
        """This replica's KernelPlan, or None where the kernel does not apply: no n-gram matching,
        no policy that observes rounds; speculating, a static or batch-schedule K and accept lengths
        from the block sampler; fixed step costs, or the roofline with a drafter whose K steps are
        CostModel.steps_time_s (chained; none needed for K = 0 only)."""
        if self._observes or self.ngram or (self.spec_on and (self._block is None or self._k_of_n is None)):
            return None
        from . import decode_kernel as dk
        fn = dk.kernel()
        if fn is None:
            return None
        cost, fixed = self.cost, dict(block_size=self.bs, capacity=self.capacity, index=self.index)
        if isinstance(cost, FixedStepCost):
            return dk.plan(fn, fixed_target_s=cost.target_step_s, fixed_draft_s=cost.draft_step_s, **fixed)
        if not isinstance(cost, RooflineStepCost) or "time_s" in cost.cm.__dict__ or cost.target_s != cost.cm.time_s:
            return None                                              # (instrumented: keep its calls)
        if not self.spec_on:
            return dk.plan(fn, target=cost.cm, **fixed)
        drafter = cost.drafter
        if drafter is None or not drafter.chained_steps:
            return None
        dc = drafter.draft_cost
        if "time_s" in dc.__dict__ or cost.draft_s != drafter.propose_time_s:
            return None
        return dk.plan(fn, target=cost.cm, draft=dc, first_is_b=drafter.spec.first_step_one_token,
                       branches=int(drafter.branches), **fixed)

    def _kernel_rounds(self, start: float, peek_s: float, stop_at_finish: bool = False) -> int:
        """Run the uneventful decode rounds that follow in decode_kernel (none where the next
        round is not one), retiring the sequences a round finishes and going on after them;
        returns how many rounds ran. start: the clock the inline chain started at. With
        `crosses`, the round that starts before peek_s and ends at or after it runs too, the last;
        stop_at_finish (with `crosses`): so does the first round that finishes a sequence (run_on.py).

        A round's first draft step reads the row 1 + f - n of its RoundCosts' draft terms (f the
        tokens it ingests: n for a first step of one token per sequence, else pend_sum); a row
        in the table is built before the rounds need it (KernelPlan.first_row), a first step
        outside it is passed on its own (first_x, KernelPlan.catchup_terms)."""
        kp, blk = self._kern, self._block
        roofline, costs, fn, out, first_is_b = kp.roofline, kp.costs, kp.fn, kp.out, kp.first_is_b
        start, peek_s = float(start), float(peek_s)
        cross = self.crosses
        total = 0
        while self.n:
            n = self.n
            k = self._k_of_n[n] if self.spec_on else 0
            if k != self._kv_k or (k and (blk.k != k or blk.pos + n > blk.rows)):
                break
            blocks = self._blocks
            if blocks is None:
                blocks = self._blocks = self._count_blocks(n)
            if self.waiting and n < self.max_seqs:
                budget = self.max_tokens - n * self.widths[k]
                # the queue's head stays out only if it does not fit now: the rounds only take KV away
                free = self.capacity - blocks - self.pf_blocks
                if budget > 0 and self._first_chunk(self.waiting[0], budget, free)[2] <= free:
                    break
            rc = costs.get(n)
            if rc is None:
                rc = costs[n] = kp.round_costs(n, k, self.widths[k], self._spec_overhead_s if k else self._overhead_s)
            dterms = rc.draft_terms
            first_x, xterms = -1, dterms
            if k and roofline:
                built = rc.draft_built
                r = 1 + (n if first_is_b else self.pend_sum) - n        # the first step's row
                if not 0 < r < len(built):
                    first_x = self.pend_sum      # a first step outside the table (catching up on a prompt)
                    xterms = kp.catchup_terms(dterms, first_x, n)
                elif not built[r]:
                    kp.first_row(rc, r, n)
            m, now, sum_ctx, pend_sum, rem_lb, blocks, pos, last, finished = fn(
                self.d_kvc, self.d_lim, blk.em if k else kp.no_em, out, self._scratch, kp.run, rc.round,
                rc.constants, rc.target_terms, dterms, xterms, first_x, self._ctx_shift, self.sum_ctx, self.pend_sum,
                self.rem_lb, blocks, blk.pos if k else 0, blk.rows if k else 0, float(self.now), start,
                peek_s, self.silent_finish, self.track_catchup, cross)
            if not m:
                break
            total += m
            if self.holds_crossed_row and cross and now >= peek_s:     # its row waits for its end
                self._logbuf.frombytes(out[:m - 1].tobytes())
                self._crossed_row = out[m - 1].tobytes()
            else:
                self._logbuf.frombytes(out[:m].tobytes())
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
            if cross and (now >= peek_s or (finished and stop_at_finish)):   # the round crossing peek_s
                if finished:                      # ran: the stretch's last; its finishes wait for its end
                    self._crossed_n = n       # (`_retire_crossed`)
                break
            if not finished:
                if k and roofline:       # stopped for a first-step row not built yet: build it, go on
                    r = 1 + (n if first_is_b else self.pend_sum) - n
                    if 0 < r < len(built) and not built[r]:
                        kp.first_row(rc, r, n)
                        continue
                break
            self._retire(n, now)
        return total
