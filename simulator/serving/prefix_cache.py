"""One instance's prefix cache: KV blocks found by the hash of their prefix, reused across
requests, evicted least recently freed first, as vLLM's block pool does.

vLLM v1 (vllm/v1/core/block_pool.py, kv_cache_utils.py): a full block's hash chains its
parent's hash and its tokens, so equal hashes mean equal prefixes; a cached block that no
running request references (ref_cnt 0) stays in the free queue, still findable, until an
allocation pops it from the queue's front and evicts its hash; freed blocks go to the queue's
tail, a request's in reverse order (its last blocks are evicted first); a hit is capped one token
short of the prompt (the last token is always computed, for its logits).

Here a block is a hash unit of `block_tokens` tokens (the workload's: 512 in the Mooncake
trace, the engine's block size for synthetic prefixes), `kv_blocks` of the engine's blocks.
Cached blocks no request holds are free memory; they are evicted, oldest first, only when the
instance's free blocks can no longer hold them all (`trim`, at each lookup): vLLM's order, except
that a never-cached free block is used before a cached one (vLLM pops whichever is at the queue's
front), which differs by at most a request's partial last block each time one is freed.

The counts of a chain without repeated hashes (every synthetic one, a trace's as a rule) are read
and written by C-level maps (`_take`, `release`); a chain that repeats a hash takes the loop,
whose in-order updates the maps would not reproduce.
"""
from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from itertools import compress, islice, repeat
from operator import add, eq, not_, sub
from typing import TYPE_CHECKING

from .prefix_ranges import RangePool

if TYPE_CHECKING:
    from ..workload.prefix import Chains


class PrefixPool:
    """Cached blocks by hash with reference counts, and an LRU queue of the unreferenced ones."""

    __slots__ = ("block_tokens", "kv_blocks", "refs", "lru", "held", "evictions", "chains")

    def __init__(self, block_tokens: int, kv_blocks: int, chains: Chains | None = None):
        """`chains`: the requests' hashes, for the methods taking tokens (`lookup`, `hold`, `grow`)."""
        self.chains = chains
        self.block_tokens = int(block_tokens)
        self.kv_blocks = int(kv_blocks)           # engine blocks per hash unit
        self.refs: dict[int, int] = {}            # hash -> running requests referencing it (0: evictable)
        self.lru: OrderedDict[int, None] = OrderedDict()   # evictable hashes, least recently freed first
        self.held: dict[int, Sequence[int]] = {}  # request id -> the hashes it references
        self.evictions = 0

    def match(self, chain: Sequence[int], limit: int) -> int:
        """How many leading hashes of `chain` (at most `limit`) are cached."""
        refs = self.refs
        n = 0
        for h in chain[:limit]:
            if h not in refs:
                break
            n += 1
        return n

    def lookup(self, rid: int, tokens: int) -> int:
        """`match` of rid's chain of its first `tokens` tokens (prefix_ranges.RangePool's API)."""
        chain = self.chains.chain(rid, tokens)
        return self.match(chain, len(chain))

    def hold(self, rid: int, tokens: int) -> None:
        self.acquire(rid, self.chains.chain(rid, tokens))

    def grow(self, rid: int, tokens: int) -> None:
        self.extend(rid, self.chains.chain(rid, tokens))

    def trim(self, free_kv_blocks: int) -> None:
        """Evict the least recently freed hashes until the free blocks hold the rest."""
        lru = self.lru
        over = len(lru) - max(free_kv_blocks, 0) // self.kv_blocks
        if over > 0:
            gone = list(islice(lru, over))            # the queue's front, oldest first
            deque(map(lru.__delitem__, gone), 0)
            deque(map(self.refs.__delitem__, gone), 0)
            self.evictions += over

    def acquire(self, rid: int, chain: Sequence[int]) -> None:
        """Request `rid` references `chain` (cached hashes are reused, new ones cached); what it
        held before is released first."""
        if rid in self.held:
            self.release(rid)
        self._take(chain)
        self.held[rid] = chain

    def extend(self, rid: int, chain: Sequence[int]) -> None:
        """`acquire(rid, chain)` where what rid holds (if anything) is a prefix of `chain`: only the
        new hashes are taken. Exact: releasing the held prefix and taking it again restores each of
        its hashes' counts and takes none of them out of the LRU queue (a held hash is not in it)."""
        old = self.held.get(rid)
        self._take(chain if old is None else chain[len(old):])
        self.held[rid] = chain

    def _take(self, chain: Sequence[int]) -> None:
        refs, lru = self.refs, self.lru
        if len(set(chain)) == len(chain):
            counts = list(map(refs.get, chain, repeat(0)))       # (absent: 0)
            deque(map(lru.pop, compress(chain, map(not_, counts)), repeat(None)), 0)   # 0: evictable or new
            refs.update(zip(chain, map(add, counts, repeat(1))))
            return
        for h in chain:
            c = refs.get(h)
            if c is None:
                refs[h] = 1
            else:
                if c == 0:
                    del lru[h]
                refs[h] = c + 1

    def release(self, rid: int) -> None:
        """Request `rid` drops its references; hashes no one holds join the LRU queue, its last
        block first (evicted first)."""
        chain = self.held.pop(rid, None)
        if not chain:
            return
        refs, lru = self.refs, self.lru
        if len(set(chain)) == len(chain):
            rev = chain[::-1]
            counts = list(map(sub, map(refs.__getitem__, rev), repeat(1)))
            refs.update(zip(rev, counts))
            lru.update(dict.fromkeys(compress(rev, map(eq, counts, repeat(0)))))
            return
        for h in reversed(chain):
            c = refs[h] - 1
            refs[h] = c
            if c == 0:
                lru[h] = None

    @property
    def cached_blocks(self) -> int:
        return len(self.refs)


RANGES = True      # synthetic chains in runs (off: the hash pool, the reference of tests/test_prefix_ranges.py)


def make_pool(chains: Chains, kv_blocks: int) -> PrefixPool | RangePool:
    """An instance's pool: runs of blocks for synthetic chains (the same pool at a cost per
    request: prefix_ranges.py), hashes for a trace's."""
    if RANGES and chains.synthetic:
        return RangePool(chains.block_tokens, kv_blocks, chains.shared_blocks, chains.turns)
    return PrefixPool(chains.block_tokens, kv_blocks, chains)
