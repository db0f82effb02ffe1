"""The prefix pool of synthetic chains (workload.prefix, or none shared) kept as runs of blocks:
the same cache, the same LRU order and evictions as prefix_cache.PrefixPool, block by block, at a
cost per request rather than per block.

A synthetic chain (simulator/workload/prefix.py) names a block by its position: position p < s (the
system prompt's s blocks) hashes to p for every request, p >= s to (c + 1) * BASE + p for
conversation c. So the blocks form lines: the shared line (positions 0..s-1) and one line per
conversation (positions s..), and every request holds a prefix of its chain, i.e. a prefix of
the shared line and, past s, a prefix of its conversation's line (acquire, extend and release
take and drop whole chains). Hence, on each line:
  - a position's reference count is the number of holders whose prefix covers it: it does not
    increase along the line, so the held positions are [start, m), m the longest prefix held;
  - the cached positions are [start, k): a block is cached only by a chain that covers the
    positions before it (cached, or cached by it), and eviction takes a line's highest first;
  - the evictable ones, [m, k), entered the LRU queue in runs, one per release that shortened
    m (the hash pool pushes a released chain's blocks last first), each run's positions
    contiguous and every run older than the runs below it: the queue holds them in decreasing
    position order, so evicting from the queue's front takes a run's top and a take (the lowest
    positions, [m, ...)) takes from the line's newest runs.
A run [lo, hi) of a line stands for the hashes of positions hi - 1 down to lo, consecutive in the
queue. `hashes` and `lru_hashes` expand the pool for the test against the hash pool
(tests/test_prefix_ranges.py).
"""
from __future__ import annotations

from collections import OrderedDict

from ..workload.prefix import CONVERSATION_BASE

SHARED = -1                          # the shared line's key (conversations are 0, 1, ...)


class _Line:
    """One line's cached extent k, longest held prefix m, holders' prefixes and LRU runs."""
    __slots__ = ("k", "m", "holders", "runs")

    def __init__(self, start: int):
        self.k = self.m = start
        self.holders: list[int] = []     # each holder's prefix end (its positions < it)
        self.runs: list[list[int]] = []  # [line, lo, hi, key] oldest first (highest positions first)


