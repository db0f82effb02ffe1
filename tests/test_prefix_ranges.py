"""The run-length prefix pool of synthetic chains (simulator/serving/prefix_ranges.py) against the
hash pool (prefix_cache.PrefixPool, itself tested block by block in test_prefix_cache.py): the
same cached hashes, LRU order, evictions and lookups after every step of random admissions,
prompt completions, finishes, preemptions and trims; and whole runs with it against runs with the
hash pool (every request's row, every iteration's row and the summary, bit for bit), mixed and
disaggregated, single- and multi-turn, short of KV so that blocks are evicted and requests
preempted."""
from __future__ import annotations

import numpy as np
import pytest

from simulator.run import simulate
from simulator.serving import prefix_cache
from simulator.serving.prefix_cache import PrefixPool
from simulator.serving.prefix_ranges import RangePool
from simulator.workload.prefix import Chains, PrefixSpec
from tests.same_run import assert_same_run


@pytest.mark.parametrize("shared,turns", [(0, 1), (5, 1), (5, 3), (0, 4), (40, 2)])
def test_range_pool_equals_the_hash_pool_step_by_step(shared, turns):
    bt, kv = 4, 2
    chains = Chains(bt, spec=PrefixSpec(shared_tokens=shared * bt, turns=turns, block_tokens=bt))
    ref, pool = PrefixPool(bt, kv, chains), RangePool(bt, kv, shared, turns)
    rng = np.random.default_rng(shared * 10 + turns)
    held: dict[int, int] = {}      # rid -> tokens held (a prefix of its chain)
    for step in range(4000):
        rid = int(rng.integers(30))
        op = int(rng.integers(5))
        if op == 0 or rid not in held:       # admission: look up, then hold the hit
            tokens = int(rng.integers(0, 30 * bt))
            assert pool.lookup(rid, tokens) == ref.lookup(rid, tokens), step
            hit = int(rng.integers(0, ref.lookup(rid, tokens) + 1)) * bt
            ref.hold(rid, hit)
            pool.hold(rid, hit)
            held[rid] = hit
        elif op == 1:                        # a prompt computed / a finish: the chain grows
            tokens = held[rid] + int(rng.integers(0, 12 * bt))
            ref.grow(rid, tokens)
            pool.grow(rid, tokens)
            held[rid] = tokens
        elif op == 2:                        # finished or preempted
            ref.release(rid)
            pool.release(rid)
            held.pop(rid)
        elif op == 3:
            free = int(rng.integers(0, 80))
            ref.trim(free)
            pool.trim(free)
        else:
            tokens = int(rng.integers(0, 40 * bt))
            assert pool.lookup(rid, tokens) == ref.lookup(rid, tokens), step
        assert pool.hashes() == set(ref.refs), step
        assert pool.lru_hashes() == list(ref.lru), step
        assert pool.cached_blocks == ref.cached_blocks and pool.evictions == ref.evictions, step
        assert pool.held == {r: len(c) for r, c in ref.held.items()}, step


LENGTHS = {"prompt_len": {"dist": "lognormal", "median": 600, "sigma": 0.8, "max": 5000},
           "output_len": {"dist": "lognormal", "median": 150, "sigma": 0.8, "max": 1500}}


def both_pools(sc: dict, monkeypatch):
    """The run with the range pool, then with the hash pool; checks that each took the pool meant."""
    made = {RangePool: 0, PrefixPool: 0}
    for cls in made:
        monkeypatch.setattr(cls, "__init__", lambda self, *a, _cls=cls, _init=cls.__init__:
                            (made.__setitem__(_cls, made[_cls] + 1), _init(self, *a))[1])
    runs = []
    for ranges in (True, False):
        monkeypatch.setattr(prefix_cache, "RANGES", ranges)
        before = dict(made)
        runs.append(simulate(sc))
        used, unused = (RangePool, PrefixPool) if ranges else (PrefixPool, RangePool)
        assert made[used] > before[used] and made[unused] == before[unused], (ranges, made)
    return runs


@pytest.mark.parametrize("prefix,router,blocks", [
    ({"shared_tokens": 256}, "prefix_aware", 3000),
    ({"shared_tokens": 256, "turns": 4}, "prefix_aware", 2500),
    ({"shared_tokens": 100, "turns": 3, "block_tokens": 32}, "round_robin", 2500),
    (None, "least_outstanding", 800),           # no prefix shared: hits after preemptions only
])
def test_runs_with_the_range_pool_equal_runs_with_the_hash_pool(prefix, router, blocks, monkeypatch):
    wl = {"arrival": {"process": "poisson", "qps": 25.0}, "num_requests": 500, **LENGTHS}
    if prefix is not None:
        wl["prefix"] = prefix
    sc = {"hardware": {"gpu": "h100-sxm", "tp": 1, "replicas": 3}, "model": "llama-3.1-8b", "workload": wl,
          "engine": {"prefix_caching": True, "router": router, "num_gpu_blocks": blocks}, "seed": 3}
    ranges, hashes = both_pools(sc, monkeypatch)
    assert_same_run(ranges, hashes)
    s = ranges.summary
    assert s["prefix_cache_evictions"] > 0 and ranges.requests["preemptions"].sum() > 0
    assert s["prefix_cache_hit_tokens"] > 0


def test_disaggregated_runs_with_the_range_pool_equal_runs_with_the_hash_pool(monkeypatch):
    wl = {"arrival": {"process": "poisson", "qps": 30.0}, "num_requests": 400, **LENGTHS,
          "prefix": {"shared_tokens": 256, "turns": 3}}
    pools = {"prefill": {"instances": 2, "num_gpu_blocks": 1500}, "decode": {"instances": 2}}
    sc = {"hardware": {"gpu": "h100-sxm", "tp": 1}, "model": "llama-3.1-8b", "workload": wl, "disaggregation": pools,
          "engine": {"prefix_caching": True, "router": "prefix_aware"}, "seed": 7}
    ranges, hashes = both_pools(sc, monkeypatch)
    assert_same_run(ranges, hashes)
    assert ranges.summary["prefix_cache_evictions"] > 0 and ranges.summary["prefix_cache_hit_rate"] > 0
