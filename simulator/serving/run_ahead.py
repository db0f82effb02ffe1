"""A replica of an open-loop workload runs on to the next arrival that can reach it.

In an open loop nothing reaches a replica but the requests the router sends it (a finish
schedules nothing), so a replica need not stop where another replica's iteration ends: it runs
its iterations on its own clock up to the arrival of the next request that can reach it (the
router's `next_request`: with round robin its own next request; with least outstanding, whose
pick reads every replica, the next request of all), then waits in SimPy for the end of the
iteration in flight: one timeout per stretch, landing exactly on that end (`_wait_until`). Where
no trace is kept (the engine sets `crosses`), the compiled rounds run that iteration in flight too,
the last of their stretch, and the replica waits for its end with it done but for its finishes,
retired at its end (`_retire_crossed`): what the arrival does, a request joining the waiting queue,
is nothing the iteration reads, and what a router reads (`outstanding`, a prefix cache) only a
finish of such a round changes. The replicas' states at an arrival are the ones a SimPy timeout per
iteration gives wherever the router reads them, and so is every trajectory, bit for bit
(tests/test_run_ahead.py).

The tie rule. SimPy processes the events of one instant in the order they were created. Where an
iteration of this replica ends at t and requests arrive at t, the arrival process created its
event at the previous arrival time p (the latest before t), the replica at the start S of the
iteration; so the arrivals come first iff p < S, or p == S and they came first at S too
(`_arrivals_first`; `_tie` holds it for the replica's last iteration end, self.now, and is True
after an arrival woke the replica). An iteration end runs inline iff it comes before the arrivals
at h, the next that can reach the replica: it ends before h, or at h with the replica first.
Otherwise the replica yields one timeout to it, which SimPy orders as the rule does (the replica's
timeout is older than the arrival process's for any arrival after h), and at h itself, where the
arrivals come first, a zero timeout behind them.

Past an arrival that a router reading every replica may not send it, a replica runs on and goes
back if it does (run_on.py).

A mixin of `Replica` (simulator/serving/replica.py); the engine sets `arrivals`, `next_request`, `crosses`
and `runs_on`.
"""
from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

from .metrics import ITER_COLUMNS, N_ITER_COLS

if TYPE_CHECKING:
    import simpy

START, END = ITER_COLUMNS.index("start_s"), ITER_COLUMNS.index("end_s")   # an iteration-log row's columns


