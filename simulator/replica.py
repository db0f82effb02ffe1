"""One replica: a tensor-parallel GPU group running vLLM-style continuous batching, one
speculative round per iteration.

Each iteration (`_schedule`, then one SimPy timeout, then `_complete`):
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
     verify width] + the per-iteration host overhead;
  5. at the end of the iteration acceptance is drawn per decode sequence; each emits
     accepted + 1 tokens (capped at its remaining output); a prompt whose last chunk was computed
     emits its first token; finished requests free their KV.

The running decode batch lives in preallocated numpy arrays (slots 0..n-1, in admission order),
so an iteration costs a handful of vectorised operations whatever the batch size.
"""
from __future__ import annotations

from collections import deque
from typing import Callable

import numpy as np

from .acceptance import AcceptanceModel, tree_alphas
from .metrics import IterationLog, RequestTable
from .policies import PolicyState

NAN = float("nan")


# ---- step costs ----------------------------------------------------------------------------
# Each exposes target_s(tokens, context, pairs, logits), draft_s(num_seqs, k, context, catchup)
# and overhead_s; the replica calls them once per iteration with Python numbers.
class FixedStepCost:
    """`hardware.kind: fixed`: every iteration's target pass costs target_step_s whatever it holds
    (decode, prefill chunks or both) and a speculative round adds K x draft_step_s."""
    uses_catchup = False

    def __init__(self, target_step_s: float, draft_step_s: float):
        self.target_step_s = float(target_step_s)
        self.draft_step_s = float(draft_step_s)
        self.overhead_s = 0.0

    def target_s(self, tokens, context, pairs, logits) -> float:
        return self.target_step_s

    def draft_s(self, num_seqs, k, context, catchup) -> float:
        return k * self.draft_step_s

    def round_time_s(self, batch: int, k: int, mean_context: float, width: int) -> float:
        return self.target_step_s + k * self.draft_step_s


class RooflineStepCost:
    """The roofline cost model (CostModel.time_s) for the target pass and the drafter's
    proposal cost (Drafter.propose_time_s)."""

    def __init__(self, cost_model, drafter):
        self.cm, self.drafter = cost_model, drafter
        self.overhead_s = float(cost_model.iteration_overhead_s)
        self.uses_catchup = drafter is not None and drafter.uses_gpu
        self.target_s = cost_model.time_s                 # bound methods: no wrapper in the loop
        self.draft_s = drafter.propose_time_s if drafter is not None else (lambda b, k, c, u: 0.0)

    def round_time_s(self, batch: int, k: int, mean_context: float, width: int) -> float:
        """One round of `batch` sequences at `mean_context` (for the goodput policy)."""
        c = batch * mean_context
        t = self.target_s(batch * width, c, batch * (width * mean_context + width * (width + 1) / 2.0), batch * width)
        if k > 0 and self.drafter is not None:
            t += self.drafter.propose_time_s(batch, k, c)
        return float(t) + self.overhead_s


# ---- the replica -------------------------------------------------------------------------
BIG = 1 << 62


