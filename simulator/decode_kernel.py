"""Uneventful speculative decode rounds in compiled code (numba): the simulator's inner loop.

Most of a long simulation's iterations are decode rounds in which nothing but token counters
changes: no prefill chunk, no waiting request that fits, the KV blocks within capacity, and the
round ending strictly before the next SimPy event (so it runs inline, `Replica.run`).
`decode_rounds` runs a stretch of such rounds: per round it prices the target pass and the
drafter's K steps, takes the accept lengths from the block sampler's draws (K = 0: one token
each), advances the counters and writes the iteration-log row, with the same operations in the
same order as `Replica._schedule` + `Replica._complete` + `CostModel.time_s` / `steps_time_s`, so
the trajectory is the Python path's bit for bit (tests/test_decode_kernel.py). It stops before the
first round that would need anything else, which the replica then runs in Python, and after a
round in which a sequence reaches its output length (the replica retires it and calls again).

Costs: a pass's time is time_s's sum, t = weights + roof(attention) + head + rest [+ all-reduce]
+ launch, where (weights, head, rest, all-reduce) depend only on the pass's tokens and logits.
The replica computes those four with the cost model's own `CostModel.terms_row` (`terms`: one row per
pass shape a stretch can meet) and the kernel adds the attention roof, the only term that moves
with the context. NOTE: `pass_time_s` is therefore time_s's last lines again, compiled; the test
holds the two equal bit for bit on random shapes (soft and sharp roofline, one-token rates, TP,
MoE). It stays in this file so that numba's on-disk cache, which is keyed on this file alone,
can never serve code older than the source.

numba is optional: `kernel()` returns None without it (or with SPECSIGHT_KERNEL=0 in the
environment), and the replica runs every round in Python. The compiled code is cached on disk
(numba `cache=True`, next to this file), so only the first run after an install compiles it.
"""
from __future__ import annotations

import functools
import os

import numpy as np

from .replica import BIG      # more tokens than any sequence has left

# iteration-log row (metrics.ITER_COLUMNS order) and the number of them a call may write
ROW_COLUMNS = 15
MAX_ROUNDS = 512
# hot[]: CostModel._hot (p, 1/p, peak FLOP/s, KV-read bandwidth B/s, attention FLOPs per pair, KV bytes per
# token, launch s, all-reduce count, all-reduce fixed s), then 1.0 for a sharp (max) roofline
# (CostModel.kernel_constants builds it)
HOT_SIZE = 10


def pass_time_s(hot, terms, row: int, tokens, sum_context, pairs) -> float:
    """One pass: CostModel.time_s with its (tokens, logits) terms from terms[row], same order."""
    weights, head, rest, ar = terms[row, 0], terms[row, 1], terms[row, 2], terms[row, 3]
    p, ip, F, W, a, kv, launch, ar_on, ar_fixed, sharp = (hot[0], hot[1], hot[2], hot[3], hot[4], hot[5],
                                                          hot[6], hot[7], hot[8], hot[9])
    if sharp:
        t = weights + max(a * pairs / F, kv * (sum_context + 2 * tokens) / W)
    else:
        t = weights + ((a * pairs / F) ** p + (kv * (sum_context + 2 * tokens) / W) ** p) ** ip
    t = t + head
    t = t + rest
    if ar_on:
        t = t + ar + ar_fixed
    return t + launch


def draft_steps_s(hot, terms, first_row: int, first, ctx, B, k, nb) -> float:
    """CostModel.steps_time_s: step 0 ingests `first` tokens (terms[first_row]), steps 1..k-1 take
    nb tokens each (terms[0]) over a cache that grows by B tokens a step."""
    causal = nb * (nb / B + 1) / 2
    t = 0.0
    for j in range(k):
        if j:
            c = ctx + B * j
            t = t + pass_time_s(hot, terms, 0, nb, c, nb * c / B + causal)
        else:
            t = t + pass_time_s(hot, terms, first_row, first, ctx, first * ctx / B + first * (first / B + 1) / 2)
    return t


