"""What one forward pass holds: its sequences' new tokens and cached context, and the sums of them
the pass time depends on (`PassShape`), with the causal query-key pair count written once
(`causal_pairs`).

For sequences i = 1..B with n_i new tokens and c_i cached tokens (T = sum n_i), the cost
depends on the batch only through five sums: sequences, tokens, sum c_i, query-key pairs
sum n_i (c_i + (n_i + 1) / 2) (each new token attends to its sequence's cache and, causally, to
the new tokens before it and itself), and positions that need logits.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def causal_pairs(new_tokens: float | np.ndarray, sum_context: float | np.ndarray,
                 num_seqs: float | np.ndarray = 1) -> float | np.ndarray:
    """Causal query-key pairs of num_seqs sequences that take new_tokens (T) in all, evenly, over
    sum_context (C) cached tokens: T C / B + T (T / B + 1) / 2, which is sum_i n_i (c_i + (n_i + 1) / 2)
    when every n_i = T / B (c_i enters only through its sum). One sequence (B = 1): n c + n (n + 1) / 2.

    Floats, ints (exact: every term is an integer or a half-integer) or numpy arrays, elementwise
    (the vectorised form: summing causal_pairs(n, c) over arrays n, c gives a ragged batch's sum).
    The compiled decode rounds call it too (simulator/serving/decode_kernel.py)."""
    return new_tokens * sum_context / num_seqs + new_tokens * (new_tokens / num_seqs + 1) / 2


@dataclass(frozen=True)
class PassShape:
    """The sums one forward pass's cost depends on."""
    num_seqs: float
    num_tokens: float        # T = sum n_i
    sum_context: float       # sum c_i: cached tokens whose KV is read
    sum_attn_pairs: float    # sum n_i (c_i + (n_i + 1) / 2): causal query-key pairs (causal_pairs)
    num_logits: float        # positions whose logits are computed (all verify positions)

    @classmethod
    def from_sequences(cls, seqs: Iterable[tuple[int, int]], logits: str = "all") -> PassShape:
        """From (new_tokens, context) per sequence; logits 'all' (verify) or 'last' (prefill, decode)."""
        b = t = c = pairs = lg = 0
        for n, ctx in seqs:
            b += 1
            t += n
            c += ctx
            pairs += causal_pairs(n, ctx)
            lg += n if logits == "all" else 1
        return cls(b, t, c, pairs, lg)

    @classmethod
    def uniform(cls, batch: float, new_tokens: float, context: float, logits_per_seq: float | None = None) -> PassShape:
        """B identical sequences (floats or numpy arrays broadcast)."""
        n = new_tokens
        lg = n if logits_per_seq is None else logits_per_seq
        return cls(batch, batch * n, batch * context, batch * causal_pairs(n, context), batch * lg)
