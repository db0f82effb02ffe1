"""Uneventful speculative decode rounds in compiled code (numba): the simulator's inner loop.

Most of a long simulation's iterations are decode rounds in which nothing but token counters
changes: no prefill chunk, no waiting request that fits, the KV blocks within capacity, and the
round ending strictly before the next SimPy event (so it runs inline, `Replica.run`) or the
replica's next arrival (run_ahead.py), or, where no trace is kept, starting before it (`cross`).
`decode_rounds` runs a stretch of such rounds: per round it prices the target pass and the
drafter's K steps, takes the accept lengths from the block sampler's draws (K = 0: one token
each), advances the counters and writes the iteration-log row, with the same operations in the
same order as `Replica._schedule` + `Replica._complete` + `CostModel.time_s` / `steps_time_s`, so
the trajectory is the Python path's bit for bit (tests/test_decode_kernel.py). It stops before the
first round that would need anything else, which the replica then runs in Python, and after a
round in which a sequence reaches its output length (the replica retires it and calls again).

Costs: a pass's time is simulator/costs/pass_time.py's `pass_time_s`, the one function CostModel.time_s
calls too, compiled here unchanged (numba `register_jitable`), as are the pair count
(`pass_shape.causal_pairs`) and the drafter's K steps (`pass_time.steps_time_s`). A pass's
(tokens, logits) terms come from the cost model's own `CostModel.terms_row` (`RoundCosts`: one row
per pass shape a stretch can meet), its constants from `CostModel.kernel_constants` as float64
rows (pass_time.constants_row), which the rounds turn back into PassConstants (`from_row`) and
read by name. What holds for a run is a `KernelPlan` (`plan`), what holds for n decode sequences
a `RoundCosts` (`KernelPlan.round_costs`); the rest is the replica's counters, passed as numbers.
numba's on-disk cache is keyed on this file's stamp and on the bytecode and closure of the
function it compiles: that function closes over a hash of pass_time.py and pass_shape.py
(`_source_key`, `_keyed`), so the cache never serves code older than any of the three sources.

numba is optional: `kernel()` returns None without it (or with SPECSIGHT_KERNEL=0 in the
environment), and the replica runs every round in Python. The compiled code is cached on disk
(numba `cache=True`, next to this file), so only the first run after an install compiles it.
"""
from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..costs import pass_shape, pass_time
from ..costs.pass_shape import causal_pairs
from ..costs.pass_time import from_row, pass_time_s, steps_time_s
from .decode_batch import BIG  # more tokens than any sequence has left

if TYPE_CHECKING:
    from types import ModuleType

    from ..costs.cost_model import CostModel

# iteration-log row (metrics.ITER_COLUMNS order) and the number of them a call may write
ROW_COLUMNS = 15
MAX_ROUNDS = 512
TERMS_COLUMNS = len(pass_time.PassTerms._fields)   # terms rows: weights, head, rest, all-reduce
# RoundCosts.constants' rows
TARGET, DRAFT = 0, 1


# The rounds take RunInputs and RoundInputs as plain tuples (numba passes a plain tuple of numbers
# at the cost of as many arguments; a NamedTuple or a numpy record costs microseconds per call)
# and read them by name as RunInputs(*run), RoundInputs(*rnd).
class RunInputs(NamedTuple):
    """What a run fixes (KernelPlan.run)."""
    draft_kind: int             # 0 fixed costs (k x fixed_draft_s, target fixed_target_s), 1 the roofline
    first_is_b: bool            # the first draft step takes one token per sequence (self_spec)
    branches: int               # the later draft steps' tokens per sequence
    fixed_target_s: float
    fixed_draft_s: float
    block_size: int
    capacity: int               # the replica's KV blocks
    index: int                  # the replica's index (iteration-log rows)


class RoundInputs(NamedTuple):
    """What n decode sequences at K = k fix (RoundCosts.round)."""
    n: int
    k: int
    width: int                  # verify positions per sequence
    overhead_s: float           # the iteration's fixed seconds