def decode_rounds(kvc, lim, em, out, pend, thot, tterms, dhot, dterms, xterms, first_x,
                  n, k, w, bs, cap, shift, sum_ctx, pend_sum, rem_lb, blocks, pos, rows,
                  now, start, peek_s, any_iteration, track_pend, draft_kind, first_is_b,
                  branches, fixed_target_s, fixed_draft_s, overhead_s, index):
    """Run uneventful rounds of n decode sequences at K = k (verify width w) from clock `now`.

    kvc, lim: the replica's d_kvc and d_lim (kvc[:n] advanced in place); em: the block sampler's
    tokens emitted per row, rows pos.. unused; out: [MAX_ROUNDS, ROW_COLUMNS] log rows; pend: [n]
    scratch for the last round's tokens emitted, capped at what each sequence had left.
    draft_kind: 0 fixed costs (k x fixed_draft_s, target fixed_target_s), 1 chained draft steps
    (dterms[0]: later steps' terms, n x branches tokens; dterms[1 + f - n]: step 0
    ingesting f tokens, NaN where not built yet; xterms[1]: step 0 ingesting first_x tokens, where
    first_x lies outside that table (-1: none); first_is_b: step 0 takes one token per sequence,
    self_spec).
    Stops before a round that would: run out of sampler rows or log rows, exceed the KV capacity,
    need a catch-up row not built yet,
    end at or after peek_s (or on a clock that start + (t - start) does not reproduce), or need an
    exact check of who finishes where closed loop does not inline one; and after a round in which
    a sequence reaches its output length (its tokens emitted capped at what was left, in pend):
    the replica then retires it. Returns (rounds run, clock, sum_ctx, pend_sum, rem_lb, blocks,
    pos, row of the last em, whether the last round finished a sequence)."""
    m = 0
    last = -1
    T = n * w
    pairs_fixed = n * (w * (w + 1) // 2)
    nb_rows = dterms.shape[0]
    while m < out.shape[0] and (k == 0 or pos + n <= rows) and blocks <= cap:
        exact = rem_lb <= k + 1
        if exact and not any_iteration:
            break
        sum_c = sum_ctx - n
        if draft_kind == 0:
            target = fixed_target_s
            draft = k * fixed_draft_s
        else:
            target = pass_time_s(thot, tterms, 0, T, sum_c, w * sum_c + pairs_fixed)
            draft = 0.0
        if draft_kind and k:
            first = n if first_is_b else pend_sum
            if first == first_x:
                draft = draft_steps_s(dhot, xterms, 1, first, sum_c, n, k, n * branches)
            else:
                row = 1 + first - n
                if row < 1 or row >= nb_rows or dterms[row, 0] != dterms[row, 0]:   # (NaN: not built)
                    break
                draft = draft_steps_s(dhot, dterms, row, first, sum_c, n, k, n * branches)
        dt = draft + target + overhead_s
        t = now + dt
        if t >= peek_s or start + (t - start) != t:
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
        if finished:
            return m, now, sum_ctx, pend_sum, rem_lb, blocks, pos, last, True
    return m, now, sum_ctx, pend_sum, rem_lb, blocks, pos, last, False


@functools.cache
def kernel():
    """decode_rounds compiled with numba and loaded (the first call in a process imports numba
    and loads the on-disk cache, about 0.5 s, or compiles, a few seconds after an install), or
    None without numba, with SPECSIGHT_KERNEL=0 in the environment, or when numba fails (a
    warning says why; every round then runs in Python, with the same results)."""
    return _compile()


def _compile():
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
                      "the simulator runs them in Python, with the same results, more slowly")
        return None


def _jit(numba):
    global pass_time_s, draft_steps_s
    jit = numba.njit(cache=True, nogil=True)
    pass_time_s = jit(pass_time_s)          # the callees first: numba binds globals when it compiles
    draft_steps_s = jit(draft_steps_s)
    fn = jit(decode_rounds)
    i64, f64 = np.zeros(1, dtype=np.int64), np.zeros((1, ROW_COLUMNS))
    hot, terms = np.zeros(HOT_SIZE), np.zeros((1, 4))
    fn(i64, i64, i64, f64, i64, hot, terms, hot, terms, terms, -1, 1, 1, 2, 16, 0, 16, 1, 1, 1, 1,  # load it now:
       0, 0, 0.0, 0.0, 0.0, True, True, 0, False, 1, 0.0, 0.0, 0.0, 0)                          # runs no round
    return fn
