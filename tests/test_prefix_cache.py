"""Prefix caching: the block pool's LRU order, hit rates against closed forms, multi-turn
conversations under round robin and prefix-aware routing, and the Mooncake conversation trace
against the cache ratio its authors publish."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulator.common.errors import SpecsightInputError
from simulator.common.paths import REPO_ROOT
from simulator.run import simulate
from simulator.serving.prefix_cache import PrefixPool
from simulator.workload.prefix import Chains, load_hash_trace

MOONCAKE = "data/traces/mooncake_fast25_conversation.jsonl.xz"
MOONCAKE_CACHE_RATIO = 0.40     # Qin et al., FAST 2025, Table 2: conversation workload, "Cache Ratio 40%"


def fixed(workload: dict, **engine) -> dict:
    return {"hardware": {"kind": "fixed", "target_step_s": 0.01, "draft_step_s": 0.001},
            "workload": workload, "engine": {"prefix_caching": True, "num_gpu_blocks": 100_000, **engine}}


def test_lru_cycle_longer_than_the_cache_never_hits():
    """LRU's classic closed form: M prompts in a cycle hit every time after the first cycle when
    the free blocks hold all M, and never when they hold M - 1."""
    for room, expect in ((3, 6), (2, 0)):
        pool, hits = PrefixPool(16, 1), 0
        for rid, h in enumerate([1, 2, 3] * 3):
            pool.trim(room)
            hits += pool.match([h], 1)
            pool.acquire(rid, [h])
            pool.release(rid)
        assert hits == expect


def test_released_chain_is_evicted_tail_first_and_held_blocks_never():
    pool = PrefixPool(16, 2)
    pool.acquire(0, [10, 11, 12])
    pool.acquire(1, [20])
    pool.release(0)
    pool.trim(4)                 # room for two hashes (2 engine blocks each): the chain's tail goes first
    assert set(pool.refs) == {10, 11, 20}
    pool.trim(0)                 # nothing free: every unreferenced hash goes, the held one stays
    assert set(pool.refs) == {20} and pool.evictions == 3


def test_identical_prompts_hit_all_blocks_but_the_first_requests():
    """N identical prompts of S + 1 tokens arriving one at a time: every request after the first
    finds floor(S / block) blocks cached (a hit stops one token short of the prompt)."""
    n, shared, bt = 40, 1000, 16
    wl = {"arrival": {"process": "constant", "qps": 1.0}, "num_requests": n, "prompt_len": 1, "output_len": 4,
          "prefix": {"shared_tokens": shared, "block_tokens": bt}}
    s = simulate(fixed(wl)).summary
    assert s["prefix_cache_hit_tokens"] == (n - 1) * (shared // bt) * bt
    assert s["prefix_cache_hit_rate"] == pytest.approx((n - 1) * (shared // bt) * bt / (n * (shared + 1)))


def conversation_hits(n: int, turns: int, shared: int, message: int, output: int, bt: int, replicas: int,
                      own_replica: bool) -> int:
    """Closed form of the tokens found cached: turn j > 0 finds its conversation's earlier prompt and
    output (their full blocks) when it lands where turn j - 1 ran; otherwise the system prompt's full
    blocks, once any earlier request ran there."""
    hits, seen = 0, set()
    for rid in range(n):
        j = rid % turns
        r = (rid // turns) % replicas if own_replica else rid % replicas
        if j and (own_replica or replicas == 1):
            hits += ((shared + j * (message + output)) // bt) * bt
        elif r in seen:
            hits += (shared // bt) * bt
        seen.add(r)
    return hits


@pytest.mark.parametrize("router", ["round_robin", "prefix_aware"])
def test_multi_turn_conversations_closed_form(router):
    """Conversations of 4 turns over 4 replicas, each request done before the next arrives: round
    robin sends every turn elsewhere (only the system prompt hits); prefix-aware routing finds the
    replica holding the conversation, which hits all of its history."""
    n, turns, shared, message, output, bt, replicas = 48, 4, 300, 50, 20, 16, 4
    wl = {"arrival": {"process": "constant", "qps": 2.0}, "num_requests": n, "prompt_len": message,
          "output_len": output, "prefix": {"shared_tokens": shared, "turns": turns, "block_tokens": bt}}
    sc = fixed(wl, router=router)
    sc["hardware"]["replicas"] = replicas
    s = simulate(sc).summary
    if router == "round_robin":
        assert s["prefix_cache_hit_tokens"] == conversation_hits(n, turns, shared, message, output, bt, replicas, False)
    else:
        # the first conversation lands on replica 0; each new conversation then ties on the system
        # prompt everywhere it ran and goes to the fewest outstanding (all idle: the lowest index)
        hits = 0
        for rid in range(n):
            j = rid % turns
            hits += ((shared + j * (message + output)) // bt) * bt if j else (shared // bt) * bt * (rid > 0)
        assert s["prefix_cache_hit_tokens"] == hits


def mooncake_ratio(requests: int | None = None) -> float:
    """The trace's cache ratio with an unbounded cache, through the simulator's pool: prompt tokens
    found cached / prompt tokens, requests in arrival order."""
    tr = load_hash_trace(REPO_ROOT / MOONCAKE, "trace")
    chains = Chains(512, flat=tr["hash_flat"], offsets=tr["hash_offsets"])
    pool, hit, query = PrefixPool(512, 1), 0, 0
    for rid, p in enumerate(tr["num_prefill_tokens"].tolist()[:requests]):
        c = chains.chain(rid, p - 1)
        hit += pool.match(c, len(c)) * 512
        query += p
        pool.acquire(rid, chains.chain(rid, p))
        pool.release(rid)
    return hit / query


def test_mooncake_trace_cache_ratio_matches_the_published_figure():
    """The whole hour (12,031 requests): 37.3 % of prompt tokens are a cached prefix with an unbounded
    cache, against the authors' "approximately 40%" (Table 2); tolerance 5 points, for their rounding
    and their count of the partial last block (hashed in the trace, never a hit here)."""
    assert abs(mooncake_ratio() - MOONCAKE_CACHE_RATIO) < 0.05


def test_mooncake_slice_through_the_fleet_prefix_aware_beats_round_robin():
    """The trace's first 400 requests on 4 instances with room for everything: prefix-aware routing
    finds nearly all of an unbounded single cache's hits, never more (what it misses: requests
    arriving before the prompt they share is computed, ties sent to another instance), round robin
    scatters the conversations."""
    n = 400
    wl = {"arrival": {"process": "trace", "path": MOONCAKE, "max_requests": n}}
    rates = {}
    for router in ("round_robin", "prefix_aware"):
        sc = fixed(wl, router=router, num_gpu_blocks=2_000_000, max_num_batched_tokens=16384)
        sc["hardware"]["replicas"] = 4
        rates[router] = simulate(sc, iterations="none").summary["prefix_cache_hit_rate"]
    bound = mooncake_ratio(n)
    assert 0.97 * bound <= rates["prefix_aware"] <= bound
    assert rates["round_robin"] < 0.8 * rates["prefix_aware"]


def test_bad_inputs_name_their_field(tmp_path: Path):
    with pytest.raises(SpecsightInputError, match="engine.router"):
        simulate({**fixed({"arrival": {"process": "constant", "qps": 1}, "num_requests": 2, "prompt_len": 4,
                           "output_len": 2}, router="prefix_aware", prefix_caching=False)})
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 5}\n')
    with pytest.raises(SpecsightInputError, match="line 1"):
        load_hash_trace(bad, "workload.arrival.path")


class LoopPool:
    """The pool's rules one hash at a time (module docstring of prefix_cache.py): the reference the
    pool's mapped updates must match, order of the LRU queue included."""

    def __init__(self, kv_blocks: int):
        self.kv_blocks, self.refs, self.lru, self.held, self.evictions = kv_blocks, {}, [], {}, 0

    def trim(self, free: int) -> None:
        over = len(self.lru) - max(free, 0) // self.kv_blocks
        for _ in range(max(over, 0)):
            del self.refs[self.lru.pop(0)]
            self.evictions += 1

    def acquire(self, rid: int, chain: list[int]) -> None:
        self.release(rid)
        for h in chain:
            if self.refs.get(h) == 0:
                self.lru.remove(h)
            self.refs[h] = self.refs.get(h, 0) + 1
        self.held[rid] = chain

    def release(self, rid: int) -> None:
        for h in reversed(self.held.pop(rid, [])):
            self.refs[h] -= 1
            if self.refs[h] == 0:
                self.lru.append(h)


