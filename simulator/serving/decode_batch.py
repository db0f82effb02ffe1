"""The running decode batch of one replica: its slots, and sequences joining, leaving, retiring.

The batch lives in one preallocated numpy array (slots 0..n-1, in admission order), so an
iteration costs a handful of vectorised operations whatever the batch size: one in-place add per
round advances every sequence's token counter (`_advance`, `_advance_plain`); KV blocks are kept
by counting through plain-decode rounds and recomputed (one division) after speculative ones;
per-request counters are folded into the RequestTable only when a sequence leaves the batch.

Small batches: a numpy call costs about a microsecond whatever its size, so with up to SMALL_BATCH
decode sequences the per-sequence sums (KV blocks, the fewest tokens left, the finished slots) run on
Python lists instead; both give the same integers, and this file is the only one that holds both.
Measured with numpy alone (`benchmarks/bench_simulator.py --instructions --requests 2000`): 42,096
instead of 39,311 instructions per decode iteration with speculation on (case a-on, mean batch 10),
22,490 instead of 22,266 with it off (a-off, mean batch 22).

A mixin of `Replica` (simulator/serving/replica.py): the replica's loop reads these fields every iteration,
and as the replica's own attributes each read is one lookup.
"""
from __future__ import annotations

import operator

import numpy as np

BIG = 1 << 62          # more tokens than any sequence has left (decode_kernel imports it)
SMALL_BATCH = 16       # up to this many decode sequences, per-sequence sums run in Python lists


