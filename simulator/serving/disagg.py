"""Disaggregated serving: a pool of prefill instances and a pool of decode instances.

A request arrives at a prefill instance (the router's pick), whose iterations compute prompt
chunks only (K = 0; the drafter's pass over each chunk too where the decode pool's engine moves
the drafter's KV: `PrefillHandoff`). When its last chunk is computed, the prompt's KV leaves for a
decode instance: the transfer takes `transfer_s(rid)` (bytes over the link between the pools:
disagg_spec.py), after which the first token reaches the client (TTFT includes the transfer: the
prefill side's first token travels with the KV, as SGLang's PD mode returns it) and the request
waits in the decode instance's queue of arrived KV. A decode instance admits those, FCFS, at the
start of each iteration while max_num_seqs and its free KV blocks allow (the request joins the
decode batch with its context computed: prompt + first token), so its admission waits for the
transfer and for room. Speculation runs on the decode pool only. A decode sequence preempted for
memory is recomputed on its decode instance (its waiting queue, vLLM's recompute).

The prefill instance frees the prompt's blocks when the transfer starts (not when it completes:
its KV is not held across the link time).

Two engines run it. `DisaggEngine`: both pools in one SimPy environment, a KV arrival an event
scheduled at the handoff (`Replica.run`'s rule: every replica stops at every event of the fleet).
`PhasedDisagg`, for an open loop without a trace: nothing the decode pool does reaches the prefill
pool, so the prefill pool runs first, on its own (its replicas running ahead to their arrivals,
run_ahead.py), and records each prompt's end; the KV arrivals are then known, at prompt end +
transfer exactly, and the decode pool runs as an open loop over them (running ahead too). KV
arrivals at one instant are submitted in the order of their prompts' ends, then prefill instance,
then handoff (in `DisaggEngine` SimPy's order of the handoffs' events, which an inline stretch
may create ahead of another replica's earlier ones). Both give the same runs where no two KV
arrivals, or a KV arrival and a decode iteration's end, coincide (tests/test_disagg_phases.py).
"""
from __future__ import annotations

import functools
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .engine import Engine
from .metrics import IterationLog, RequestTable
from .router import make_router


class PoolCounts:
    """Iterations and the sum of their batches, per prefill instance (its pool's mean batch without
    the log; a decode pool's comes from the requests' decode rounds, compiled ones included)."""
    iterations = 0
    batch_sum = 0

    def _complete(self) -> None:
        super()._complete()
        self.iterations += 1
        self.batch_sum += self._row[3]


class PrefillHandoff(PoolCounts):
    """A prefill instance's replica: a computed prompt leaves for the decode pool (mixin).

    `drafts_prompts` (set by the caller where the decode pool's engine moves the drafter's KV):
    each iteration's prompt chunks also pay the drafter's pass over them, priced as the step
    cost prices a drafter's catch-up (draft_s at K = 1 with the chunks' tokens to ingest: the
    prefill server's drafter at num_speculative_tokens 1, as vLLM's P/D test runs it)."""

    handoff: Callable[[int, float], None]      # set by DisaggEngine

    def _prompt_draft_s(self, seqs: int, tokens: int, context: int) -> float:
        return self._draft_s(seqs, 1, context, tokens)

    def _join(self, rid: int, ctx: int, prompt: int, output: int, remaining: int) -> None:
        self.outstanding -= 1
        if self.caching:                      # its blocks freed as the transfer starts: cached, evictable
            self.pool.release(rid)
        self.handoff(rid, self.now)


