"""Prefix-aware routing (simulator/serving/router.py): every pick is SGLang's cache-aware rule as its
docstring states it, written here as one plain loop per step, on random fleets with many ties."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from simulator.serving.router import PrefixAwareRouter


class _Pool:
    block_tokens = 16

    def __init__(self, matched: int, cached: int):
        self.matched, self.cached_blocks = matched, cached

    def lookup(self, rid: int, tokens: int) -> int:
        return min(self.matched, tokens // self.block_tokens)


def _rule(replicas, rid: int) -> int:
    """The rule: balance first, then the longest match above the threshold, else the fewest cached
    blocks; ties to the fewest outstanding, then the lowest index."""
    loads = [r.outstanding for r in replicas]
    if max(loads) - min(loads) > 64 and max(loads) > 1.5 * min(loads):
        return loads.index(min(loads))
    prompt = int(replicas[0].table.prompt[rid])
    best = None
    for i, r in enumerate(replicas):
        key = (-r.pool.lookup(rid, prompt - 1), loads[i], i)
        best = key if best is None or key < best else best
    if -best[0] * 16 > 0.3 * prompt:
        return best[2]
    best = None
    for i, r in enumerate(replicas):
        key = (r.pool.cached_blocks, loads[i], i)
        best = key if best is None or key < best else best
    return best[2]


@pytest.mark.parametrize("seed", range(4))
def test_every_pick_is_the_rule(seed):
    rng = np.random.default_rng(seed)
    router, kinds = PrefixAwareRouter(16), set()
    for _ in range(3000):
        R = int(rng.integers(1, 17))
        table = SimpleNamespace(prompt=rng.integers(1, 400, size=4))
        spread = int(rng.choice([3, 200]))             # few distinct loads (ties) or an imbalance
        replicas = [SimpleNamespace(outstanding=int(rng.integers(0, spread)), table=table,
                                    pool=_Pool(int(rng.integers(0, 4)) * int(rng.integers(0, 8)),
                                               int(rng.integers(0, 3))))
                    for _ in range(R)]
        rid = int(rng.integers(0, 4))
        want = _rule(replicas, rid)
        assert router.pick(replicas, rid) == want
        prompt = int(table.prompt[rid])
        kinds.add("match" if max(r.pool.lookup(rid, prompt - 1) for r in replicas) * 16 > 0.3 * prompt
                  else "cached")
    assert kinds == {"match", "cached"}
