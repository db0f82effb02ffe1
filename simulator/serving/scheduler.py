"""vLLM-style scheduling of one replica: admission, chunked prefill and preemption.

Each iteration `Replica._schedule` first makes room for the decode batch's KV (`_make_room`:
preempt by recompute from the end of the running order, partial prefills first), then
`_walk_prefills` continues the partial prefills (chunks share the token budget left after the
decode positions) and admits waiting requests FCFS while max_num_seqs, the token budget and free
KV blocks allow (none after a preemption in this iteration). The same walk, in its dry-run mode,
tells the goodput pricing (k_choice.py) which chunks a K = 0 pass would hold, touching nothing.
After the pass `_complete_prefills` advances the chunks; a prompt whose last chunk was computed
emits its first token and joins the decode batch.

Partial prefills are kept in admission order as [rid, need, done, chunk, held_blocks] lists.
A mixin of `Replica` (simulator/serving/replica.py), with the decode batch's fields (decode_batch.py).
"""
from __future__ import annotations

from collections import deque

import numpy as np

from ..costs.pass_shape import causal_pairs


class Scheduler:
    """Waiting queue, partial prefills and their KV blocks (a `Replica` mixin)."""

    def _init_queues(self) -> None:
        # partial prefills, in admission order: [rid, need, done, chunk, held_blocks]
        self.prefills: list[list[int]] = []
        self.pf_blocks = 0             # blocks held by partial prefills
        self.waiting: deque[int] = deque()
        self.outstanding = 0           # waiting + running, for the router
        self._preempted = 0            # preemptions in the iteration being planned

    def _first_chunk(self, rid: int, budget: int, free: int) -> tuple[int, int, int, int]:
        """A waiting request's tokens in all (prompt + what it generated before a preemption), the
        first chunk a budget of `budget` tokens admits of them, the KV blocks that chunk takes and
        the tokens found cached before it (0 here; a prefix cache: prefix_replica.py), `free`
        blocks being free."""
        t = self.table
        need_t = t.prompt.item(rid) + t.generated.item(rid)      # (item: a Python int, not a numpy scalar)
        c = min(need_t, budget)
        return need_t, c, -(-c // self.bs), 0

    def _take_prefix(self, rid: int, hit: int) -> None:
        """A prefix cache's hook: request rid was admitted with `hit` tokens cached (prefix_replica.py)."""

    def _make_room(self, k: int, dec_blocks: int) -> tuple[int, int]:
        """Preempt from the end of the running order until the decode batch's KV fits:
        partial prefills (admitted last) first, then decode sequences, the latest first."""
        cap = self.capacity
        while self.prefills and dec_blocks + self.pf_blocks > cap:
            self._preempt_prefill()
        if dec_blocks > cap:
            n = self.n
            need = self.d_kvc[:n] // self.bs
            keep = int(np.searchsorted(np.cumsum(need), cap, side="right"))
            self._preempt_decode_tail(keep)
            dec_blocks = int(need[: self.n].sum())
            self._blocks = dec_blocks
        return self.n, dec_blocks

    def _walk_prefills(self, n: int, budget: int, free: int, dry_run: bool = False):
        """Chunks for partial prefills (in order), then FCFS admission of waiting requests, within
        the token budget, free KV blocks and max_num_seqs, beside n decode sequences. Returns the
        scheduled entries, the prefill part of the pass shape (tokens, cached context, query-key
        pairs, logits) and the free blocks left.

        dry_run: the walk read without touching anything, for pricing an iteration: no partial
        prefill is preempted (its chunk counts even where the free blocks fall short), nothing is
        admitted or recorded, and no entries are returned."""
        bs = self.bs
        pf_tok = pf_ctx = pf_logits = pf_pairs = 0
        sched: list[list[int]] = []
        prefills = self.prefills
        i = 0
        while i < len(prefills) and budget > 0:
            e = prefills[i]
            rid, need_t, done, _c, held = e
            c = min(need_t - done, budget)
            new_b = -(-(done + c) // bs) - held
            if not dry_run:
                while new_b > free and len(prefills) > i + 1:          # preempt later prefills first
                    free += prefills[-1][4]
                    self._preempt_prefill()
                if new_b > free:                                        # then this one itself
                    free += held
                    self._preempt_prefill()
                    break
                e[3] = c
                e[4] = held + new_b
                self.pf_blocks += new_b
                sched.append(e)
            free -= new_b
            budget -= c
            pf_tok += c
            pf_ctx += done
            pf_pairs += causal_pairs(c, done)
            pf_logits += done + c == need_t
            i += 1

        waiting = self.waiting
        if waiting and (dry_run or not self._preempted):    # vLLM admits nothing in an iteration that preempted
            seqs = n + len(prefills)
            j = 0                                   # the next request to look at (admitting pops it)
            while j < len(waiting) and budget > 0 and seqs < self.max_seqs:
                rid = waiting[j]
                need_t, c, b, hit = self._first_chunk(rid, budget, free)
                if b > free:
                    break
                free -= b
                seqs += 1
                budget -= c
                pf_tok += c
                if hit:                             # a prefix cache's hit: its tokens are context
                    pf_ctx += hit
                    pf_pairs += causal_pairs(c, hit)
                    if not dry_run:
                        self._take_prefix(rid, hit)
                else:
                    pf_pairs += causal_pairs(c, 0)
                pf_logits += hit + c == need_t
                if dry_run:
                    j += 1
                    continue
                waiting.popleft()
                e = [rid, need_t, hit, c, b]
                prefills.append(e)
                sched.append(e)
                self.pf_blocks += b
                if self.trace is not None:
                    self.trace.append((self.now, "admit", rid))
        return sched, pf_tok, pf_ctx, pf_pairs, pf_logits, free

    def _preempt_prefill(self) -> None:
        rid, _need, _done, _chunk, held = self.prefills.pop()
        self.pf_blocks -= held
        self._requeue(rid)

    def _preempt_decode_tail(self, keep: int) -> None:
        """Preempt decode slots keep..n-1, the last first."""
        t = self.table
        if self._pend_em is not None:
            self._sync_pend()
        self._lim = None
        for j in range(self.n - 1, keep - 1, -1):
            rid, ctx, prompt = self._leave(j)
            t.generated[rid] = ctx - prompt
            self.n = j
            self._requeue(rid)

    def _requeue(self, rid: int) -> None:
        self.table.preemptions[rid] += 1
        self.waiting.appendleft(rid)
        self._preempted += 1
        if self.trace is not None:
            self.trace.append((self.now, "preempt", rid))

    def _complete_prefills(self, now: float) -> int:
        """Advance the scheduled chunks; prompts now fully computed emit their first token and
        join the decode batch (or finish, for 1-token outputs). Returns how many did."""
        t = self.table
        for e in self._pf_sched:
            e[2] += e[3]
        first = 0
        keep = []
        for e in self.prefills:
            rid, need_t, done, _c, held = e
            if done < need_t:
                keep.append(e)
                continue
            self.pf_blocks -= held
            first += 1
            generated = t.generated.item(rid) + 1      # (item: Python numbers, not numpy scalars)
            t.generated[rid] = generated
            first_s = t.first_token_s.item(rid)
            if first_s != first_s:                      # NaN: the very first token
                t.first_token_s[rid] = now
                if self.trace is not None:
                    self.trace.append((now, "first_token", rid))
            output = t.output.item(rid)
            remaining = output - generated
            if remaining == 0:
                self._finish(rid, now)
                continue
            self._join(rid, need_t + 1, t.prompt.item(rid), output, remaining)
        self.prefills = keep
        return first
