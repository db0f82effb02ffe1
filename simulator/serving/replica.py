"""One replica: a tensor-parallel GPU group running vLLM-style continuous batching, one
speculative round per iteration.

Each iteration (`_schedule`, then one SimPy timeout, or none where nothing can intervene (`run`),
then `_complete`):
  1. the policy picks K for the running decode sequences (0 = plain decode; K is lowered when
     decode sequences x (K + 1) would exceed max_num_batched_tokens: k_choice.py);
  2. KV: every decode sequence needs blocks for its context plus K lookahead slots; when the
     cache is short, requests are preempted from the end of the running order (the most
     recently admitted first) by recompute: their KV is freed and they rejoin the front of the
     waiting queue, to prefill prompt + generated tokens again (scheduler.py);
  3. partial prefills continue (chunked prefill: chunks share the token budget left after the
     decode positions), then waiting requests are admitted in FCFS order while max_num_seqs,
     the token budget and free KV blocks allow (none after a preemption in this iteration);
  4. cost = drafter proposal + ONE fused target pass over [prefill chunks + decode sequences x
     verify width] + the per-iteration host overhead (+ the verification step's fixed time when
     K > 0: CostModel.round_overhead_s) (step_cost.py);
  5. at the end of the iteration acceptance is drawn per decode sequence; each emits
     accepted + 1 tokens (capped at its remaining output); a prompt whose last chunk was computed
     emits its first token; finished requests free their KV (decode_batch.py).
Uneventful stretches of decode rounds run in compiled code where numba is there (compiled_rounds.py).

The rooms are mixins of `Replica`, each owning its part of the state: DecodeBatch (the slots and
their sums), Scheduler (waiting queue, partial prefills), KChoice (K and its price),
CompiledRounds (the kernel glue), RunAhead (an open loop's replica running on to its next
arrival, run_ahead.py), RunOn (past arrivals a router may not send it, run_on.py). They share one
object because the loop reads their fields every iteration, and a field of the replica itself is
one attribute lookup.

Acceptance with rates shared by all sequences comes from `PrefixBlockSampler` (a slice per round,
the same draws as per-round sampling).
"""
from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..costs.pass_shape import causal_pairs
from ..speculation.acceptance import AcceptanceModel, PrefixBlockSampler
from ..speculation.k_choice import KChoice
from ..speculation.policies import PolicyState
from .compiled_rounds import CompiledRounds
from .decode_batch import DecodeBatch
from .metrics import ITER_COLUMNS, IterationLog, RequestTable
from .run_ahead import RunAhead
from .run_on import RunOn
from .scheduler import Scheduler

if TYPE_CHECKING:
    from collections.abc import Generator

    import simpy

    from ..engines.step_cost import EngineStepCost
    from ..speculation.policies import Policy
    from .step_cost import FixedStepCost, RooflineStepCost

__all__ = ["Replica"]

START, DRAFT, VERIFY, OVERHEAD = (ITER_COLUMNS.index(c) for c in ("start_s", "draft_s", "verify_s", "overhead_s"))


