"""The SimPy model of a deployment: arrival streams, a router, and replicas.

Processes (all SimPy generators taking `env` through their object):
  - one arrival process for an open-loop workload (all requests, in arrival order; requests
    arriving at the same instant are submitted together); for a closed loop, one process that
    issues the first request of each of min(concurrency, num_requests) users at t = 0, after
    which a finish schedules that user's next step (an event; think_time_s later a timeout),
    so memory grows with the requests in flight, never with `concurrency`, and the events are
    the ones a process per user would schedule, in the same order (with concurrency >=
    num_requests no user sends a second request: that is run as the open loop it is, every
    request arriving at t = 0, on the same trajectory);
  - one process per replica: with an open loop (`Replica.run_ahead`, simulator/serving/run_ahead.py)
    iterations run on the replica's clock up to the arrival of the next request that can reach
    it (the router's `next_request`) and one SimPy timeout waits for the iteration in flight
    there; with a closed loop, or when a trace of several replicas is kept (`Replica.run`), at
    most one timeout per iteration, iterations that end before the next scheduled event running
    without one. Both give the trajectory of one timeout per iteration (`Replica.INLINE = False`).
`env.run()` returns when no event is left, i.e. when every request has finished. `run_to_frames`
runs an engine (this one or a disaggregated one, disagg.py) and returns its DataFrames.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import simpy

from .metrics import IterationLog, RequestTable
from .router import make_router


class Engine:
    """Wires requests, a router and replicas into one SimPy environment and runs it."""
    RUN_AHEAD = True     # open loop: replicas run on to their next arrival (off: Replica.run's rule)
    RUN_AHEAD_MIN_REPLICAS = 1   # one replica too: its compiled rounds then run the iteration in flight at an arrival
    ONE_REQUEST_USERS_AS_OPEN = True   # a closed loop with concurrency >= num_requests runs as an open loop
    FINISHES = True      # every request finishes in this engine (not so in a disaggregated run's prefill pool)

    def __init__(self, table: RequestTable, make_replica: Callable[..., object], num_replicas: int,
                 router: str, closed_loop: tuple[int, float] | None = None, trace: list | None = None,
                 log: IterationLog | None = None, arrivals: list[float] | None = None):
        """`log`: the iteration log the replicas write (a new one if None); `arrivals`: an open loop's
        submission times, nondecreasing (None: the table's arrival_s, request i submitted i-th)."""
        self.env = simpy.Environment()
        self.table = table
        if self.ONE_REQUEST_USERS_AS_OPEN and closed_loop is not None and closed_loop[0] >= table.n:
            closed_loop = None    # every user sends one request at t = 0, none a second: an open loop
        self.log = IterationLog() if log is None else log
        if arrivals is None:      # (a closed loop sets each arrival as its user sends it: none to list)
            arrivals = table.arrival_s.tolist() if closed_loop is None else []
        self.arrival_times = arrivals
        self.trace = trace
        self.closed_loop = closed_loop
        self.replicas: Sequence = [make_replica(self.env, i, table, self.log, self._on_finish)
                                   for i in range(num_replicas)]
        self.router = make_router(router, num_replicas)
        for r in self.replicas:       # open loop: a finish schedules nothing (`_on_finish`), so any
            r.silent_finish = closed_loop is None     # iteration may run inline (Replica.run)
        self._next_rid = 0
        self._think_s = 0.0 if closed_loop is None else float(closed_loop[1])
        # Replicas of an open loop run on to their next arrival, unless a trace of several is kept:
        # its order at one instant across replicas is SimPy's, which only Replica.run keeps.
        self.run_ahead = (self.RUN_AHEAD and closed_loop is None and getattr(self.replicas[0], "INLINE", False)
                          and num_replicas >= self.RUN_AHEAD_MIN_REPLICAS and (trace is None or num_replicas == 1))
        if self.run_ahead:
            times = self.arrival_times
            # no trace kept: the compiled rounds may run the iteration in flight at a replica's next
            # arrival before it, its finishes retired at its end (a router reads what they change:
            # run_ahead.py)
            cross = trace is None
            for i, r in enumerate(self.replicas):
                r.arrivals = times
                r.next_request = None if self.router.reaches_any else functools.partial(self.router.next_request, i)
                if cross:
                    r.crosses = r.CROSS
                    # a router reading every replica: run on past arrivals it may not send here (run_on.py;
                    # one replica is sent every arrival)
                    r.runs_on = r.CROSS and self.router.reaches_any and self.router.runs_on and num_replicas > 1
        elif trace is None:       # Replica.run: the compiled rounds may run the iteration in flight at
            for r in self.replicas:       # the next event, its completion at its end (Replica._wait_crossed)
                r.crosses = r.holds_crossed_row = getattr(r, "CROSS", False)

    # ---- submission -----------------------------------------------------------------------
    def _submit(self, rid: int) -> None:
        r = self.router.pick(self.replicas, rid)
        self.table.replica[rid] = r
        if self.trace is not None:
            self.trace.append((self.env.now, "arrive", rid))
        self.replicas[r].submit(rid)

    def _open_loop(self):
        env = self.env
        times = self.arrival_times
        n = len(times)
        i = 0
        while i < n:
            t = times[i]
            if t > env.now:
                yield env.timeout(t - env.now)
            while i < n and times[i] <= env.now:
                self._submit(i)
                i += 1

    def _start_users(self, concurrency: int):
        """Each user's first request at t = 0 (users past num_requests never issue one)."""
        for _ in range(min(concurrency, self.table.n)):
            self._issue()
        return
        yield   # a generator: SimPy runs it as a process, where the user processes started

    def _issue(self, _event: simpy.Event | None = None) -> None:
        """A closed-loop user sends the next request, if any is left."""
        rid = self._next_rid
        if rid >= self.table.n:
            return
        self._next_rid = rid + 1
        self.table.arrival_s[rid] = self.env.now
        self._submit(rid)

    def _reply(self, _event: simpy.Event) -> None:
        """A user got its reply: the next request after think_time_s (at once without one)."""
        if self._next_rid >= self.table.n:
            return
        if self._think_s > 0:
            self.env.timeout(self._think_s).callbacks.append(self._issue)
        else:
            self._issue()

    def _on_finish(self, rid: int) -> None:
        if self.closed_loop is not None:
            ev = self.env.event()
            ev.callbacks.append(self._reply)
            ev.succeed()

    # ---- run ------------------------------------------------------------------------------
    def run(self) -> None:
        env = self.env
        for r in self.replicas:
            env.process(r.run_ahead() if self.run_ahead else r.run())
        if self.closed_loop is None:
            env.process(self._open_loop())
        else:
            env.process(self._start_users(int(self.closed_loop[0])))
        env.run()
        if not self.FINISHES:
            return
        unfinished = int(np.isnan(self.table.finish_s).sum())
        if unfinished:
            raise RuntimeError(f"simulation stalled with {unfinished} unfinished requests (a bug: please report)")


def run_to_frames(engine: Any, table: RequestTable, caps: list[int], iterations: str) -> tuple[Any, Any, Any]:
    """Run the engine; the requests' and iterations' DataFrames (None with iterations "none") and the
    iteration totals (None with the log kept)."""
    totals = engine.log.drop(caps) if iterations == "none" else None
    engine.run()
    req_df = table.frame()
    if totals is not None:
        engine.log.fold()
    it_df = engine.log.frame(caps) if totals is None else None
    return req_df, it_df, totals
