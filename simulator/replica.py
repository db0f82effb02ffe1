"""One replica: a tensor-parallel GPU group running vLLM-style continuous batching, one
speculative round per iteration.

Each iteration (`_schedule`, then one SimPy timeout, or none where nothing can intervene (`run`),
then `_complete`):
  1. the policy picks K for the running decode sequences (0 = plain decode; K is lowered when
     decode sequences x (K + 1) would exceed max_num_batched_tokens);
  2. KV: every decode sequence needs blocks for its context plus K lookahead slots; when the
     cache is short, requests are preempted from the end of the running order (the most
     recently admitted first) by recompute: their KV is freed and they rejoin the front of the
     waiting queue, to prefill prompt + generated tokens again;
  3. partial prefills continue (chunked prefill: chunks share the token budget left after the
     decode positions), then waiting requests are admitted in FCFS order while max_num_seqs,
     the token budget and free KV blocks allow (none after a preemption in this iteration);
  4. cost = drafter proposal + ONE fused target pass over [prefill chunks + decode sequences x
     verify width] + the per-iteration host overhead (+ the verification step's fixed time when
     K > 0: CostModel.round_overhead_s);
  5. at the end of the iteration acceptance is drawn per decode sequence; each emits
     accepted + 1 tokens (capped at its remaining output); a prompt whose last chunk was computed
     emits its first token; finished requests free their KV.

The running decode batch lives in one preallocated numpy array (slots 0..n-1, in admission
order), so an iteration costs a handful of vectorised operations whatever the batch size: one
in-place add per round advances every sequence's token counter; KV blocks are kept by counting
through plain-decode rounds and recomputed (one division) after speculative ones; acceptance with
rates shared by all sequences comes from `PrefixBlockSampler` (a slice per round, the same draws
as per-round sampling); per-request counters are folded into the RequestTable only when a
sequence leaves the batch. NOTE: a numpy call costs about a microsecond whatever its size, so
with up to SMALL_BATCH decode sequences the per-sequence sums (KV blocks, tokens left) run on
Python lists instead; both give the same integers.
"""
from __future__ import annotations

import operator
from collections import deque
from typing import Callable

import numpy as np

from .acceptance import AcceptanceModel, PrefixBlockSampler
from .metrics import IterationLog, RequestTable
from .policies import BatchSchedulePolicy, Policy, PolicyState, StaticPolicy

NAN = float("nan")


# ---- step costs ----------------------------------------------------------------------------
# Each exposes target_s(tokens, context, pairs, logits, num_seqs), draft_s(num_seqs, k, context, catchup),
# attention_rows(decode_seqs, prefill_tokens) (target_s's num_seqs) and overhead_s; the replica calls
# them once per iteration with Python numbers.
class FixedStepCost:
    """`hardware.kind: fixed`: every iteration's target pass costs target_step_s whatever it holds
    (decode, prefill chunks or both) and a speculative round adds K x draft_step_s."""
    uses_catchup = False

    def __init__(self, target_step_s: float, draft_step_s: float):
        self.target_step_s = float(target_step_s)
        self.draft_step_s = float(draft_step_s)
        self.overhead_s = self.spec_overhead_s = 0.0

    def target_s(self, tokens, context, pairs, logits, num_seqs=None) -> float:
        return self.target_step_s

    def draft_s(self, num_seqs, k, context, catchup) -> float:
        return k * self.draft_step_s

    def attention_rows(self, decode_seqs, prefill_tokens=0):
        return decode_seqs

    def round_time_s(self, batch: int, k: int, mean_context: float, width: int) -> float:
        return self.target_step_s + k * self.draft_step_s


class RooflineStepCost:
    """The roofline cost model (CostModel.time_s) for the target pass and the drafter's
    proposal cost (Drafter.propose_time_s)."""

    def __init__(self, cost_model, drafter):
        self.cm, self.drafter = cost_model, drafter
        self.overhead_s = float(cost_model.round_overhead_s(0))
        self.spec_overhead_s = float(cost_model.round_overhead_s(1))     # + the verification step
        self.uses_catchup = drafter is not None and drafter.uses_gpu
        self.target_s = cost_model.time_s                 # bound methods: no wrapper in the loop
        self.draft_s = drafter.propose_time_s if drafter is not None else (lambda b, k, c, u: 0.0)
        self.attention_rows = cost_model.attention_rows

    def round_time_s(self, batch: int, k: int, mean_context: float, width: int) -> float:
        """One round of `batch` sequences at `mean_context` (for the goodput policy)."""
        c = batch * mean_context
        t = self.target_s(batch * width, c, batch * (width * mean_context + width * (width + 1) / 2.0), batch * width,
                          batch)
        if k > 0 and self.drafter is not None:
            t += self.drafter.propose_time_s(batch, k, c)
        return float(t) + (self.spec_overhead_s if k > 0 else self.overhead_s)