@pytest.mark.parametrize("repeats", [False, True])
def test_pool_matches_the_one_hash_at_a_time_rules(repeats):
    """Random admissions, prompt completions (`extend`: the chain grows), finishes, preemptions and
    trims over shared and private hashes, with and without a hash repeated within a chain: counts,
    LRU order, holdings and evictions equal the reference's after every step."""
    rng = np.random.default_rng(7)
    pool, ref = PrefixPool(16, 2), LoopPool(2)
    chains: dict[int, list[int]] = {}
    for step in range(3000):
        rid = int(rng.integers(40))
        op = rng.integers(4)
        if op == 0 or rid not in chains:
            own = [1000 * (rid + 1) + j for j in range(int(rng.integers(1, 9)))]     # (rid's own blocks)
            full = [int(h) for h in rng.integers(0, 30, 3)] + own
            if repeats and rng.random() < 0.3:
                full.append(full[0])
            chains[rid] = full
            k = int(rng.integers(0, len(full) + 1))
            pool.acquire(rid, full[:k])
            ref.acquire(rid, full[:k])
        elif op == 1:
            pool.extend(rid, chains[rid])
            ref.acquire(rid, chains[rid])
        elif op == 2:
            pool.release(rid)
            ref.release(rid)
            chains.pop(rid)
        else:
            free = int(rng.integers(0, 60))
            pool.trim(free)
            ref.trim(free)
        assert pool.refs == ref.refs and list(pool.lru) == ref.lru and pool.evictions == ref.evictions, step
        assert {r: list(c) for r, c in pool.held.items()} == ref.held, step