class RunAhead:
    """Runs a replica on to the next arrival that can reach it (a `Replica` mixin)."""
    arrivals: list[float] = []         # every request's arrival time, nondecreasing (the engine sets it)
    next_request: Callable[[int], int] | None = None  # given the requests submitted, the first that can
                                       # reach this replica (None: the next one, any reaches any replica)
    _tie = False                       # the arrivals at self.now (if any) came before this replica's activation
    _qa = 0                            # arrivals[:_qa] are all before self.now
    _qh = 0                            # arrivals[_qh - 1] is the next that can reach the replica

    def _arrivals_first(self, t: float, hi: int) -> bool:
        """Whether requests arriving at t (if any) are submitted before this replica's iteration that
        started at self.now ends at t (the tie rule above); arrivals[hi] (if any) is at or after t."""
        arr = self.arrivals
        i = bisect_left(arr, t, self._qa, hi)
        self._qa = i
        if i == len(arr) or arr[i] != t:
            return False
        p = arr[i - 1] if i else -math.inf
        return p < self.now or (p == self.now and self._tie)

    def _rounds_tie(self, m: int, skip: int = 0) -> bool:
        """`_tie` after the first m - skip of the last m compiled rounds (the iteration log's rows;
        they end before arrivals[_qh]): a round ending at an arrival time takes the flag of the
        round before it when that one ended at the previous arrival time, so the rounds are walked
        back while that holds (only at exact ties)."""
        arr, lo, hi, log = self.arrivals, self._qa, self._qh, self._logbuf
        for i in range(1 + skip, m + 1):
            row = len(log) - i * N_ITER_COLS
            t, s = log[row + END], log[row + START]
            j = bisect_left(arr, t, lo, hi)
            if i == 1 + skip:
                self._qa = j
            if j == len(arr) or arr[j] != t:
                return False
            p = arr[j - 1] if j else -math.inf
            if p != s:
                return p < s
        return self._tie

    def run_ahead(self) -> Generator[simpy.Event, object, None]:
        """The replica's SimPy process in an open loop: iterations run inline up to the next arrival
        that can reach the replica, one timeout to the end of the iteration in flight there, an
        event wait when idle."""
        env = self.env
        timeout = env.timeout
        arrivals = self.arrivals
        schedule, complete = self._schedule, self._complete
        kernel = self._kernel_rounds if self._kern is not None else None
        rounds_tie, next_request = self._rounds_tie, self.next_request
        runs_on = self.runs_on and self.ON and kernel is not None
        inf = math.inf
        log, logbuf = self.log, self._logbuf
        fold_floats = log.fold_floats          # (sys.maxsize unless the run drops the log)
        while True:
            if len(logbuf) > fold_floats:      # between stretches: no row of the log is read later
                log.fold()
            if not (self.n or self.prefills or self.waiting):
                self.idle_event = env.event()
                yield self.idle_event
                self.now, self._tie = env.now, True        # woken by an arrival: it came first
            # the requests submitted so far: those arriving before self.now, and at it if they came first
            now, lo = self.now, self._qa
            j = bisect_right(arrivals, now, lo) if self._tie else bisect_left(arrivals, now, lo)
            if next_request is not None:
                j = next_request(j)
            h = arrivals[j] if j < len(arrivals) else inf
            self._qh = hi = min(j + 1, len(arrivals))
            start = env.now
            if runs_on and self.n and now == start < h < inf and (wake := self._run_on(j, h)) is not None:
                yield wake            # ran on past h to a finish (run_on.py): its end, or the end of
                self._end_run_on()    # the round in flight at an arrival sent here
                continue
            ran = False               # the iteration in flight ran in the compiled rounds (it crossed h)
            while True:               # plan at self.now; go on while the iteration ends before h's arrivals
                if kernel is not None and not self.prefills and (m := kernel(start, h)):
                    if self.now < h:          # no round crossed h: plan the next iteration below
                        self._tie = rounds_tie(m)
                    else:                     # the last crossed h: the iteration in flight there; self.now
                        # and `_tie` go back to its start (`crosses`)
                        row = len(logbuf) - N_ITER_COLS
                        self.now, t = logbuf[row + START], logbuf[row + END]
                        if m > 1:             # (one round: `_tie` stays)
                            self._tie = rounds_tie(m, 1)
                        first = self._arrivals_first(t, len(arrivals))
                        if t > h or first:
                            ran = True
                            break
                        self.now, self._tie = t, first     # it ended at h before h's arrivals: plan on
                        if self._crossed_n:
                            self._retire_crossed()
                        if not (self.n or self.prefills or self.waiting):
                            t = None
                            break
                        continue
                dt = schedule()
                if dt is None:        # everything preempted itself: plan again at once
                    if self.n or self.prefills or self.waiting:
                        continue
                    t = None
                    break
                t = self.now + dt
                if t > h:
                    first = self._arrivals_first(t, len(arrivals))
                    break
                first = self._arrivals_first(t, hi)
                if (t == h and first) or start + (t - start) != t:
                    break
                self.now, self._tie = t, first
                complete()
                if not (self.n or self.prefills or self.waiting):
                    t = None
                    break
            if t is None:
                continue
            if ran:                   # the compiled rounds checked that start + (t - start) is t
                yield timeout(t - start)
            else:
                yield from self._wait_until(t, dt)
            if t == h and first:      # the arrivals at h first: behind the arrival process's event
                yield timeout(0)      # at h (created earlier); else this one, created before it, leads
            self.now, self._tie = t, first
            if not ran:
                complete()
            elif self._crossed_n:
                self._retire_crossed()

    def _wait_until(self, t: float, dt: float) -> Generator[simpy.Event, object, None]:
        """SimPy's clock to t, the end of the iteration of dt seconds started at self.now. One timeout
        where SimPy's clock plus t minus it is t; else one to self.now (its inline steps were
        checked to land so), a zero one there if the arrivals came first, then dt."""
        env = self.env
        now = env.now
        if now == self.now:
            yield env.timeout(dt)
        elif now + (t - now) == t:
            yield env.timeout(t - now)
        else:
            yield env.timeout(self.now - now)
            if self._tie:
                yield env.timeout(0)
            yield env.timeout(dt)