class RangePool:
    """PrefixPool's rules over synthetic chains (module docstring); methods take a request's first
    `tokens` tokens where PrefixPool takes the chain of their full blocks."""

    def __init__(self, block_tokens: int, kv_blocks: int, shared_blocks: int, turns: int):
        self.block_tokens = int(block_tokens)
        self.kv_blocks = int(kv_blocks)
        self.s = int(shared_blocks)
        self.turns = int(turns)
        self.shared = _Line(0)
        self.lines: dict[int, _Line] = {}           # conversation -> its line (while it caches or holds)
        self.lru: OrderedDict[int, list[int]] = OrderedDict()   # run key -> run, oldest first
        self.queued = 0                              # evictable blocks (in the LRU runs)
        self.cached_blocks = 0
        self.held: dict[int, int] = {}               # request id -> blocks of its chain it holds
        self.evictions = 0
        self._key = 0

    def _line(self, c: int) -> _Line:
        if c == SHARED:
            return self.shared
        line = self.lines.get(c)
        if line is None:
            line = self.lines[c] = _Line(self.s)
        return line

    def lookup(self, rid: int, tokens: int) -> int:
        """How many leading blocks of rid's chain of `tokens` tokens are cached."""
        nb = tokens // self.block_tokens
        s = self.s
        k = self.shared.k
        if nb <= s:
            return k if k < nb else nb
        if k < s:
            return k
        line = self.lines.get(rid // self.turns)
        if line is None:
            return s
        k = line.k
        return k if k < nb else nb

    def trim(self, free_kv_blocks: int) -> None:
        """Evict the least recently freed blocks until the free blocks hold the rest."""
        over = self.queued - max(free_kv_blocks, 0) // self.kv_blocks
        if over <= 0:
            return
        self.queued -= over
        self.cached_blocks -= over
        self.evictions += over
        lru = self.lru
        while over:
            run = next(iter(lru.values()))
            c, lo, hi = run[0], run[1], run[2]
            line = self.shared if c == SHARED else self.lines[c]
            n = min(hi - lo, over)
            over -= n
            run[2] = line.k = hi - n
            if hi - n == lo:
                del lru[run[3]]
                line.runs.pop(0)
                if c != SHARED and not line.holders and line.k == self.s:
                    del self.lines[c]

    def hold(self, rid: int, tokens: int) -> None:
        """PrefixPool.acquire of rid's chain of `tokens` tokens."""
        if rid in self.held:
            self.release(rid)
        nb = tokens // self.block_tokens
        self._take(rid, 0, nb, True)
        self.held[rid] = nb

    def grow(self, rid: int, tokens: int) -> None:
        """PrefixPool.extend: what rid holds (if anything) is a prefix of its chain of `tokens` tokens."""
        nb = tokens // self.block_tokens
        old = self.held.get(rid)
        if old is None:
            self._take(rid, 0, nb, True)
        elif nb < old:
            raise ValueError(f"request {rid} holds {old} blocks; extend to {nb} would shrink it (a bug)")
        else:
            self._take(rid, old, nb, False)
        self.held[rid] = nb

    def _take(self, rid: int, o: int, n: int, new: bool) -> None:
        """rid's prefix grows from o blocks to n (new: it held none)."""
        s = self.s
        a, b = min(o, s), min(n, s)
        if s and (new or a < b):
            self._grow_line(self.shared, SHARED, a, b, new)
        if n > s:
            c = rid // self.turns
            self._grow_line(self._line(c), c, max(o, s), n, new or o <= s)

    def _grow_line(self, line: _Line, c: int, a: int, b: int, new: bool) -> None:
        """A holder's prefix on `line` from a to b (new: it was not a holder of it)."""
        if new:
            line.holders.append(b)
        else:
            line.holders[line.holders.index(a)] = b
        m, k = line.m, line.k
        lo, hi = max(a, m), min(b, k)
        if lo < hi:                                  # evictable blocks taken back: the newest runs
            self.queued -= hi - lo
            runs = line.runs
            while lo < hi:
                run = runs[-1]
                if run[2] <= hi:
                    del self.lru[run[3]]
                    runs.pop()
                    lo = run[2]
                else:
                    run[1] = lo = hi
        if b > k:
            self.cached_blocks += b - k
            line.k = b
        if b > m:
            line.m = b

    def release(self, rid: int) -> None:
        """Request rid drops its references; blocks no one holds join the LRU queue, its last first."""
        nb = self.held.pop(rid, None)
        if nb is None:
            return
        s = self.s
        if nb > s:
            c = rid // self.turns
            self._drop(self.lines[c], c, nb)
        if s:
            self._drop(self.shared, SHARED, min(nb, s))

    def _drop(self, line: _Line, c: int, e: int) -> None:
        holders = line.holders
        holders.remove(e)
        m = line.m
        m2 = max(holders) if holders else (0 if c == SHARED else self.s)
        if m2 < m:
            line.m = m2
            run = [c, m2, m, self._key]
            self.lru[self._key] = run
            self._key += 1
            line.runs.append(run)
            self.queued += m - m2

    # ---- the pool as hashes (for the test against PrefixPool)
    def _hash(self, c: int, p: int) -> int:
        return p if c == SHARED else (c + 1) * CONVERSATION_BASE + p

    def hashes(self) -> set[int]:
        lines = [(SHARED, self.shared, 0)] + [(c, ln, self.s) for c, ln in self.lines.items()]
        return {self._hash(c, p) for c, ln, start in lines for p in range(start, ln.k)}

    def lru_hashes(self) -> list[int]:
        return [self._hash(r[0], p) for r in self.lru.values() for p in range(r[2] - 1, r[1] - 1, -1)]