class DecodeAdmission:
    """A decode instance's replica: requests whose KV arrived join the decode batch (mixin).

    `drafter_kv_arrived` (set by the caller, from EngineDef.drafter_kv_transferred): the drafter's
    KV of the prompt came with the target's, so its first pass here ingests the one token the
    prefill emitted; otherwise (rebuilt) it ingests the whole context, the drafter's prefill of the
    prompt on this instance, in the sequence's first speculative round."""
    drafter_kv_arrived = True

    def _init_kv_queue(self) -> None:
        self.kv_ready: deque[int] = deque()

    def submit_kv(self, rid: int) -> None:
        if self._on is not None:              # running on past this arrival: back to it (run_on.py)
            self._go_back()
        self.kv_ready.append(rid)
        self.outstanding += 1
        if self.idle_event is not None:       # idle: its clock is SimPy's; admit now, then wake it
            self.now = self.env.now
            self._admit_kv()
            ev, self.idle_event = self.idle_event, None
            ev.succeed()

    def _admit_kv(self) -> None:
        q = self.kv_ready
        if not q:
            return
        t, bs = self.table, self.bs
        blocks = self._blocks if self._blocks is not None else self._count_blocks(self.n)
        self._blocks = blocks
        free = self.capacity - blocks - self.pf_blocks
        while q and self.n + len(self.prefills) < self.max_seqs:
            rid = q[0]
            prompt, output = t.prompt.item(rid), t.output.item(rid)
            ctx = prompt + t.generated.item(rid)
            need = (ctx + self._ctx_shift) // bs
            if need > free:
                break
            q.popleft()
            free -= need
            self._join(rid, ctx, prompt, output, output - t.generated.item(rid))
            if self.track_catchup:
                joined = 1 if getattr(self.cost, "drafts_in_prefill", False) else ctx  # what _join counted
                want = 1 if self.drafter_kv_arrived else ctx    # the first token where the drafter's KV came
                if want != joined:                              # with the target's, else the whole context
                    self._set_catchup(joined, want)
            if self.trace is not None:
                self.trace.append((self.now, "admit", rid))

    def _set_catchup(self, was: int, now: int) -> None:
        """The newest sequence's tokens for the drafter to ingest: `now` in place of the `was` its
        join counted."""
        self.d_pend[self.n - 1] = now
        self.pend_sum += now - was

    def _schedule(self) -> float | None:
        if self.kv_ready:
            self._admit_kv()
        return super()._schedule()

    def _complete(self) -> None:
        super()._complete()
        if self.kv_ready:                     # room may have freed: the loop must not find it idle
            self._admit_kv()

    def _retire_crossed(self) -> None:
        super()._retire_crossed()             # a compiled round's finishes, at its end (both engines)
        if self.kv_ready:                     # (as `_complete`)
            self._admit_kv()

    def _kernel_rounds(self, start: float, peek_s: float, stop_at_finish: bool = False) -> int:
        if self.kv_ready:                     # arrived KV waits for room: no compiled stretch
            return 0
        return super()._kernel_rounds(start, peek_s, stop_at_finish)


def pool_class(base: type, mixin: type, prefix: str) -> type:
    """The replica class `base` with a pool's mixin before it."""
    init_kv = mixin is DecodeAdmission

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        base.__init__(self, *args, **kwargs)
        if init_kv:
            self._init_kv_queue()

    return type(f"{prefix}{base.__name__}", (mixin, base), {"__init__": __init__})


class DisaggEngine(Engine):
    """Arrivals go to the prefill pool (self.replicas[:P]); a computed prompt's KV is transferred
    to a decode instance (self.replicas[P:]) picked by the decode pool's router."""
    RUN_AHEAD = False       # transfers schedule events across replicas: Replica.run's rule

    def __init__(self, table: RequestTable, make_replica: Callable[..., object], num_prefill: int, num_decode: int,
                 router: str,
                 decode_router: str, transfer_s: Callable[[int], float],
                 closed_loop: tuple[int, float] | None = None, trace: list | None = None):
        super().__init__(table, make_replica, num_prefill + num_decode, router, closed_loop, trace)
        self.prefill, self.decode = self.replicas[:num_prefill], self.replicas[num_prefill:]
        self.router = make_router(router, num_prefill)
        self.decode_router = make_router(decode_router, num_decode)
        self.transfer_s = transfer_s
        self.prefill_done_s = np.full(table.n, np.nan)     # [N] s: the prompt computed
        for r in self.prefill:       # (a handoff's event is at or after the replica's clock, and every
            r.handoff = self._handoff    # other replica's inline stretch ends before it: Replica.run)

    def _submit(self, rid: int) -> None:
        r = self.router.pick(self.prefill, rid)
        self.table.replica[rid] = r
        if self.trace is not None:
            self.trace.append((self.env.now, "arrive", rid))
        self.prefill[r].submit(rid)

    def _handoff(self, rid: int, now: float) -> None:
        self.prefill_done_s[rid] = now
        done = now + self.transfer_s(rid)
        ev = self.env.timeout(done - self.env.now)
        ev.callbacks.append(lambda _e, rid=rid: self._arrive_kv(rid))

    def _arrive_kv(self, rid: int) -> None:
        d = self.decode_router.pick(self.decode, rid)
        self.table.first_token_s[rid] = self.env.now
        if self.trace is not None:
            self.trace.append((self.env.now, "kv_arrived", rid))
        self.decode[d].submit_kv(rid)