# ---- the replica -------------------------------------------------------------------------
BIG = 1 << 62
SMALL_BATCH = 16       # up to this many decode sequences, per-sequence sums run in Python lists


class Replica:
    """Continuous batching on one GPU group. `run()` is its SimPy process."""
    INLINE = True          # run iterations without a SimPy event where nothing can intervene (`run`)
    KERNEL = True          # run uneventful decode rounds in compiled code where numba is there (decode_kernel)
    silent_finish = False  # on_finish schedules no event (the engine sets it for open-loop workloads)

    def __init__(self, env, index: int, table: RequestTable, log: IterationLog, *, cost,
                 policy, acceptance: AcceptanceModel, acc_rng: np.random.Generator,
                 match_rng: np.random.Generator | None, match_probability: float,
                 verify_width: Callable[[int], int],
                 capacity_blocks: int, block_size: int, max_num_seqs: int, max_num_batched_tokens: int,
                 k_max: int, on_finish: Callable[[int], None], trace: list | None = None):
        self.env, self.index, self.table, self.log = env, index, table, log
        self.now = env.now             # the replica's clock: SimPy's, or ahead of it inside `run`
        self.cost, self.policy, self.acceptance = cost, policy, acceptance
        self.acc_rng, self.match_rng, self.match_p = acc_rng, match_rng, float(match_probability)
        self.capacity = int(capacity_blocks)
        self.bs = int(block_size)
        self.max_seqs = int(max_num_seqs)
        self.max_tokens = int(max_num_batched_tokens)
        self.k_max = int(k_max)
        self.on_finish = on_finish
        self.trace = trace
        self.widths = [1] + [int(verify_width(k)) for k in range(1, self.k_max + 1)]   # verify positions per seq
        self.spec_on = self.k_max > 0 and getattr(policy, "kind", "") != "off"
        self.ngram = match_rng is not None and self.match_p < 1.0
        self.track_catchup = bool(getattr(cost, "uses_catchup", False)) and self.spec_on
        self.needs_state = hasattr(policy, "expected_rates")        # goodput: reads iteration_s
        self.state = PolicyState(round_time_s=self._round_time_s)
        self._target_s, self._draft_s, self._overhead_s = cost.target_s, cost.draft_s, float(cost.overhead_s)
        self._rows = cost.attention_rows
        self._spec_overhead_s = float(cost.spec_overhead_s)      # a round with K > 0
        # Population acceptance (the same rates for every sequence; trees arrive as per-depth
        # models, run.py): drawn in blocks that hand out exactly what per-round
        # sample_prefix_accepts calls would draw. Other models sample per round.
        self._block = PrefixBlockSampler(acceptance.alphas, acc_rng, self.k_max) \
            if acceptance.is_population and PrefixBlockSampler.supports(acc_rng) else None
        self._observes = type(policy).observe is not Policy.observe    # adaptive, goodput
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
        S = self.max_seqs
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
        self._logbuf = log.buf
        # K by decode batch size, for the policies that read nothing else (static, batch_schedule)
        self._k_of_n: list[int] | None = None
        if self.spec_on and type(policy) in (StaticPolicy, BatchSchedulePolicy):
            self._k_of_n = [0] + [self._choose_k(b) for b in range(1, S + 1)]
        self._kern = self._kernel_plan() if self.INLINE and self.KERNEL else None
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
        # partial prefills, in admission order: [rid, need, done, chunk, held_blocks]
        self.prefills: list[list[int]] = []
        self.pf_blocks = 0             # blocks held by partial prefills
        self.waiting: deque[int] = deque()
        self.outstanding = 0           # waiting + running, for the router
        self.idle_event = None
        # rounds by (K, drafts accepted) for models sampled per round (the block sampler keeps its
        # own), as Python lists: adding k + 1 small counts is cheaper than a numpy add (`acc_hist`)
        self._hist: list[list[int]] = [[0] * (k + 1) for k in range(self.k_max + 1)]
        # the iteration being executed (set by _schedule, used by _complete)
        self._k = self._nd = self._preempted = 0
        self._matched: np.ndarray | None = None
        self._pf_sched: list[list[int]] = []
        self._row: list = []           # its iteration log row (ITER_COLUMNS order), completed by _complete

    # ---- entry points ------------------------------------------------------------------------
    def submit(self, rid: int) -> None:
        self.waiting.append(rid)
        self.outstanding += 1
        if self.idle_event is not None:
            ev, self.idle_event = self.idle_event, None
            ev.succeed()

    def run(self):
        """The replica's SimPy process: one timeout per iteration, an event wait when idle.

        Iterations run inline when they end strictly before the next event in SimPy's queue
        (`env.peek()`): nothing else can happen in between, so the replica completes the
        iteration and plans the next one without a SimPy event, on its own clock (`self.now`).
        SimPy's clock is brought to the replica's with one timeout before anything else can see
        it (the difference is exact: checked before each inline step), so the trajectory is the
        one a timeout per iteration gives, bit for bit. An iteration whose completion could call
        `on_finish` is run inline only when finishing schedules no event (`silent_finish`, an
        open-loop workload); otherwise (a closed-loop user issues its next request) only quiet
        iterations are: no prefill chunk (a 1-token output finishes at its first token) and no
        sequence able to reach its output length (`rem_lb` > K + 1)."""
        env = self.env
        timeout, peek = env.timeout, env.peek
        schedule, complete = self._schedule, self._complete
        inline, any_iteration = self.INLINE, self.silent_finish
        kernel = self._kernel_rounds if self._kern is not None else None
        while True:
            self.now = env.now
            if not (self.n or self.prefills or self.waiting):
                self.idle_event = env.event()
                yield self.idle_event
                continue
            start = self.now
            inlined = kernel is not None and not self.prefills and kernel(start, peek()) > 0
            dt = schedule()
            if dt is None:          # everything preempted itself; reschedule at once
                if inlined:
                    yield timeout(self.now - start)
                continue
            if inline:
                while any_iteration or (not self._pf_sched and self.rem_lb > self._k + 1):
                    t = self.now + dt
                    if t >= peek() or start + (t - start) != t:
                        break
                    self.now, inlined = t, True
                    complete()
                    if not (self.n or self.prefills or self.waiting):
                        dt = None
                        break
                    if kernel is not None and not self.prefills:
                        kernel(start, peek())
                    dt = schedule()
                    if dt is None:
                        break
                if inlined:
                    yield timeout(self.now - start)      # SimPy's clock to the replica's (may be 0)
                    if dt is None:
                        continue
            yield timeout(dt)
            self.now = env.now
            complete()

    # ---- compiled decode rounds (decode_kernel) ---------------------------------------------
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

    def _kernel_first_index(self, dterms: np.ndarray, n: int) -> int:
        """The row of dterms the next round's first draft step reads (1 + f - n, f the tokens it
        ingests), or 0 where f lies outside the table."""
        r = 1 + (n if self._kern.first_is_b else self.pend_sum) - n
        return r if 1 <= r < len(dterms) else 0

    def _kernel_first_row(self, dterms: np.ndarray, n: int) -> bool:
        """Build the catch-up row the next round's first draft step needs, if it is in the table
        and not built yet; True if it built one."""
        return self._kern.first_row(dterms, self._kernel_first_index(dterms, n), n)

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
            rc = kp.costs.get(n)
            if rc is None:
                rc = kp.costs[n] = kp.round_costs(n, k, self.widths[k], self._spec_overhead_s if k else self._overhead_s)
            dterms = rc.draft_terms
            first_x, xterms = -1, dterms
            if k and kp.roofline:
                if not self._kernel_first_index(dterms, n):
                    first_x = self.pend_sum      # a first step outside the table (catching up on a prompt)
                    xterms = kp.catchup_terms(dterms, first_x, n)
                else:
                    self._kernel_first_row(dterms, n)
            m, now, sum_ctx, pend_sum, rem_lb, blocks, pos, last, finished = kp.fn(
                self.d_kvc, self.d_lim, blk.em if k else kp.no_em, kp.out, self._scratch, kp.run, rc.round,
                rc.constants, rc.target_terms, dterms, xterms, first_x, self._ctx_shift, self.sum_ctx, self.pend_sum,
                self.rem_lb, blocks, blk.pos if k else 0, blk.rows if k else 0, float(self.now), float(start),
                float(peek_s), self.silent_finish, self.track_catchup)
            if not m:
                break
            total += m
            self._logbuf.frombytes(kp.out[:m].tobytes())
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
                if k and kp.roofline and self._kernel_first_row(dterms, n):
                    continue                     # it stopped for a catch-up row not built yet
                break
            self._retire(n, now)
        return total

    # ---- helpers ---------------------------------------------------------------------------
    def _round_time_s(self, batch: int, k: int) -> float:
        mean_ctx = self.sum_ctx / self.n if self.n else 0.0
        return self.cost.round_time_s(batch, k, mean_ctx, self.widths[k])

    def _choose_k(self, n: int) -> int:
        if self.needs_state:
            # NOTE: the mean tokens the running sequences still have to emit comes from their true
            # output lengths, which the simulator knows and a server would have to estimate
            # (max_tokens, a length predictor); goodput uses it only to amortise catch-up.
            remaining = (float(self.d_lim[:n].sum()) - self.sum_ctx) / n
            self.state = PolicyState(round_time_s=self._round_time_s, mean_context=self.sum_ctx / n,
                                     num_waiting=len(self.waiting), now_s=self.now,
                                     iteration_s=self._iteration_s, remaining_tokens=remaining)
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
                    schedule (`_prefill_plan`): where a larger K leaves too little token budget for
                    all of them, the pass is priced with them anyway, which is what the chunks it
                    pushes out cost in the next, equally compute-bound pass;
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
        pf = self._prefill_plan(n) if (self.prefills or self.waiting) else None
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
                dec_pairs = m * (w * mean_c + w * (w + 1) / 2) + (n - m) * (mean_c + 1)
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

    def _first_chunk(self, rid: int, budget: int) -> tuple[int, int, int]:
        """A waiting request's tokens in all (prompt + what it generated before a preemption), the
        first chunk a budget of `budget` tokens admits of them, and the KV blocks that chunk takes."""
        need_t = int(self.table.prompt[rid] + self.table.generated[rid])
        c = min(need_t, budget)
        return need_t, c, -(-c // self.bs)

    def _prefill_plan(self, n: int) -> tuple[float, float, float, float] | None:
        """The prefill part of the pass `_schedule_prefills` would build at K = 0 (token budget
        max_num_batched_tokens - n), read without touching the queues: partial prefills first, then
        waiting requests admitted FCFS while max_num_seqs and the free KV blocks allow. Returns
        (tokens, cached context, query-key pairs, logits), or None when no chunk would run."""
        bs, budget = self.bs, self.max_tokens - n
        tok = ctx = pairs = logits = 0
        dec_blocks = self._blocks if self._blocks is not None else int((self.d_kvc[:n] // bs).sum())
        free = self.capacity - dec_blocks - self.pf_blocks
        for _rid, need_t, done, _c, held in self.prefills:
            if budget <= 0:
                break
            c = min(need_t - done, budget)
            free -= -(-(done + c) // bs) - held
            budget -= c
            tok += c
            ctx += done
            pairs += c * done + c * (c + 1) // 2
            logits += done + c == need_t
        seqs = n + len(self.prefills)
        for rid in self.waiting:
            if budget <= 0 or seqs >= self.max_seqs:
                break
            need_t, c, b = self._first_chunk(rid, budget)
            if b > free:
                break
            free -= b
            seqs += 1
            budget -= c
            tok += c
            pairs += c * (c + 1) // 2
            logits += c == need_t
        return (float(tok), float(ctx), float(pairs), float(logits)) if tok else None

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
        t.rounds[rid] += rounds
        t.accepted[rid] += ctx - ctx0 - rounds          # tokens emitted by rounds - rounds
        t.drafted[rid] += self.k_cum - kc0 - miss
        if self._blocks is not None:
            self._blocks -= kv // self.bs
        if self._res is not None:
            self._res[(kv - self._phase) % self.bs] -= 1
        self.sum_ctx -= ctx
        self.pend_sum -= pend
        return rid, ctx, prompt

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

    # ---- one iteration: plan ---------------------------------------------------------------
    def _schedule(self) -> float | None:
        bs, cap = self.bs, self.capacity
        self._preempted = 0
        n = self.n
        if n and self.spec_on:
            k = self._k_of_n[n] if self._k_of_n is not None else self._choose_k(n)
        else:
            k = 0
        # KV for the decode sequences: context + K lookahead slots each, in blocks
        if n:
            if k != self._kv_k:
                self.d_kvc[:n] += k - self._kv_k
                self._kv_k = k
                self._ctx_shift = k + bs - 1
                self._blocks = self._res = None
            dec_blocks = self._blocks
            if dec_blocks is None:
                dec_blocks = self._blocks = self._count_blocks(n)
            if dec_blocks + self.pf_blocks > cap:
                n, dec_blocks = self._make_room(k, dec_blocks)
        else:
            dec_blocks = 0

        # decode token positions (ngram/suffix: only sequences with a match verify K + 1)
        w = self.widths[k]
        sum_c = self.sum_ctx - n                 # tokens already cached before this pass
        matched = None
        if self.ngram and n and k:
            matched = self.match_rng.random(n) < self.match_p          # [n] bool
            n_match = int(matched.sum())
            dec_tokens = n_match * w + (n - n_match)
            mean_c = sum_c / n   # matched sequences' contexts are not summed separately: the mean
            dec_pairs = n_match * (w * mean_c + w * (w + 1) / 2) + (n - n_match) * (mean_c + 1)
        else:
            dec_tokens = n * w
            dec_pairs = w * sum_c + n * (w * (w + 1) // 2)

        free = cap - dec_blocks - self.pf_blocks
        if self.prefills or self.waiting:
            sched, pf_tok, pf_ctx, pf_pairs, pf_logits, free = self._schedule_prefills(
                n, self.max_tokens - dec_tokens, free)
        else:
            sched, pf_tok, pf_ctx, pf_pairs, pf_logits = [], 0, 0, 0, 0

        tokens = dec_tokens + pf_tok
        if tokens == 0:
            return None
        target = self._target_s(tokens, sum_c + pf_ctx, dec_pairs + pf_pairs, dec_tokens + pf_logits,
                                self._rows(n, pf_tok) if pf_tok else n)
        if k and n:
            draft = self._draft_s(n, k, sum_c, self.pend_sum)
            oh = self._spec_overhead_s               # + the verification step's fixed time
        else:
            draft = 0.0
            oh = self._overhead_s
        prefill_s = target * pf_tok / tokens if pf_tok else 0.0
        self._k, self._nd, self._matched, self._pf_sched = k, n, matched, sched
        # iteration log row (ITER_COLUMNS order); the end time, tokens emitted and first tokens
        # (slots 2, 7, 8) are filled in by _complete
        self._row = [self.index, self.now, 0.0, n + len(sched), n, pf_tok, k, 0, 0,
                     draft, target - prefill_s, prefill_s, oh, cap - free, self._preempted]
        return draft + target + oh

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

    def _schedule_prefills(self, n: int, budget: int, free: int):
        """Chunks for partial prefills (in order), then FCFS admission of waiting requests, within
        the token budget, free KV blocks and max_num_seqs. Returns the scheduled entries and the
        prefill part of the pass shape."""
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
            free -= new_b
            budget -= c
            pf_tok += c
            pf_ctx += done
            pf_pairs += c * done + c * (c + 1) // 2
            pf_logits += done + c == need_t
            sched.append(e)
            i += 1

        if not self._preempted:          # vLLM admits nothing in an iteration that preempted
            waiting = self.waiting
            while waiting and budget > 0 and n + len(prefills) < self.max_seqs:
                rid = waiting[0]
                need_t, c, b = self._first_chunk(rid, budget)
                if b > free:
                    break
                waiting.popleft()
                e = [rid, need_t, 0, c, b]
                prefills.append(e)
                sched.append(e)
                self.pf_blocks += b
                free -= b
                budget -= c
                pf_tok += c
                pf_pairs += c * (c + 1) // 2
                pf_logits += c == need_t
                if self.trace is not None:
                    self.trace.append((self.now, "admit", rid))
        return sched, pf_tok, pf_ctx, pf_pairs, pf_logits, free

    # ---- one iteration: outcome -------------------------------------------------------------
    def _emit(self, ids: np.ndarray, k: int) -> tuple[np.ndarray, int]:
        """Tokens emitted (accepted drafts + 1) by the sequences `ids` ([B] request ids) in a round
        proposing k, as ([B] int64, read-only; their sum); tallies the accept-length histogram."""
        if self._block is not None:
            em, total = self._block.take(ids.size, k)
            if self._observes:
                self.policy.observe(k, em - 1)
            return em, total
        acc = self.acceptance.sample(ids, k, self.acc_rng)            # [B] accepted drafts
        row = self._hist[k]
        total = ids.size
        for a, c in enumerate(np.bincount(acc, minlength=k + 1).tolist()):
            row[a] += c
            total += a * c
        self.policy.observe(k, acc)
        acc += 1
        return acc, total

    @property
    def acc_hist(self) -> np.ndarray:
        """[k_max + 1, k_max + 1] int64: decode rounds (sequence, round pairs) by K and accepted drafts."""
        h = np.zeros((self.k_max + 1, self.k_max + 1), dtype=np.int64)
        for k, row in enumerate(self._hist):
            h[k, : k + 1] = row
        if self._block is not None:
            h += self._block.counts()
        return h

    def _complete(self) -> None:
        now = self.now
        n, k = self._nd, self._k
        emitted = 0
        finished_any = False
        if n:
            kvc = self.d_kvc[:n]                                          # [n] token counters
            if k:
                matched = self._matched
                if matched is None:                                       # [n] tokens emitted: accepted + 1
                    if self._block is not None and not self._observes:
                        em, es = self._block.take(n, k)
                    else:
                        em, es = self._emit(self.d_id[:n], k)
                else:                                                     # unmatched sequences emit 1
                    em = np.ones(n, dtype=np.int64)
                    es = n
                    if matched.any():
                        em_m, es_m = self._emit(self.d_id[:n][matched], k)
                        em[matched] = em_m
                        es += es_m - em_m.size
                    self.d_miss[:n] += k * ~matched
                kvc += em
                kv = kvc.tolist() if n <= SMALL_BATCH else None           # few sequences: Python sums
                if self.rem_lb <= k + 1:                                  # someone may reach its output length
                    low = self._min_remaining(n, kv)                      # negative where em overshot
                    if low < 0:                                           # cap em at what was left
                        rem = self._remaining(n)
                        over = np.minimum(rem, 0, out=rem)                # [n] <= 0
                        kvc += over
                        em = em + over                                    # a copy: em may be a read-only view
                        es += int(np.add.reduce(over))
                        low = 0
                        kv = None
                    self.rem_lb = low
                    finished_any = low == 0
                else:
                    self.rem_lb -= k + 1
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
            else:
                bs = self.bs
                res = self._res
                if res is None:
                    res = self._res = np.bincount((kvc - self._phase) % bs, minlength=bs).tolist()
                if self._blocks is not None:     # those at block_size - 1 (mod block_size) cross a boundary
                    self._blocks += res[(bs - 1 - self._phase) % bs]
                self._phase = (self._phase + 1) % bs
                kvc += self._ones[:n]
                es = n
                if self.track_catchup:
                    if self._pend_em is not None:
                        self._sync_pend()
                    self.d_pend[:n] += self._ones[:n]
                    self.pend_sum += n
                self.rem_lb -= 1
                if self.rem_lb <= 0:
                    self.rem_lb = self._min_remaining(n)
                    finished_any = self.rem_lb == 0
            self.sum_ctx += es
            self.rounds_cum += 1
            emitted = es

        first = 0
        if self._pf_sched:
            first = self._complete_prefills(now)
            emitted += first
        if finished_any:
            self._retire(n, now)
        row = self._row
        row[2], row[7], row[8] = now, emitted, first
        self._logbuf.fromlist(row)              # (array.fromlist: half extend's cost on a list)

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
            t.generated[rid] += 1
            if t.first_token_s[rid] != t.first_token_s[rid]:      # NaN: the very first token
                t.first_token_s[rid] = now
                if self.trace is not None:
                    self.trace.append((now, "first_token", rid))
            remaining = int(t.output[rid] - t.generated[rid])
            if remaining == 0:
                self._finish(rid, now)
                continue
            j = self.n                                           # join the decode batch
            ctx = need_t + 1
            self.d_id[j] = rid
            kv = ctx + self._ctx_shift
            self.d_kvc[j] = kv
            if self._blocks is not None:
                self._blocks += kv // self.bs
            if self._res is not None:
                self._res[(kv - self._phase) % self.bs] += 1
            self.d_prompt[j] = t.prompt[rid]
            self.d_lim[j] = t.prompt[rid] + t.output[rid]
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
        self.prefills = keep
        return first

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

    def _finish(self, rid: int, now: float) -> None:
        self.table.finish_s[rid] = now
        self.outstanding -= 1
        if self.trace is not None:
            self.trace.append((now, "finish", rid))
        self.on_finish(rid)

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