class Replica(DecodeBatch, Scheduler, KChoice, CompiledRounds, RunAhead, RunOn):
    """Continuous batching on one GPU group. `run()` is its SimPy process."""
    INLINE = True          # run iterations without a SimPy event where nothing can intervene (`run`)
    KERNEL = True          # run uneventful decode rounds in compiled code where numba is there (decode_kernel)
    CROSS = True           # ... and the one in flight at the next arrival or event, where no trace is kept
    silent_finish = False  # on_finish schedules no event (the engine sets it for open-loop workloads)
    caching = False        # a prefix cache (prefix_replica.PrefixCaching)
    drafts_prompts = False  # the drafter runs over each prompt chunk without speculating (disagg.PrefillHandoff)

    def __init__(self, env: simpy.Environment, index: int, table: RequestTable, log: IterationLog, *,
                 cost: FixedStepCost | RooflineStepCost | EngineStepCost, policy: Policy,
                 acceptance: AcceptanceModel, acc_rng: np.random.Generator,
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
        # what the policy declares it needs (policies.Policy)
        self.spec_on = self.k_max > 0 and policy.speculates
        self.prices_rounds = bool(policy.prices_rounds)            # goodput: reads iteration_s
        self._observes = bool(policy.observes_rounds)              # adaptive, goodput, sglang_adaptive
        self._observes_plain = bool(policy.observes_plain_rounds)  # sglang_adaptive: K = 0 rounds count too
        self._observes_finishes = bool(policy.observes_finishes)   # trtllm_schedule's acceptance window
        self._counts_requests = bool(policy.reads_request_counts)  # vllm_dynamic, trtllm_schedule
        self.ngram = match_rng is not None and self.match_p < 1.0
        self.track_catchup = bool(getattr(cost, "uses_catchup", False)) and self.spec_on
        self.state = PolicyState(round_time_s=self._round_time_s)
        self._target_s, self._draft_s, self._overhead_s = cost.target_s, cost.draft_s, float(cost.overhead_s)
        self._rows = cost.attention_rows
        self._spec_overhead_s = float(cost.spec_overhead_s)      # a round with K > 0
        # Population acceptance (the same rates for every sequence; trees arrive as per-depth
        # models, simulator/run/): drawn in blocks that hand out exactly what per-round
        # sample_prefix_accepts calls would draw. Other models sample per round.
        self._block = PrefixBlockSampler(acceptance.alphas, acc_rng, self.k_max) \
            if acceptance.is_population and PrefixBlockSampler.supports(acc_rng) else None
        self._init_batch(self.max_seqs)
        # KV lookahead held at k_max whatever K (vllm_dynamic: vLLM reserves num_speculative_tokens)
        self._kv_fixed = bool(policy.reserves_k_max) and self.spec_on
        if self._kv_fixed:
            self._kv_k, self._ctx_shift = self.k_max, self.k_max + self.bs - 1
        self._init_queues()
        self._logbuf = log.buf
        self._k_of_n = self._k_by_batch_table()     # K by decode batch size (static, batch_schedule)
        self._kern = self._kernel_plan() if self.INLINE and self.KERNEL else None
        self.idle_event = None
        # rounds by (K, drafts accepted) for models sampled per round (the block sampler keeps its
        # own), as Python lists: adding k + 1 small counts is cheaper than a numpy add (`acc_hist`)
        self._hist: list[list[int]] = [[0] * (k + 1) for k in range(self.k_max + 1)]
        # the iteration being executed (set by _schedule, used by _complete)
        self._k = self._nd = 0
        self._matched: np.ndarray | None = None
        self._pf_sched: list[list[int]] = []
        self._row: list = []           # its iteration log row (ITER_COLUMNS order), completed by _complete

    # ---- entry points ------------------------------------------------------------------------
    def submit(self, rid: int) -> None:
        if self._on is not None:       # running on past this arrival: back to it (run_on.py)
            self._go_back()
        self.waiting.append(rid)
        self.outstanding += 1
        if self.idle_event is not None:
            ev, self.idle_event = self.idle_event, None
            ev.succeed()

    def run(self) -> Generator[simpy.Event, object, None]:
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
        log, logbuf = self.log, self._logbuf
        fold_floats = log.fold_floats          # (sys.maxsize unless the run drops the log)
        while True:
            self.now = env.now
            if not (self.n or self.prefills or self.waiting):
                self.idle_event = env.event()
                yield self.idle_event
                continue
            if len(logbuf) > fold_floats:
                log.fold_blocks()
            start = self.now
            inlined = kernel is not None and not self.prefills and kernel(start, peek()) > 0
            if self._crossed_row is not None:
                yield from self._wait_crossed(start)
                continue
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
                        if self._crossed_row is not None:
                            break
                    dt = schedule()
                    if dt is None:
                        break
                if self._crossed_row is not None:
                    yield from self._wait_crossed(start)
                    continue
                if inlined:
                    yield timeout(self.now - start)      # SimPy's clock to the replica's (may be 0)
                    if dt is None:
                        continue
            yield timeout(dt)
            self.now = env.now
            complete()

    def _wait_crossed(self, start: float) -> Generator[simpy.Event, object, None]:
        """The SimPy timeouts `run` yields for a round the compiled rounds ran across peek() (the
        `crosses` of a replica whose trace is not kept): to its start S (if the chain ran
        iterations before it), then its dt from S, which lands at its end as the kernel computed
        it; there, what its completion does after it (`_complete_crossed`). The same events, at the
        same times, created at the same moments as one `_schedule` + timeout + `_complete` of that
        round give; in between, other processes see the replica as they would mid-iteration (its
        finishes and log row not yet done)."""
        row = array("d", self._crossed_row)
        s = row[START]
        if s != start:
            yield self.env.timeout(s - start)
        yield self.env.timeout(row[DRAFT] + row[VERIFY] + row[OVERHEAD])   # (_schedule's draft + target + oh)
        self.now = self.env.now
        self._complete_crossed()

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
            if k != self._kv_k and not self._kv_fixed:
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
            dec_pairs = n_match * causal_pairs(w, mean_c) + (n - n_match) * causal_pairs(1, mean_c)
        else:
            dec_tokens = n * w
            dec_pairs = causal_pairs(dec_tokens, sum_c, n) if n else 0

        free = cap - dec_blocks - self.pf_blocks
        if self.prefills or self.waiting:
            sched, pf_tok, pf_ctx, pf_pairs, pf_logits, free = self._walk_prefills(
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
            draft = self._prompt_draft_s(len(sched), pf_tok, pf_ctx) if self.drafts_prompts and pf_tok else 0.0
            oh = self._overhead_s
        prefill_s = target * pf_tok / tokens if pf_tok else 0.0
        self._k, self._nd, self._matched, self._pf_sched = k, n, matched, sched
        # iteration log row (ITER_COLUMNS order); the end time, tokens emitted and first tokens
        # (slots 2, 7, 8) are filled in by _complete
        self._row = [self.index, self.now, 0.0, n + len(sched), n, pf_tok, k, 0, 0,
                     draft, target - prefill_s, prefill_s, oh, cap - free, self._preempted]
        return draft + target + oh

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
        if self._observes:
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
        """The iteration's outcome at its end: the decode sequences' tokens emitted (acceptance),
        the batch advanced by them, the scheduled prefill chunks computed, finished sequences
        retired, and its log row written."""
        now = self.now
        n, k = self._nd, self._k
        if n:
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
                emitted, finished_any = self._advance(n, k, em, es)
            else:
                emitted, finished_any = n, self._advance_plain(n)
                if self._observes_plain:
                    self.policy.observe_plain(n)
        else:
            emitted, finished_any = 0, False

        first = 0
        if self._pf_sched:
            first = self._complete_prefills(now)
            emitted += first
        if finished_any:
            self._retire(n, now)
        row = self._row
        row[2], row[7], row[8] = now, emitted, first
        self._logbuf.fromlist(row)              # (array.fromlist: half extend's cost on a list)

    def _finish(self, rid: int, now: float) -> None:
        t = self.table
        t.finish_s[rid] = now
        self.outstanding -= 1
        if self._observes_finishes:
            self.policy.observe_finish(int(t.output[rid]), int(t.rounds[rid]))
        if self.trace is not None:
            self.trace.append((now, "finish", rid))
        self.on_finish(rid)