class Replica:
    """Continuous batching on one GPU group. `run()` is its SimPy process."""

    def __init__(self, env, index: int, table: RequestTable, log: IterationLog, *, cost,
                 policy, acceptance: AcceptanceModel, acc_rng: np.random.Generator,
                 match_rng: np.random.Generator | None, match_probability: float,
                 verify_width: Callable[[int], int], tree_branches: int,
                 capacity_blocks: int, block_size: int, max_num_seqs: int, max_num_batched_tokens: int,
                 k_max: int, on_finish: Callable[[int], None], trace: list | None = None):
        self.env, self.index, self.table, self.log = env, index, table, log
        self.cost, self.policy, self.acceptance = cost, policy, acceptance
        self.acc_rng, self.match_rng, self.match_p = acc_rng, match_rng, float(match_probability)
        self.tree_branches = int(tree_branches)
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
        self.needs_state = hasattr(policy, "expected_rates")        # goodput: reads round_time_s
        self.state = PolicyState(round_time_s=self._round_time_s)
        self._target_s, self._draft_s, self._overhead_s = cost.target_s, cost.draft_s, float(cost.overhead_s)
        # Population acceptance (every model that does not override AcceptanceModel.sample, and
        # trees): rates cached per K and sampled in place, drawing exactly what
        # sample_prefix_accepts draws (one uniform per position) and returning the same counts.
        self._population = type(acceptance).sample is AcceptanceModel.sample or self.tree_branches > 1
        self._rates: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        # Decode slots [S], in admission order. The four counters every emitted token advances
        # share one [4, S] array so that a round updates them in one operation:
        #   context (prompt + generated tokens), generated tokens, tokens emitted by rounds since
        #   joining the decode batch (minus the rounds: the drafts accepted and used), and
        #   context + K_kv + block_size - 1 (so that KV blocks = that // block_size, one division).
        # Then: request id, output length, drafter catch-up tokens, round / drafted counters at
        # entry, drafts not proposed (n-gram misses).
        S = self.max_seqs
        self.d_tok = np.zeros((4, S), dtype=np.int64)
        self.d_ctx, self.d_gen, self.d_ems, self.d_kvc = self.d_tok
        self._kv_k = 0                 # the K that d_kvc includes
        self.d_id = np.zeros(S, dtype=np.int64)
        self.d_out = np.zeros(S, dtype=np.int64)
        self.d_pend = np.zeros(S, dtype=np.int64)
        self.d_r0 = np.zeros(S, dtype=np.int64)
        self.d_kc0 = np.zeros(S, dtype=np.int64)
        self.d_miss = np.zeros(S, dtype=np.int64)
        self._slot_arrays = (self.d_id, self.d_out, self.d_pend, self.d_r0, self.d_kc0, self.d_miss)
        self._scratch = np.zeros(S, dtype=np.int64)
        self._logbuf = log.buf
        self.n = 0                     # decode sequences
        self.sum_ctx = 0               # sum of d_ctx[:n]
        self.pend_sum = 0              # sum of d_pend[:n]
        self.rem_lb = BIG              # lower bound on min(d_out - d_gen): no exact check while > K + 1
        self.rounds_cum = 0            # decode rounds this replica ran
        self.k_cum = 0                 # sum of K over those rounds (drafts per sequence)
        # partial prefills, in admission order: [rid, need, done, chunk, held_blocks]
        self.prefills: list[list[int]] = []
        self.pf_blocks = 0             # blocks held by partial prefills
        self.waiting: deque[int] = deque()
        self.outstanding = 0           # waiting + running, for the router
        self.idle_event = None
        self.acc_hist = np.zeros((self.k_max + 1, self.k_max + 1), dtype=np.int64)   # [k, accepted] rounds
        self._hist_rows = [self.acc_hist[k, : k + 1] for k in range(self.k_max + 1)]
        # the iteration being executed (set by _schedule, used by _complete)
        self._k = self._nd = self._preempted = self._kv_used = 0
        self._matched: np.ndarray | None = None
        self._pf_sched: list[list[int]] = []
        self._row_head: tuple = ()
        self._row_mid: tuple = ()
        self._row_tail: tuple = ()

    # ---- entry points ------------------------------------------------------------------------
    def submit(self, rid: int) -> None:
        self.waiting.append(rid)
        self.outstanding += 1
        if self.idle_event is not None:
            ev, self.idle_event = self.idle_event, None
            ev.succeed()

    def run(self):
        """The replica's SimPy process: one timeout per iteration, an event wait when idle."""
        env = self.env
        timeout = env.timeout
        schedule, complete = self._schedule, self._complete
        while True:
            if not (self.n or self.prefills or self.waiting):
                self.idle_event = env.event()
                yield self.idle_event
                continue
            dt = schedule()
            if dt is None:          # everything preempted itself; reschedule at once
                continue
            yield timeout(dt)
            complete()

    # ---- helpers ---------------------------------------------------------------------------
    def _round_time_s(self, batch: int, k: int) -> float:
        mean_ctx = self.sum_ctx / self.n if self.n else 0.0
        return self.cost.round_time_s(batch, k, mean_ctx, self.widths[k])

    def _choose_k(self, n: int) -> int:
        if self.needs_state:
            self.state = PolicyState(round_time_s=self._round_time_s, mean_context=self.sum_ctx / n,
                                     num_waiting=len(self.waiting), now_s=self.env.now)
        k = self.policy.choose_k(n, self.state)
        while k and n * self.widths[k] > self.max_tokens:    # the decode positions must fit the budget
            k -= 1
        return k

    def _flush(self, j: int, rid: int) -> None:
        """Fold slot j's counters into the request table (on finish or preemption)."""
        t = self.table
        rounds = self.rounds_cum - int(self.d_r0[j])
        t.rounds[rid] += rounds
        t.accepted[rid] += int(self.d_ems[j]) - rounds
        t.drafted[rid] += self.k_cum - self.d_kc0[j] - self.d_miss[j]

    def _preempt_prefill(self) -> None:
        rid, _need, _done, _chunk, held = self.prefills.pop()
        self.pf_blocks -= held
        self._requeue(rid)

    def _preempt_decode_tail(self, keep: int) -> None:
        """Preempt decode slots keep..n-1, the last first."""
        t = self.table
        for j in range(self.n - 1, keep - 1, -1):
            rid = int(self.d_id[j])
            t.generated[rid] = int(self.d_gen[j])
            self._flush(j, rid)
            self.sum_ctx -= int(self.d_ctx[j])
            self.pend_sum -= int(self.d_pend[j])
            self.n = j
            self._requeue(rid)

    def _requeue(self, rid: int) -> None:
        self.table.preemptions[rid] += 1
        self.waiting.appendleft(rid)
        self._preempted += 1
        if self.trace is not None:
            self.trace.append((self.env.now, "preempt", rid))

    # ---- one iteration: plan ---------------------------------------------------------------
    def _schedule(self) -> float | None:
        bs, cap = self.bs, self.capacity
        self._preempted = 0
        n = self.n
        k = self._choose_k(n) if (n and self.spec_on) else 0
        # KV for the decode sequences: context + K lookahead slots each, in blocks
        if n:
            if k != self._kv_k:
                self.d_kvc[:n] += k - self._kv_k
                self._kv_k = k
            dec_blocks = int(np.floor_divide(self.d_kvc[:n], bs, out=self._scratch[:n]).sum())
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
        target = self._target_s(tokens, sum_c + pf_ctx, dec_pairs + pf_pairs, dec_tokens + pf_logits)
        draft = self._draft_s(n, k, sum_c, self.pend_sum) if (k and n) else 0.0
        prefill_s = target * pf_tok / tokens if pf_tok else 0.0
        self._k, self._nd, self._matched, self._pf_sched = k, n, matched, sched
        # iteration log row, split around the values known only at the end (ITER_COLUMNS order)
        self._row_head = (self.index, self.env.now)
        self._row_tail = (draft, target - prefill_s, prefill_s, self._overhead_s, cap - free, self._preempted)
        self._row_mid = (n + len(sched), n, pf_tok, k)
        return draft + target + self._overhead_s

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
            t = self.table
            waiting = self.waiting
            while waiting and budget > 0 and n + len(prefills) < self.max_seqs:
                rid = waiting[0]
                need_t = int(t.prompt[rid] + t.generated[rid])
                c = min(need_t, budget)
                b = -(-c // bs)
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
                    self.trace.append((self.env.now, "admit", rid))
        return sched, pf_tok, pf_ctx, pf_pairs, pf_logits, free

    # ---- one iteration: outcome -------------------------------------------------------------
    def _sample(self, ids: np.ndarray, k: int) -> np.ndarray:
        """[B] accepted drafts (0..k) for the sequences `ids` ([B] request ids)."""
        if not self._population:
            return self.acceptance.sample(ids, k, self.acc_rng)
        cached = self._rates.get(k)
        if cached is None:
            a = np.asarray(self.acceptance.alphas(k), dtype=np.float64)
            if self.tree_branches > 1:
                a = tree_alphas(a, self.tree_branches)
            rates = np.ascontiguousarray(np.broadcast_to(a, (self.max_seqs, k)))   # [S, k]
            ok = np.zeros((self.max_seqs, k + 1), dtype=bool)                     # [S, k+1], last column False
            cached = self._rates[k] = (rates, ok)
        rates, ok = cached
        b = ids.size
        # as sample_prefix_accepts: one uniform per position, accepted = leading run of (u < rate),
        # found as the first False of ok[i, :k+1] (the sentinel column ends an all-accepted row)
        u = self.acc_rng.random((b, k))                                          # [b, k]
        np.less(u, rates[:b], out=ok[:b, :k])
        return ok[:b].argmin(axis=1)

    def _complete(self) -> None:
        now = self.env.now
        n, k = self._nd, self._k
        emitted = 0
        finished_any = False
        if n:
            tok = self.d_tok[:, :n]                                       # [4, n] token counters
            if k:
                matched = self._matched
                if matched is None:
                    acc = self._sample(self.d_id[:n], k)                  # [n] accepted drafts
                    self._hist_rows[k] += np.bincount(acc, minlength=k + 1)
                    self.policy.observe(k, acc)
                else:
                    acc = np.zeros(n, dtype=np.int64)
                    if matched.any():
                        acc_m = self._sample(self.d_id[:n][matched], k)
                        acc[matched] = acc_m
                        self._hist_rows[k] += np.bincount(acc_m, minlength=k + 1)
                        self.policy.observe(k, acc_m)
                    self.d_miss[:n] += k * ~matched
                em = acc + 1                                              # [n] tokens emitted
                if self.rem_lb <= k + 1:                                  # someone may reach its output length
                    rem = np.subtract(self.d_out[:n], self.d_gen[:n], out=self._scratch[:n])
                    np.minimum(em, rem, out=em)
                    rem -= em
                    self.rem_lb = int(rem.min())
                    finished_any = self.rem_lb == 0
                else:
                    self.rem_lb -= k + 1
                tok += em
                es = int(em.sum())
                if self.track_catchup:
                    self.d_pend[:n] = em
                    self.pend_sum = es
                self.k_cum += k
            else:
                tok += 1
                es = n
                if self.track_catchup:
                    self.d_pend[:n] += 1
                    self.pend_sum += n
                self.rem_lb -= 1
                if self.rem_lb <= 0:
                    self.rem_lb = int((self.d_out[:n] - self.d_gen[:n]).min())
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
        self._logbuf.extend(self._row_head + (now,) + self._row_mid + (emitted, first) + self._row_tail)

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
            self.d_tok[:, j] = (ctx, t.generated[rid], 0, ctx + self._kv_k + self.bs - 1)
            self.d_out[j] = t.output[rid]
            self.d_pend[j] = ctx
            self.d_r0[j] = self.rounds_cum
            self.d_kc0[j] = self.k_cum
            self.d_miss[j] = 0
            self.n = j + 1
            self.sum_ctx += ctx
            if self.track_catchup:
                self.pend_sum += ctx
            if remaining < self.rem_lb:
                self.rem_lb = remaining
        self.prefills = keep
        return first

    def _finish(self, rid: int, now: float) -> None:
        self.table.finish_s[rid] = now
        self.outstanding -= 1
        if self.trace is not None:
            self.trace.append((now, "finish", rid))
        self.on_finish(rid)

    def _retire(self, n_old: int, now: float) -> None:
        """Remove finished sequences among the first n_old decode slots, keeping the order."""
        t = self.table
        done = self.d_gen[:n_old] == self.d_out[:n_old]
        rids = []
        for j in np.flatnonzero(done).tolist():
            rid = int(self.d_id[j])
            rids.append(rid)
            t.generated[rid] = t.output[rid]
            self._flush(j, rid)
            self.sum_ctx -= int(self.d_ctx[j])
            self.pend_sum -= int(self.d_pend[j])
        keep = ~done
        n_all = self.n
        if n_all > n_old:                       # sequences that joined from prefill this iteration
            keep = np.concatenate([keep, np.ones(n_all - n_old, dtype=bool)])
        m = int(keep.sum())
        for a in self._slot_arrays:
            a[:m] = a[:n_all][keep]
        self.d_tok[:, :m] = self.d_tok[:, :n_all][:, keep]
        self.n = m
        self.rem_lb = int((self.d_out[:m] - self.d_gen[:m]).min()) if m else BIG
        for rid in rids:                        # notify after compaction: the replica is consistent
            self._finish(rid, now)
