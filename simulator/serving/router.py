"""Routers: which replica serves a new request.

round_robin        request i goes to replica i mod R (in submission order)
least_outstanding  the replica with the fewest requests waiting or running; ties go to the
                   lowest replica index (deterministic)
prefix_aware       the replica whose prefix cache holds the longest prefix of the request's prompt
                   blocks (cache-aware routing, as SGLang's router and llm-d's scheduler score
                   instances by prefix match); ties, a miss everywhere included, go to the fewest
                   outstanding, then the lowest index. Load is not traded against the match.

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

    def pick(self, replicas: Sequence, rid: int = -1) -> int:
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

    def pick(self, replicas: Sequence, rid: int = -1) -> int:
        best, best_load = 0, None
        for i, r in enumerate(replicas):
            load = r.outstanding
            if best_load is None or load < best_load:
                best, best_load = i, load
        return best

    def next_request(self, replica: int, submitted: int) -> int:
        """Any request may reach any replica: the next one to be submitted."""
        return submitted


class PrefixAwareRouter(LeastOutstandingRouter):
    """The longest cached prefix match (the replicas' `pool` and `chains`, prefix_replica.py)."""

    def pick(self, replicas: Sequence, rid: int = -1) -> int:
        r0 = replicas[0]
        t = r0.table
        chain = r0.chains.chain(rid, t.prompt.item(rid) - 1)
        best, key = 0, None
        for i, r in enumerate(replicas):
            k = (-r.pool.match(chain, len(chain)), r.outstanding)
            if key is None or k < key:
                best, key = i, k
        return best


def make_router(kind: str, num_replicas: int) -> RoundRobinRouter | LeastOutstandingRouter:
    if kind == "least_outstanding":
        return LeastOutstandingRouter(num_replicas)
    if kind == "prefix_aware":
        return PrefixAwareRouter(num_replicas)
    return RoundRobinRouter(num_replicas)