class RoundCosts(NamedTuple):
    """The compiled rounds' costs for n decode sequences at K = k (`round_costs`)."""
    round: tuple               # RoundInputs, as a plain tuple
    constants: np.ndarray      # [2, 14] constants_row: the target's (TARGET) and the drafter's (DRAFT) PassConstants
    target_terms: np.ndarray   # [1, 4] the target pass's PassTerms
    draft_terms: np.ndarray    # [rows, 4]: row 0 a later draft step's (n x branches tokens); row 1 + f - n
    #                            a first step ingesting f = n .. n (k + 1) tokens, NaN until built (first_row)
    draft_built: bytearray     # [rows] 1 where draft_terms' row is built (what the replica reads: a byte,
    #                            not a numpy element)


@dataclass(frozen=True)
class KernelPlan:
    """What the compiled rounds need that holds for a whole run (`plan` builds it)."""
    fn: Callable                           # the compiled decode_rounds
    run: tuple                             # RunInputs, as a plain tuple
    target: object | None                  # the target's CostModel (roofline), or None (fixed costs)
    draft: object | None                   # the drafter's CostModel (chained steps), or None
    first_is_b: bool
    branches: int
    roofline: bool                         # the roofline's costs (target is not None), not fixed ones
    out: np.ndarray = field(default_factory=lambda: np.zeros((MAX_ROUNDS, ROW_COLUMNS)))   # log rows
    no_em: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))          # K = 0: no draws
    costs: dict = field(default_factory=dict)                                              # n -> RoundCosts

    def round_costs(self, n: int, k: int, width: int, overhead_s: float) -> RoundCosts:
        """RoundCosts for n decode sequences at K = k (verify width `width`), from the cost models' own
        terms_row with the Python ints the replica passes them and their kernel_constants for n
        sequences; cached in costs by n (the replica's K for n is fixed where the rounds run)."""
        rnd = tuple(RoundInputs(int(n), int(k), int(width), float(overhead_s)))
        if not self.roofline:
            return RoundCosts(rnd, NO_CONSTANTS, NO_TERMS, NO_TERMS, NO_BUILT)
        consts = NO_CONSTANTS.copy()
        T = n * width
        tterms = self.target.terms_row(T, T)[None, :]
        consts[TARGET] = self.target.kernel_constants(n)
        if not k:
            return RoundCosts(rnd, consts, tterms, NO_TERMS, NO_BUILT)
        nb = n * self.branches
        rows = 2 if self.first_is_b else n * k + 2
        dterms = np.full((rows, TERMS_COLUMNS), np.nan)
        dterms[0] = self.draft.terms_row(nb, nb)
        consts[DRAFT] = self.draft.kernel_constants(n)
        built = bytearray(rows)
        built[0] = 1
        return RoundCosts(rnd, consts, tterms, dterms, built)

    def first_row(self, rc: RoundCosts, r: int, n: int) -> None:
        """Build row r (0 < r < rows) of rc.draft_terms: a first draft step ingesting r - 1 + n tokens."""
        rc.draft_terms[r] = self.draft.terms_row(r - 1 + n, n)
        rc.draft_built[r] = 1

    def catchup_terms(self, dterms: np.ndarray, first: int, n: int) -> np.ndarray:
        """Terms rows for a first draft step ingesting `first` tokens, outside dterms' range: row 0
        dterms' later step, row 1 that first step (the rounds read them with first_x = first)."""
        return np.array([dterms[0], self.draft.terms_row(first, n)])


NO_TERMS = np.zeros((1, TERMS_COLUMNS))
NO_BUILT = bytearray(b"\x01")
NO_CONSTANTS = np.zeros((2, len(pass_time.PassConstants._fields)))


def plan(fn: Callable, *, target: CostModel | None = None, draft: CostModel | None = None,
         fixed_target_s: float = 0.0, fixed_draft_s: float = 0.0, first_is_b: bool = False, branches: int = 1,
         block_size: int, capacity: int, index: int) -> KernelPlan:
    """A run's KernelPlan: the roofline target (and, speculating, the drafter's chained-steps cost
    model), or fixed step costs (target None); the replica's block size, KV capacity and index."""
    run = tuple(RunInputs(1 if target is not None else 0, bool(first_is_b), int(branches), float(fixed_target_s),
                          float(fixed_draft_s), int(block_size), int(capacity), int(index)))
    return KernelPlan(fn, run, target, draft, bool(first_is_b), int(branches), target is not None)


