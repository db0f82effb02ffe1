"""Routers: which replica serves a new request.

round_robin        request i goes to replica i mod R (in submission order)
least_outstanding  the replica with the fewest requests waiting or running; ties go to the
                   lowest replica index (deterministic)
prefix_aware       cache-aware routing by SGLang's router rule (sgl-project's SGLang Model Gateway,
                   `--policy cache_aware`, its defaults: cache threshold 0.3, balance thresholds 64
                   requests absolute and 1.5 relative; lightseekorg/smg docs/getting-started/
                   load-balancing.md): when the replicas' loads (requests outstanding) differ by more
                   than 64 and the largest is over 1.5 x the smallest, the least loaded; otherwise the
                   replica whose prefix cache holds the longest prefix of the request's prompt blocks,
                   if that covers more than 0.3 of the prompt, else the one caching the fewest blocks
                   (the most room). Ties go to the fewest outstanding, then the lowest index.

`reads_state` says whether a pick reads the replicas; `next_request(replica, submitted)` is the
first request (by submission order, after `submitted` of them) that can reach a replica
(`reaches_any`: every request can reach every replica, so it is `submitted`). The engine lets a
replica of an open loop run on to that request's arrival (simulator/serving/run_ahead.py), and with
`runs_on` past it, going back if it is sent there (simulator/serving/run_on.py). Least outstanding
does not: in the 4P12D decode pool of benchmarks/bench_fleet_features.py (case both), whose picks
spread the load evenly, a replica running on was sent a request within two arrivals as a rule, and
the rounds run again cost more than the stops saved (`--instructions --requests 2000 --cases both`
with `runs_on = True` here: 3.46e9 instructions against 3.36e9); prefix-aware routing gains
(case prefix: 1.85e9 against 2.24e9 without running on).
"""
from __future__ import annotations

from collections.abc import Sequence


class RoundRobinRouter:
    reads_state = False
    reaches_any = False
    runs_on = False

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
    reaches_any = True
    runs_on = False

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
    """SGLang's cache-aware rule (module docstring) over the replicas' `pool` (prefix_replica.py)."""
    runs_on = True
    CACHE_THRESHOLD = 0.3        # matched share of the prompt above which the match decides
    BALANCE_ABS = 64             # outstanding requests: imbalance when max - min exceeds this ...
    BALANCE_REL = 1.5            # ... and max exceeds this times min

    def pick(self, replicas: Sequence, rid: int = -1) -> int:
        loads = [r.outstanding for r in replicas]
        hi, lo = max(loads), min(loads)
        if hi - lo > self.BALANCE_ABS and hi > self.BALANCE_REL * lo:
            return loads.index(lo)
        r0 = replicas[0]
        prompt = r0.table.prompt.item(rid)
        q = prompt - 1
        best, most, best_load = 0, -1, 0      # the longest match, then the fewest outstanding, then the lowest index
        for i, r in enumerate(replicas):
            m = r.pool.lookup(rid, q)
            if m > most or (m == most and loads[i] < best_load):
                best, most, best_load = i, m, loads[i]
        if most * r0.pool.block_tokens > self.CACHE_THRESHOLD * prompt:
            return best
        best, fewest, best_load = 0, None, 0  # the fewest cached blocks, then outstanding, then index
        for i, r in enumerate(replicas):
            c = r.pool.cached_blocks
            if fewest is None or c < fewest or (c == fewest and loads[i] < best_load):
                best, fewest, best_load = i, c, loads[i]
        return best

def make_router(kind: str, num_replicas: int) -> RoundRobinRouter | LeastOutstandingRouter:
    if kind == "least_outstanding":
        return LeastOutstandingRouter(num_replicas)
    if kind == "prefix_aware":
        return PrefixAwareRouter(num_replicas)
    return RoundRobinRouter(num_replicas)
