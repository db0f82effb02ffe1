"""The time of one forward pass from its shape, written once for the Python path
(`CostModel.time_s`) and the compiled decode rounds (simulator/serving/decode_kernel.py).

A pass's time is

    t = weights + roof(attention) + head + rest [+ all-reduce] + launch

(simulator/costs/cost_model.py's module docstring states every term). (weights, head, rest, all-reduce),
the pass's `PassTerms`, depend only on its tokens and logits: `CostModel` computes them (and caches
them for the simulator's scalar calls); attention moves with the context. `pass_time_s` adds them
in that order from the cost model's `PassConstants`. It is a plain function of numbers: on floats
or numpy arrays (broadcast) in Python, and compiled by numba, unchanged, into the decode rounds,
which take the constants as a float64 row (`constants_row`: numba passes a float array in a
fraction of the time a NamedTuple or a numpy record costs it, microseconds per call) and turn it
into pass_time_s's form with `from_row` (`timing_constants`: PassConstants' fields in order, the
sliding layers' four as one tuple). One source, same
operations in the same order: the two paths agree bit for bit.

What comes next, and where it goes:
- A round made of several passes with their own shapes (an engine's round anatomy: a draft pass
  over B (1 + K) tokens, a verify pass, a draft-extend pass): each pass is one pass_time_s call
  with its own constants (the model that runs it) and terms (its tokens and logits), and the
  round's time is their sum in the engine's order. `steps_time_s` (a drafter's K steps, which
  CostModel.steps_time_s and the compiled rounds both call) is such a sequence already; an
  engine's anatomy is another function beside it, written once here and compiled the same way.

Attention by layer type (simulator/models/layer_types.py). The full-attention layers are one group: its
FLOPs per pair and KV bytes per token (attn_flops_per_pair, kv_bytes_per_token) over the pass's
pairs and cached tokens. The sliding layers (window W) are a second group with its own roof, added
right after the first (skipped when window is 0: a model without sliding layers adds nothing, bit
for bit, and its `timing_constants` carry no sliding group, so the Python path neither unpacks nor
prices one): from the pass's sums it prices

    pairs  min(pairs, T W)                    each query sees at most W keys
    keys   min(sum_context, B (W - 1)) + 2 T  each sequence's queries read at most W - 1 cached keys

with B = seqs, the sequences the constants are for (CostModel.pass_constants(num_seqs)). Both are
exact for a uniform batch whose queries all see the whole window or none does (c + 1 >= W, or
c + n <= W) and an upper bound otherwise (a ragged batch's sum over min(c_i, W - 1) is at most
min(sum c_i, B (W - 1)); a pass with prefill chunks passes its attention rows as num_seqs, more
than its sequences, so its cap is looser; never above full attention). Linear-attention layers
(a constant state per sequence) depend only on the pass's tokens and logits: CostModel prices
them in the pass's terms (with the weights), not here.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .pass_shape import causal_pairs


class PassConstants(NamedTuple):
    """A cost model's constants of the pass time (CostModel.constants), per tensor-parallel shard."""
    roofline_p: float           # p of the soft roofline (inf: the sharp one, max())
    inv_p: float                # 1 / p (0.0 for the sharp roofline)
    peak_flops_s: float         # achieved FLOP/s (peak x efficiency.compute)
    kv_bytes_s: float           # attention's KV-read bandwidth, B/s (/ the wave factor: CostModel.pass_constants)
    attn_flops_per_pair: float  # attention FLOPs per query-key pair, the full-attention layers together
    kv_bytes_per_token: float   # KV bytes read per cached token, the full-attention layers together
    launch_s: float             # kernel launches of one pass
    allreduce_count: float      # all-reduces per pass (0: no tensor parallelism)
    allreduce_fixed_s: float    # their fixed (latency) seconds
    sharp: bool                 # the sharp roofline (max) rather than the soft one
    win_flops_per_pair: float   # the sliding layers' attention FLOPs per query-key pair, all of them
    win_kv_bytes_per_token: float  # the sliding layers' KV bytes per cached token read, all of them
    window: float               # their window W in keys (0: no sliding layer, the group is skipped)
    seqs: float                 # B, the sequences of the pass these constants are for (sliding layers only)


class PassTerms(NamedTuple):
    """A pass's terms that depend only on its tokens and logits (CostModel.terms_row's columns)."""
    weights: float              # linear layers + routed experts (their rooflines, summed)
    head: float                 # LM head
    rest: float                 # sampling + elementwise (+ host sampling)
    allreduce: float            # all-reduce's per-token part


def constants_row(c: PassConstants) -> np.ndarray:
    """PassConstants as the compiled rounds take them: a float64 row, PassConstants' fields in order
    (a float64 array costs numba's dispatch a fraction of a NamedTuple's or a record's)."""
    return np.array(c, dtype=np.float64)