class _PrefillPhase(Engine):
    FINISHES = False          # its requests finish in the decode pool


class _DecodePhase(Engine):
    """The decode pool over the KV arrivals, `order[i]` the i-th request submitted."""

    def __init__(self, table: RequestTable, make_replica: Callable[..., object], num_decode: int, router: str,
                 kv_s: list[float], order: list[int], log: IterationLog):
        self.order = order
        super().__init__(table, make_replica, num_decode, router, log=log, arrivals=kv_s)

    def _submit(self, i: int) -> None:
        rid = self.order[i]
        d = self.router.pick(self.replicas, rid)
        self.table.first_token_s[rid] = self.arrival_times[i]
        self.replicas[d].submit_kv(rid)


class PhasedDisagg:
    """The prefill pool, then the decode pool (module docstring): an open loop, no trace kept.
    The attributes `DisaggEngine`'s callers read: log, replicas, prefill, decode, prefill_done_s."""
    ON = True          # run/disaggregated.py takes it for an open loop, no trace (off: DisaggEngine, the reference)

    def __init__(self, table: RequestTable, make_replica: Callable[..., object], num_prefill: int, num_decode: int,
                 router: str, decode_router: str, transfer_s: Callable[[int], float]):
        self.table, self.make_replica = table, make_replica
        self.P, self.D = num_prefill, num_decode
        self.decode_router, self.transfer_s = decode_router, transfer_s
        self.log = IterationLog()
        self.prefill_done_s = np.full(table.n, np.nan)     # [N] s: the prompt computed
        self._handoff_rid, self._handoff_at = array("q"), array("q")   # request, prefill instance: in handoff order
        self._pre = _PrefillPhase(table, make_replica, num_prefill, router, log=self.log)
        for i, r in enumerate(self._pre.replicas):
            r.handoff = functools.partial(self._handoff, i)
        self.prefill: Sequence = self._pre.replicas
        self.decode: Sequence = []
        self.replicas: Sequence = list(self.prefill)

    def _handoff(self, instance: int, rid: int, now: float) -> None:
        self.prefill_done_s[rid] = now
        self._handoff_rid.append(rid)
        self._handoff_at.append(instance)

    def run(self) -> None:
        self._pre.run()
        self._drop_arrivals(self._pre)
        rid = np.frombuffer(self._handoff_rid, dtype=np.int64).copy()
        inst = np.frombuffer(self._handoff_at, dtype=np.int64).copy()
        self._handoff_rid, self._handoff_at = array("q"), array("q")
        n = len(rid)
        done = self.prefill_done_s[rid]
        kv = done + np.asarray([self.transfer_s(r) for r in rid.tolist()], dtype=np.float64)
        order = np.lexsort((np.arange(n), inst, done, kv))  # KV arrival, prompt end, instance, handoff
        P = self.P
        dec = _DecodePhase(self.table, lambda env, i, *a: self.make_replica(env, P + i, *a), self.D,
                           self.decode_router, kv[order].tolist(), rid[order].tolist(), self.log)
        self.decode = dec.replicas
        self.replicas = list(self.prefill) + list(self.decode)
        dec.run()
        self._drop_arrivals(dec)
        dec.order = []

    @staticmethod
    def _drop_arrivals(phase: Engine) -> None:
        """A phase run: its arrival list (its replicas hold it too) is done with."""
        phase.arrival_times = []
        for r in phase.replicas:
            r.arrivals = []
