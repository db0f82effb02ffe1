"""A replica runs on past arrivals that a router reading every replica may not send it, and goes back
to the one that does.

With a router whose pick reads every replica (`reaches_any`: least outstanding, prefix-aware), any
arrival may reach any replica, so run_ahead.py alone stops each busy replica at every arrival of the
fleet. But what such a router reads of a replica (`outstanding`, a prefix cache) only a finish
changes among the rounds the compiled rounds run (no prefill, no waiting request: no admission, no
pool lookup), and a round depends on nothing but the replica's own state until a request reaches
it. So a replica all in decode with nothing waiting, at its clock c before the next arrival h, runs
on (`_run_on`) in the compiled rounds up to the first round that finishes a sequence (its finishes
retired at its end E, as a crossing round's are) or the first round they cannot run, its log rows
kept aside, and waits in SimPy for E. Arrivals in between read its state as it was at c, which is
its state at their time. If one of them, at a, is sent to it (`submit` calls `_go_back`), the
replica goes back to its state at c (`RunOnState`, taken before running on), runs the compiled
rounds from c to the round in flight at a, as a replica of a round-robin fleet runs to its next
request (the same rounds, whatever stretches they are cut into), and waits for that round's end
instead. Where no arrival falls before E, what it ran is logged and retired at once, as run_ahead.py
would run it.

Exact ties are left to run_ahead.py: the replica runs on only where no arrival in (c, E] falls on a
round's end, so the end it waits for holds no arrival in SimPy's queue, and the tie flag there is
False. Every trajectory is the one the stops give, bit for bit (tests/test_run_on.py: requests,
iteration log and summary against `RunOn.ON = False`). A dropped log (`iterations="none"`) receives
the rows in another order, so its blocks and the float sums' last bits can differ.

A mixin of `Replica` (simulator/serving/replica.py): the engine sets `runs_on` for an open loop that
keeps no trace, where the router reads every replica and declares `runs_on` (prefix-aware; least
outstanding does not, where it does not pay: router.py).
"""
from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from heapq import heappush
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from simpy.events import NORMAL

from .metrics import N_ITER_COLS
from .run_ahead import END, START

if TYPE_CHECKING:
    import simpy


class RunOnState(NamedTuple):
    """What the compiled rounds change in a replica, at its clock c before running on."""
    c: float
    sum_ctx: int
    pend_sum: int
    rem_lb: int
    blocks: int | None
    res: list[int] | None
    rounds_cum: int
    k_cum: int
    pos: int
    pend_em: np.ndarray | None
    kvc: np.ndarray          # [n] d_kvc[:n]
    pend: np.ndarray         # [n] d_pend[:n]


def event_at(env: simpy.Environment, t: float) -> simpy.Event:
    """A triggered event that SimPy processes at exactly t (env.schedule takes a delay, and
    now + (t - now) need not be t): the heap entry env.schedule pushes, with t itself."""
    ev = env.event()
    ev._ok, ev._value = True, None
    heappush(env._queue, (t, NORMAL, next(env._eid), ev))
    return ev


class RunOn:
    """Runs a replica on past arrivals, going back where one reaches it (a `Replica` mixin)."""
    ON = True                # off: run_ahead.py's stop at every arrival (the reference of tests/test_run_on.py)
    runs_on = False          # set by the engine (module docstring)
    _on: RunOnState | None = None      # the state to go back to while running on
    _wake: simpy.Event | None = None   # the event the replica waits for (at _wake_t)
    _wake_t = 0.0
    _on_rows: array | None = None      # the rows run on, logged at the end they wait for

    def _run_on(self, j: int, h: float) -> simpy.Event | None:
        """From the replica's clock c (SimPy's), arrivals[j] = h the next arrival after it: run on
        (module docstring) and return the event to wait for; None where the replica is to go on as
        run_ahead.py has it: nothing run (its state as it was), an exact tie (its state restored),
        or no arrival in between (what it ran logged and its finishes retired, at their end)."""
        if self.waiting or self.prefills or not self.n:
            return None
        n, blk, c = self.n, self._block, self.now
        snap = RunOnState(c, self.sum_ctx, self.pend_sum, self.rem_lb, self._blocks, self._res, self.rounds_cum,
                          self.k_cum, blk.pos if blk is not None else 0, self._pend_em, self.d_kvc[:n].copy(),
                          self.d_pend[:n].copy())
        rows = self._on_rows
        if rows is None:
            rows = self._on_rows = array("d")
        shared, self._logbuf = self._logbuf, rows
        try:
            m = self._kernel_rounds(c, math.inf, stop_at_finish=True)
        finally:
            self._logbuf = shared
        if m == 0:
            self._restore(snap)
            return None
        e = rows[len(rows) - N_ITER_COLS + END]
        arr = self.arrivals
        hi = bisect_right(arr, e, j)
        if hi == j:                       # no arrival before its end: as run_ahead.py runs it, inline
            shared.extend(rows)
            del rows[:]
            self.now, self._tie = e, False
            if self._crossed_n:
                self._retire_crossed()
            return None
        if not set(rows[END::N_ITER_COLS]).isdisjoint(arr[j:hi]):   # an arrival on a round's end:
            self._restore(snap)                                      # the tie is run_ahead.py's
            return None
        self._on = snap
        self.now = rows[len(rows) - N_ITER_COLS + START]
        self._wake_t = e
        self._wake = ev = event_at(self.env, e)
        return ev

    def _restore(self, s: RunOnState) -> None:
        n = len(s.kvc)
        self.now = s.c
        self.sum_ctx, self.pend_sum, self.rem_lb = s.sum_ctx, s.pend_sum, s.rem_lb
        self._blocks, self._res = s.blocks, s.res
        self.rounds_cum, self.k_cum, self._pend_em = s.rounds_cum, s.k_cum, s.pend_em
        if self._block is not None:
            self._block.pos = s.pos
        self.d_kvc[:n] = s.kvc
        self.d_pend[:n] = s.pend
        self._crossed_n = 0
        del self._on_rows[:]

    def _go_back(self) -> None:
        """A request reaches the replica while it runs on (SimPy's clock at its arrival a): back to
        its state at c, the compiled rounds from c to the round in flight at a (those it ran on, up
        to that one), and wait for that round's end."""
        s, self._on = self._on, None
        self._restore(s)
        self._kernel_rounds(s.c, self.env.now)
        row = len(self._logbuf) - N_ITER_COLS
        self.now, end = self._logbuf[row + START], self._logbuf[row + END]
        old, self._wake = self._wake, event_at(self.env, end)
        self._wake.callbacks, old.callbacks = old.callbacks, []    # the replica's process waits for this one
        self._wake_t = end

    def _end_run_on(self) -> None:
        """At the end waited for: the rows run on logged (unless gone back), the finishes retired."""
        if self._on is not None:
            self._on = None
            self._logbuf.extend(self._on_rows)
            del self._on_rows[:]
        self._wake = None
        self.now, self._tie = self._wake_t, False
        if self._crossed_n:
            self._retire_crossed()