class DecodeBatch:
    """Decode slots and their running sums (a `Replica` mixin; needs self.bs, self.table)."""

    def _init_batch(self, max_seqs: int) -> None:
        # Decode slots [S], in admission order. One counter advances with every emitted token:
        #   d_kvc = context + K_kv + block_size - 1 (context = prompt + generated tokens; K_kv the
        #   lookahead it includes), so that KV blocks = d_kvc // block_size, one division;
        # the rest is derived from it (`_ctx_shift` = K_kv + block_size - 1):
        #   context = d_kvc - _ctx_shift, generated = context - d_prompt,
        #   tokens still to emit = d_lim - context (d_lim = prompt + output length),
        #   tokens emitted by rounds since joining the decode batch = context - d_ctx0.
        # Then: request id, drafter catch-up tokens, round / drafted counters at entry, drafts
        # not proposed (n-gram misses).
        # All are rows of one [9, S] array, so that removing finished sequences is one operation.
        S = max_seqs
        self._slots = np.zeros((9, S), dtype=np.int64)
        (self.d_kvc, self.d_prompt, self.d_lim, self.d_ctx0, self.d_id, self.d_pend,
         self.d_r0, self.d_kc0, self.d_miss) = self._slots
        self._kv_k = 0                 # the K that d_kvc includes
        self._ctx_shift = self.bs - 1  # _kv_k + block_size - 1
        self._ones = np.ones(S, dtype=np.int64)
        # KV blocks of the decode sequences (sum of d_kvc // block_size), kept without numpy
        # through plain-decode rounds: every sequence then gains exactly one token, so the ones
        # that need a new block are those with d_kvc = block_size - 1 (mod block_size), counted
        # in _res by (d_kvc - _phase) mod block_size. None: unknown (recomputed when needed).
        self._blocks: int | None = 0
        self._res: list[int] | None = [0] * self.bs
        self._phase = 0
        self._scratch = np.zeros(S, dtype=np.int64)
        self.n = 0                     # decode sequences
        self._lim: list[int] | None = None   # d_lim[:n] as a list, for small batches (None: not read since n changed)
        self.sum_ctx = 0               # sum of the decode sequences' contexts
        self.pend_sum = 0              # sum of d_pend[:n]
        # NOTE: a speculative round's [n] tokens emitted are d_pend[:n]'s new values; they are
        # written only when d_pend is next read or changed (`_sync_pend`: a slot leaves, a plain
        # round), not every round. Slots n.. are not covered, so joining sequences write theirs.
        self._pend_em: np.ndarray | None = None
        self.rem_lb = BIG              # lower bound on the tokens any decode sequence has left to emit:
                                       # no exact check while > K + 1
        self.rounds_cum = 0            # decode rounds this replica ran
        self.k_cum = 0                 # sum of K over those rounds (drafts per sequence)

    def _advance(self, n: int, k: int, em: np.ndarray, es: int) -> tuple[int, bool]:
        """A speculative round at K = k: the first n slots emit em ([n] tokens, es in all), each capped
        at what it had left to emit. Returns (tokens emitted, whether a sequence reached its output
        length: `_retire` then removes it)."""
        kvc = self.d_kvc[:n]                                              # [n] token counters
        kvc += em
        kv = kvc.tolist() if n <= SMALL_BATCH else None                   # few sequences: Python sums
        if self.rem_lb <= k + 1:                                          # someone may reach its output length
            low = self._min_remaining(n, kv)                              # negative where em overshot
            if low < 0:                                                   # cap em at what was left
                rem = self._remaining(n)
                over = np.minimum(rem, 0, out=rem)                        # [n] <= 0
                kvc += over
                em = em + over                                            # a copy: em may be a read-only view
                es += int(np.add.reduce(over))
                low = 0
                kv = None
            self.rem_lb = low
            finished_any = low == 0
        else:
            self.rem_lb -= k + 1
            finished_any = False
        # KV blocks for the next _schedule (None: it counts them)
        if kv is not None:
            bs = self.bs
            self._blocks = sum([x // bs for x in kv])
        else:
            self._blocks = None
        self._res = None
        if self.track_catchup:
            self._pend_em = em                  # d_pend[:n] = em, when next read (_sync_pend)
            self.pend_sum = es
        self.k_cum += k
        self.sum_ctx += es
        self.rounds_cum += 1
        return es, finished_any

    def _advance_plain(self, n: int) -> bool:
        """A plain-decode round: the first n slots emit one token each. Returns whether a sequence
        reached its output length."""
        kvc = self.d_kvc[:n]
        bs = self.bs
        res = self._res
        if res is None:
            res = self._res = np.bincount((kvc - self._phase) % bs, minlength=bs).tolist()
        if self._blocks is not None:     # those at block_size - 1 (mod block_size) cross a boundary
            self._blocks += res[(bs - 1 - self._phase) % bs]
        self._phase = (self._phase + 1) % bs
        kvc += self._ones[:n]
        if self.track_catchup:
            if self._pend_em is not None:
                self._sync_pend()
            self.d_pend[:n] += self._ones[:n]
            self.pend_sum += n
        self.rem_lb -= 1
        self.sum_ctx += n
        self.rounds_cum += 1
        if self.rem_lb <= 0:
            self.rem_lb = self._min_remaining(n)
            return self.rem_lb == 0
        return False

    def _count_blocks(self, n: int) -> int:
        """KV blocks of the first n decode sequences, sum of d_kvc // block_size.
        NOTE: on a few sequences a Python sum beats two numpy calls (~1 us against ~2.5 us)."""
        bs = self.bs
        if n <= SMALL_BATCH:
            return sum([kv // bs for kv in self.d_kvc[:n].tolist()])
        return int(np.add.reduce(np.floor_divide(self.d_kvc[:n], bs, out=self._scratch[:n])))

    def _sync_pend(self) -> None:
        """Write the pending speculative round's tokens emitted into d_pend (see _pend_em)."""
        em, self._pend_em = self._pend_em, None
        self.d_pend[: em.size] = em

    def _join(self, rid: int, ctx: int, prompt: int, output: int, remaining: int) -> None:
        """Request rid joins the decode batch in slot n with `ctx` tokens computed (its prompt and
        first token; `remaining` still to emit)."""
        j = self.n
        self.d_id[j] = rid
        kv = ctx + self._ctx_shift
        self.d_kvc[j] = kv
        if self._blocks is not None:
            self._blocks += kv // self.bs
        if self._res is not None:
            self._res[(kv - self._phase) % self.bs] += 1
        self.d_prompt[j] = prompt
        self.d_lim[j] = prompt + output
        self.d_ctx0[j] = ctx
        self.d_pend[j] = ctx
        self.d_r0[j] = self.rounds_cum
        self.d_kc0[j] = self.k_cum
        self.d_miss[j] = 0
        self.n = j + 1
        self._lim = None
        self.sum_ctx += ctx
        if self.track_catchup:
            self.pend_sum += ctx
        if remaining < self.rem_lb:
            self.rem_lb = remaining

    def _leave(self, j: int) -> tuple[int, int, int]:
        """Slot j leaves the decode batch (finished or preempted): fold its counters into the
        request table, take its KV out of the block counts and its context and catch-up out of
        the sums. Returns (request id, context, prompt). One read of the slot's column."""
        if self._pend_em is not None:
            self._sync_pend()
        kv, prompt, _lim, ctx0, rid, pend, r0, kc0, miss = self._slots[:, j].tolist()
        ctx = kv - self._ctx_shift                      # prompt + generated tokens
        t = self.table
        rounds = self.rounds_cum - r0
        t.rounds[rid] = t.rounds.item(rid) + rounds     # (item: Python ints, not numpy scalars)
        t.accepted[rid] = t.accepted.item(rid) + ctx - ctx0 - rounds    # tokens emitted by rounds - rounds
        t.drafted[rid] = t.drafted.item(rid) + self.k_cum - kc0 - miss
        if self._blocks is not None:
            self._blocks -= kv // self.bs
        if self._res is not None:
            self._res[(kv - self._phase) % self.bs] -= 1
        self.sum_ctx -= ctx
        self.pend_sum -= pend
        return rid, ctx, prompt

    def _remaining(self, n: int) -> np.ndarray:
        """[n] tokens the first n decode sequences have left to emit (in the scratch buffer)."""
        rem = np.subtract(self.d_lim[:n], self.d_kvc[:n], out=self._scratch[:n])
        rem += self._ctx_shift
        return rem

    def _min_remaining(self, n: int, kv: list[int] | None = None) -> int:
        """The fewest tokens any of the first n decode sequences has left to emit (negative where a
        round overshot its output length). kv: d_kvc[:n] as a list, where the caller has it.
        NOTE: up to SMALL_BATCH sequences a Python min over lists beats two numpy calls."""
        if n > SMALL_BATCH:             # (shifted after the min: one numpy call fewer than _remaining)
            return int(np.minimum.reduce(np.subtract(self.d_lim[:n], self.d_kvc[:n], out=self._scratch[:n]))) \
                + self._ctx_shift
        lim = self._lim
        if lim is None:
            lim = self._lim = self.d_lim[:n].tolist()
        return min(map(operator.sub, lim, self.d_kvc[:n].tolist() if kv is None else kv)) + self._ctx_shift

    def _retire(self, n_old: int, now: float) -> None:
        """Remove finished sequences among the first n_old decode slots, keeping the order."""
        t = self.table
        if self._pend_em is not None:           # before the slots move
            self._sync_pend()
        shift = self._ctx_shift
        if n_old <= SMALL_BATCH:                # few sequences: Python lists beat numpy calls
            gone = [j for j, (lim, kv) in enumerate(zip(self.d_lim[:n_old].tolist(), self.d_kvc[:n_old].tolist()))
                    if lim - kv + shift == 0]
        else:
            gone = np.flatnonzero(self._remaining(n_old) == 0).tolist()
        rids = []
        for j in gone:
            rid = self._leave(j)[0]
            rids.append(rid)
            t.generated[rid] = t.output[rid]
        n_all = self.n
        m = n_all - len(rids)
        if len(gone) == 1:                      # the usual case: shift the later slots down one
            j = gone[0]
            self._slots[:, j:m] = self._slots[:, j + 1:n_all]      # (numpy copes with the overlap)
        else:
            keep = np.ones(n_all, dtype=bool)   # sequences that joined from prefill this iteration stay
            keep[gone] = False
            self._slots[:, :m] = self._slots[:, :n_all][:, keep]
        self.n = m
        self._lim = None
        self.rem_lb = self._min_remaining(m) if m else BIG
        for rid in rids:                        # notify after compaction: the replica is consistent
            self._finish(rid, now)