def row(terms: np.ndarray, r: int) -> tuple[float, float, float, float]:
    """Row r of a terms table as a 4-tuple (PassTerms' order)."""
    return terms[r, 0], terms[r, 1], terms[r, 2], terms[r, 3]


def decode_rounds(kvc: np.ndarray, lim: np.ndarray, em: np.ndarray, out: np.ndarray, pend: np.ndarray,
                  run: tuple, rnd: tuple, consts: np.ndarray, tterms: np.ndarray, dterms: np.ndarray,
                  xterms: np.ndarray, first_x: int, shift: int, sum_ctx: int, pend_sum: int, rem_lb: int,
                  blocks: int, pos: int, rows: int, now: float, start: float, peek_s: float,
                  any_iteration: bool, track_pend: bool,
                  cross: bool) -> tuple[int, float, int, int, int, int, int, int, bool]:
    """Run uneventful rounds of n decode sequences at K = k (verify width w) from clock `now`.

    kvc, lim: the replica's d_kvc and d_lim (kvc[:n] advanced in place); em: the block sampler's
    tokens emitted per row, rows pos.. unused; out: [MAX_ROUNDS, ROW_COLUMNS] log rows; pend: [n]
    scratch for the last round's tokens emitted, capped at what each sequence had left.
    run: KernelPlan.run (RunInputs); rnd, consts, tterms, dterms: RoundCosts' round, constants,
    target_terms and draft_terms for n (dterms[0]: later draft steps' terms; dterms[1 + f - n]:
    step 0 ingesting f tokens, NaN where not built yet); xterms[1]: step 0 ingesting first_x
    tokens, where first_x lies outside that table (-1: none).
    Stops before a round that would: run out of sampler rows or log rows, exceed the KV capacity,
    need a catch-up row not built yet,
    end at or after peek_s (or on a clock that start + (t - start) does not reproduce), or need an
    exact check of who finishes where closed loop does not inline one; and after a round in which
    a sequence reaches its output length (its tokens emitted capped at what was left, in pend):
    the replica then retires it. cross: a round that ends at or after peek_s runs too, as the
    last, and none starts at or after it (no trace kept: run_ahead.py, Replica._wait_crossed).
    Returns (rounds run, clock, sum_ctx, pend_sum, rem_lb, blocks, pos, row of the last em,
    whether the last round finished a sequence)."""
    rp, rd = RunInputs(*run), RoundInputs(*rnd)
    draft_kind, first_is_b, branches = rp.draft_kind, rp.first_is_b, rp.branches
    bs, cap, index = rp.block_size, rp.capacity, rp.index
    n, k, w, overhead_s = rd.n, rd.k, rd.width, rd.overhead_s
    tc, dc = from_row(consts[TARGET]), from_row(consts[DRAFT])
    m = 0
    last = -1
    T = n * w
    nb_rows = dterms.shape[0]
    while m < out.shape[0] and (k == 0 or pos + n <= rows) and blocks <= cap and not (cross and now >= peek_s):
        exact = rem_lb <= k + 1
        if exact and not any_iteration:
            break
        sum_c = sum_ctx - n
        if draft_kind == 0:
            target = rp.fixed_target_s
            draft = k * rp.fixed_draft_s
        else:
            target = pass_time_s(tc, row(tterms, 0), T, sum_c, causal_pairs(T, sum_c, n))
            draft = 0.0
        if draft_kind and k:
            first = n if first_is_b else pend_sum
            if first == first_x:
                draft = steps_time_s(dc, row(xterms, 1), row(xterms, 0), first, sum_c, n, k, n * branches)
            else:
                r1 = 1 + first - n
                if r1 < 1 or r1 >= nb_rows or dterms[r1, 0] != dterms[r1, 0]:   # (NaN: not built)
                    break
                draft = steps_time_s(dc, row(dterms, r1), row(dterms, 0), first, sum_c, n, k, n * branches)
        dt = draft + target + overhead_s
        t = now + dt
        if (t >= peek_s and not cross) or start + (t - start) != t:
            break
        es = nblk = 0
        low = BIG                       # the fewest tokens any sequence has left after this round
        for i in range(n):
            e = em[pos + i] if k else 1             # plain decode (K = 0): one token each
            left = lim[i] - (kvc[i] + e) + shift    # (only an exact round can make it <= 0)
            if left < 0:                # capped at what was left (Replica._complete)
                e += left
            if left < low:
                low = left
            pend[i] = e
            x = kvc[i] + e
            kvc[i] = x
            es += e
            nblk += x // bs
        finished = low <= 0             # someone reached its output length: the replica retires it
        if exact:
            rem_lb = 0 if finished else low
        else:
            rem_lb -= k + 1
        r = out[m]          # metrics.ITER_COLUMNS; prefill tokens and seconds, first tokens, preemptions: 0
        r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7] = index, now, t, n, n, 0, k, es
        r[8], r[9], r[10], r[11], r[12], r[13], r[14] = 0, draft, target, 0.0, overhead_s, blocks, 0
        blocks = nblk
        sum_ctx += es
        if k:
            if track_pend:
                pend_sum = es
            last = pos
            pos += n
        now = t
        m += 1
        if finished or t >= peek_s:     # (t >= peek_s: cross, the stretch's last round)
            return m, now, sum_ctx, pend_sum, rem_lb, blocks, pos, last, finished
    return m, now, sum_ctx, pend_sum, rem_lb, blocks, pos, last, False