def timing_constants(c: PassConstants) -> tuple:
    """PassConstants as pass_time_s takes them: a plain tuple of the first ten fields and the sliding
    layers' four (win_flops_per_pair, win_kv_bytes_per_token, window, seqs) as one tuple, () where
    window is 0: a model without sliding layers neither unpacks nor prices them."""
    return (*c[:10], (c.win_flops_per_pair, c.win_kv_bytes_per_token, c.window, c.seqs) if c.window else ())


def from_row(r: np.ndarray) -> tuple:
    """timing_constants of a constants_row (compiled: the rounds call it on their rows; the sliding
    tuple is always the four fields, skipped by pass_time_s where the window is 0)."""
    return (r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9] != 0.0, (r[10], r[11], r[12], r[13]))


def pass_time_s(c: tuple, terms: tuple, tokens: float | np.ndarray, sum_context: float | np.ndarray,
                pairs: float | np.ndarray) -> float | np.ndarray:
    """Seconds for one pass: weights + roof(attention) + head + rest [+ all-reduce] + launch, added
    in that order. c: the pass's constants as timing_constants gives them; terms: its PassTerms (a
    4-tuple); tokens, sum_context, pairs: its tokens, cached tokens read and causal query-key pairs.
    Floats or numpy arrays; compiled as is."""
    (p, inv_p, flops_s, kv_bytes_s, flops_per_pair, kv_per_token, launch_s, ar_count, ar_fixed_s, sharp,
     sliding) = c
    weights, head, rest, allreduce = terms
    t_c = flops_per_pair * pairs / flops_s      # (before the branch: compiled, each divisor's zero check
    t_m = kv_per_token * (sum_context + 2 * tokens) / kv_bytes_s   # is then made once and LLVM inlines this)
    if sharp:
        t = weights + np.maximum(t_c, t_m)
    else:
        t = weights + (t_c ** p + t_m ** p) ** inv_p
    if sliding:         # the sliding layers: pairs and cached keys capped by the window
        win_flops, win_kv, window, seqs = sliding
        if window:
            w_c = win_flops * np.minimum(pairs, tokens * window) / flops_s
            w_m = win_kv * (np.minimum(sum_context, seqs * (window - 1.0)) + 2 * tokens) / kv_bytes_s
            if sharp:
                t = t + np.maximum(w_c, w_m)
            else:
                t = t + (w_c ** p + w_m ** p) ** inv_p
    t = t + head
    t = t + rest
    if ar_count:
        t = t + allreduce + ar_fixed_s
    return t + launch_s


def steps_time_s(c: tuple, first_terms: tuple, later_terms: tuple, first: float | np.ndarray,
                 sum_context: float | np.ndarray, num_seqs: float | np.ndarray, k: int,
                 n: float | np.ndarray) -> float | np.ndarray:
    """Seconds for k sequential passes over B = num_seqs sequences (a drafter proposing k tokens):
    step 0 takes `first` tokens (first_terms: its PassTerms), step j >= 1 takes n tokens
    (later_terms) over sum_context + B j cached tokens, each pass's pairs causal_pairs(tokens,
    context, B). The sum is 0.0 + step 0 + step 1 + ...; c: the constants of a pass over B
    sequences (timing_constants); k >= 1. Floats or numpy arrays; compiled as is (terms as 4-tuples)."""
    B, ctx = num_seqs, sum_context
    t = 0.0 + pass_time_s(c, first_terms, first, ctx, causal_pairs(first, ctx, B))
    for j in range(1, k):
        x = ctx + B * j
        t = t + pass_time_s(c, later_terms, n, x, causal_pairs(n, x, B))
    return t


ATTENTION_ONLY = PassTerms(0.0, 0.0, 0.0, 0.0)   # the terms of a pass that is attention alone (attention_time_s)


def attention_time_s(c: PassConstants, tokens: float | np.ndarray, sum_context: float | np.ndarray,
                     pairs: float | np.ndarray) -> float | np.ndarray:
    """Seconds of a pass's attention alone, the roofline of its FLOPs (attn_flops_per_pair per
    query-key pair) and its KV reads (kv_bytes_per_token per cached token, and the pass's own
    tokens' keys and values written and read): pass_time_s of a pass with no other op (zero terms,
    no launches, no all-reduce), whose additions of 0.0 leave the roof's bits as they are. One
    writing of the attention roof, which CostModel.breakdown's 'attention' op and the Vidur
    attention fit (calibrate/vidur_attention.py) read. c: a PassConstants (CostModel.pass_constants).
    Floats or numpy arrays."""
    return pass_time_s(timing_constants(c._replace(launch_s=0.0, allreduce_count=0.0)), ATTENTION_ONLY, tokens,
                       sum_context, pairs)
