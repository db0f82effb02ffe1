"""The SimPy model of a deployment: arrival streams, a router, and replicas.

Processes (all SimPy generators taking `env` through their object):
  - one arrival process for an open-loop workload (all requests, in arrival order; requests
    arriving at the same instant are submitted together), or one process per closed-loop user
    (issue a request, wait for it to finish, think, repeat);
  - one process per replica (`Replica.run`): at most one SimPy timeout per iteration (iterations
    that end before the next scheduled event run without one, on the same trajectory).
`env.run()` returns when no event is left, i.e. when every request has finished.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import simpy

from .metrics import IterationLog, RequestTable
from .router import make_router


class Engine:
    """Wires requests, a router and replicas into one SimPy environment and runs it."""

    def __init__(self, table: RequestTable, make_replica: Callable[..., object], num_replicas: int,
                 router: str, closed_loop: tuple[int, float] | None = None, trace: list | None = None):
        self.env = simpy.Environment()
        self.table = table
        self.log = IterationLog()
        self.trace = trace
        self.closed_loop = closed_loop
        self.replicas: Sequence = [make_replica(self.env, i, table, self.log, self._on_finish)
                                   for i in range(num_replicas)]
        self.router = make_router(router, num_replicas)
        for r in self.replicas:       # open loop: a finish schedules nothing (`_on_finish`), so any
            r.silent_finish = closed_loop is None     # iteration may run inline (Replica.run)
        self._next_rid = 0
        self._owner: np.ndarray | None = None
        self._user_events: list = []

    # ---- submission -----------------------------------------------------------------------
    def _submit(self, rid: int) -> None:
        r = self.router.pick(self.replicas)
        self.table.replica[rid] = r
        if self.trace is not None:
            self.trace.append((self.env.now, "arrive", rid))
        self.replicas[r].submit(rid)

    def _open_loop(self):
        env = self.env
        times = self.table.arrival_s.tolist()
        n = len(times)
        i = 0
        while i < n:
            t = times[i]
            if t > env.now:
                yield env.timeout(t - env.now)
            while i < n and times[i] <= env.now:
                self._submit(i)
                i += 1

    def _user(self, u: int, think_s: float):
        env = self.env
        first = True
        while self._next_rid < self.table.n:
            if not first and think_s > 0:
                yield env.timeout(think_s)
            first = False
            if self._next_rid >= self.table.n:
                return
            rid = self._next_rid
            self._next_rid += 1
            self.table.arrival_s[rid] = env.now
            assert self._owner is not None
            self._owner[rid] = u
            ev = self._user_events[u] = env.event()
            self._submit(rid)
            yield ev

    def _on_finish(self, rid: int) -> None:
        if self._owner is not None:
            ev = self._user_events[int(self._owner[rid])]
            if ev is not None and not ev.triggered:
                ev.succeed()

    # ---- run ------------------------------------------------------------------------------
    def run(self) -> None:
        env = self.env
        for r in self.replicas:
            env.process(r.run())
        if self.closed_loop is None:
            env.process(self._open_loop())
        else:
            concurrency, think_s = self.closed_loop
            self._owner = np.full(self.table.n, -1, dtype=np.int64)
            self._user_events = [None] * concurrency
            for u in range(concurrency):
                env.process(self._user(u, think_s))
        env.run()
        unfinished = int(np.isnan(self.table.finish_s).sum())
        if unfinished:
            raise RuntimeError(f"simulation stalled with {unfinished} unfinished requests (a bug: please report)")