@functools.cache
def kernel() -> Callable | None:
    """decode_rounds compiled with numba and loaded (the first call in a process imports numba
    and loads the on-disk cache, about 0.5 s, or compiles, a few seconds after an install), or
    None without numba, with SPECSIGHT_KERNEL=0 in the environment, or when numba fails (a
    warning says why; every round then runs in Python, with the same results)."""
    return _compile()


def _compile() -> Callable | None:
    if os.environ.get("SPECSIGHT_KERNEL", "1") == "0":
        return None
    try:
        import numba
    except ImportError:
        return None
    try:
        return _jit(numba)
    except Exception as e:            # a broken numba or LLVM install, an unusable cache: run in Python
        import warnings
        warnings.warn(f"specsight: the compiled decode rounds are off ({type(e).__name__}: {e}); "
                      "the simulator runs them in Python, with the same results, more slowly", stacklevel=1)
        return None


def _source_key() -> str:
    """A hash of the sources the rounds compile from outside this file."""
    h = hashlib.sha256()
    for mod in (pass_time, pass_shape):
        h.update(Path(mod.__file__).read_bytes())
    return h.hexdigest()


def _keyed(source_key: str) -> Callable:
    """decode_rounds as a closure over source_key, whose value numba's cache index keys on."""
    def decode_rounds_keyed(kvc: np.ndarray, lim: np.ndarray, em: np.ndarray, out: np.ndarray, pend: np.ndarray,
                            run: tuple, rnd: tuple, consts: np.ndarray, tterms: np.ndarray, dterms: np.ndarray,
                            xterms: np.ndarray, first_x: int, shift: int, sum_ctx: int, pend_sum: int, rem_lb: int,
                            blocks: int, pos: int, rows: int, now: float, start: float, peek_s: float,
                            any_iteration: bool, track_pend: bool,
                            cross: bool) -> tuple[int, float, int, int, int, int, int, int, bool]:
        source_key                # noqa: B018 (the closure variable)
        return decode_rounds(kvc, lim, em, out, pend, run, rnd, consts, tterms, dterms, xterms, first_x,
                             shift, sum_ctx, pend_sum, rem_lb, blocks, pos, rows, now, start, peek_s,
                             any_iteration, track_pend, cross)
    return decode_rounds_keyed


def _jit(numba: ModuleType) -> Callable:
    from numba.extending import register_jitable
    for f in (pass_time_s, steps_time_s, from_row, causal_pairs, row, decode_rounds):
        register_jitable(f)
    fn = numba.njit(cache=True, nogil=True)(_keyed(_source_key()))
    i64, f64 = np.zeros(1, dtype=np.int64), np.zeros((1, ROW_COLUMNS))
    run, rnd = tuple(RunInputs(0, False, 1, 0.0, 0.0, 16, 16, 0)), tuple(RoundInputs(1, 1, 2, 0.0))
    fn(i64, i64, i64, f64, i64, run, rnd, NO_CONSTANTS, NO_TERMS, NO_TERMS, NO_TERMS, -1, 16, 1, 1,  # load it now:
       1, 1, 0, 0, 0.0, 0.0, 0.0, True, True, False)                                            # runs no round
    return fn
