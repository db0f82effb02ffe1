"""Routers: which replica serves a new request.

round_robin        request i goes to replica i mod R (in submission order)
least_outstanding  the replica with the fewest requests waiting or running; ties go to the
                   lowest replica index (deterministic)

`reads_state` says whether a pick reads the replicas; `next_request(replica, submitted)` is the
first request (by submission order, after `submitted` of them) that can reach a replica. The
engine lets a replica of an open loop run on to that request's arrival (simulator/serving/run_ahead.py).
"""
from __future__ import annotations

from collections.abc import Sequence


class RoundRobinRouter:
    reads_state = False

    def __init__(self, num_replicas: int):
        self.num_replicas = num_replicas
        self._next = 0

    def pick(self, replicas: Sequence) -> int:
        i = self._next
        self._next = (i + 1) % self.num_replicas
        return i

    def next_request(self, replica: int, submitted: int) -> int:
        """Request `submitted + j` goes to replica (submitted + j) mod R: the first that reaches `replica`."""
        return submitted + (replica - submitted) % self.num_replicas


class LeastOutstandingRouter:
    reads_state = True

    def __init__(self, num_replicas: int):
        self.num_replicas = num_replicas

    def pick(self, replicas: Sequence) -> int:
        best, best_load = 0, None
        for i, r in enumerate(replicas):
            load = r.outstanding
            if best_load is None or load < best_load:
                best, best_load = i, load
        return best

    def next_request(self, replica: int, submitted: int) -> int:
        """Any request may reach any replica: the next one to be submitted."""
        return submitted


def make_router(kind: str, num_replicas: int) -> RoundRobinRouter | LeastOutstandingRouter:
    if kind == "least_outstanding":
        return LeastOutstandingRouter(num_replicas)
    return RoundRobinRouter(num_replicas)
