"""A replica with automatic prefix caching: admission looks a request's prompt blocks up in the
instance's pool (prefix_cache.make_pool), the cached tokens are context of the first chunk and
not computed; a prompt computed caches its full blocks, a finished request its output's full
blocks too, and a request leaving (finished or preempted) makes them evictable.

What a hit saves: the prefill compute of its tokens (the pass prices the chunk with them as
cached context). Memory: each running request counts its whole context's blocks, so blocks that
two running requests share are counted twice (KV use over-counted where prefixes are shared by
requests in flight at once; a block held by no request costs nothing until it is evicted).

`PrefixCaching` is a mixin put before a replica class (Replica, EngineReplica): `with_prefix_cache`;
a run's figures: `prefix_cache_summary`.
"""
from __future__ import annotations

from typing import Any

from .prefix_cache import make_pool


class PrefixCaching:
    """Prefix-cache hooks of a replica (needs the Replica fields; `table.chains` the hashes)."""
    caching = True

    def _init_prefix_cache(self) -> None:
        chains = self.table.chains
        self.pool = make_pool(chains, -(-chains.block_tokens // self.bs))
        self.prefix_query_tokens = 0     # prompt tokens of the prefills computed (admissions)
        self.prefix_hit_tokens = 0       # ... of them found cached
        self._hits: dict[int, int] = {}  # request id -> tokens cached at its admission

    def _first_chunk(self, rid: int, budget: int, free: int) -> tuple[int, int, int, int]:
        t = self.table
        need_t = t.prompt.item(rid) + t.generated.item(rid)
        pool = self.pool
        pool.trim(free)
        hit = pool.lookup(rid, need_t - 1) * pool.block_tokens    # a hit stops one token short (vLLM)
        c = min(need_t - hit, budget)
        return need_t, c, -(-(hit + c) // self.bs), hit

    def _take_prefix(self, rid: int, hit: int) -> None:
        self.pool.hold(rid, hit)
        self._hits[rid] = hit

    def _complete_prefills(self, now: float) -> int:
        pool = self.pool
        for e in self._pf_sched:
            if e[2] + e[3] >= e[1]:                       # its last chunk: the prompt is computed
                rid = e[0]
                pool.grow(rid, e[1])
                self.prefix_query_tokens += e[1]
                self.prefix_hit_tokens += self._hits.pop(rid, 0)
        return super()._complete_prefills(now)

    def _requeue(self, rid: int) -> None:
        self.pool.release(rid)
        self._hits.pop(rid, None)
        super()._requeue(rid)

    def _finish(self, rid: int, now: float) -> None:
        t = self.table
        self.pool.grow(rid, t.prompt.item(rid) + t.output.item(rid))
        self.pool.release(rid)
        super()._finish(rid, now)


def with_prefix_cache(replica_class: type) -> type:
    """The replica class with prefix caching (its constructor then sets the pool up)."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        replica_class.__init__(self, *args, **kwargs)
        self._init_prefix_cache()

    return type(f"Caching{replica_class.__name__}", (PrefixCaching, replica_class), {"__init__": __init__})


def prefix_cache_summary(replicas: Any) -> dict[str, Any]:
    """Prefix-cache figures of a run: cached prompt tokens / prompt tokens prefilled (admissions,
    a preempted request's again included), and the hashed blocks evicted."""
    query = sum(r.prefix_query_tokens for r in replicas)
    hit = sum(r.prefix_hit_tokens for r in replicas)
    return {"prefix_cache_hit_rate": hit / query if query else 0.0, "prefix_cache_hit_tokens": int(hit),
            "prefix_cache_evictions": int(sum(r.pool.evictions for r in replicas))}
