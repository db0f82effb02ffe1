"""Routers: which replica serves a new request.

round_robin        request i goes to replica i mod R (in submission order)
least_outstanding  the replica with the fewest requests waiting or running; ties go to the
                   lowest replica index (deterministic)
"""
from __future__ import annotations

from collections.abc import Sequence


class RoundRobinRouter:
    def __init__(self, num_replicas: int):
        self.num_replicas = num_replicas
        self._next = 0

    def pick(self, replicas: Sequence) -> int:
        i = self._next
        self._next = (i + 1) % self.num_replicas
        return i


class LeastOutstandingRouter:
    def __init__(self, num_replicas: int):
        self.num_replicas = num_replicas

    def pick(self, replicas: Sequence) -> int:
        best, best_load = 0, None
        for i, r in enumerate(replicas):
            load = r.outstanding
            if best_load is None or load < best_load:
                best, best_load = i, load
        return best


def make_router(kind: str, num_replicas: int) -> RoundRobinRouter | LeastOutstandingRouter:
    if kind == "least_outstanding":
        return LeastOutstandingRouter(num_replicas)
    return RoundRobinRouter(num_replicas)
