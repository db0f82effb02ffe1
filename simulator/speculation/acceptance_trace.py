"""Trace-driven acceptance: conditional rates alpha_k estimated from a recorded CSV.

Two formats (other columns are ignored):

1. Accept lengths, one row per sequence-round: column `accepted` (drafts accepted, 0..k) and
   optionally `k` (drafts proposed that round; else the spec's `k`, else the largest `accepted`).
   Position j was attempted in rows with k >= j and accepted >= j - 1 and accepted in rows with
   accepted >= j:  alpha_j = #(accepted >= j) / #(k >= j and accepted >= j - 1).
   (Counting attempts this way lets rows with different k be pooled; for a single k, sampling
   from these rates reproduces the recorded accept-length distribution exactly.)

2. vLLM spec-decode counters: `num_drafts` (speculative rounds, summed over sequences) and
   `num_accepted_tokens_per_pos_0`, `_1`, ... (rounds in which position i, 0-based, was
   accepted), as vLLM's `vllm:spec_decode_num_drafts` and
   `vllm:spec_decode_num_accepted_tokens_per_pos{position=i}` counters export them.
   Cumulative acceptance of position i is acc_i / num_drafts, so the conditional rates are
       alpha_1 = acc_0 / num_drafts,   alpha_{i+1} = acc_i / acc_{i-1}.
   Rows are summed (`counters: delta`, one row per scrape interval) or the last row is taken
   (`counters: cumulative`, snapshots of monotone counters).

3. What vLLM writes itself, read directly (acceptance_vllm.py): a Prometheus `/metrics` scrape
   (`vllm:spec_decode_num_drafts_total`, `vllm:spec_decode_num_accepted_tokens_per_pos_total{position=i}`)
   or a `vllm bench serve` result JSON (`spec_decode_num_drafts`,
   `spec_decode_per_position_acceptance_rates`), converted from vLLM's cumulative per-position
   figures to the conditional rates above.

Positions past the recorded ones reuse the last rate; a position that was never attempted ends
the list there.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from ..common.csvio import as_counts, read_csv_columns, resolve_path
from ..common.errors import SpecsightInputError
from ..common.input_files import read_text
from ..common.limits import MAX_K
from .acceptance import PerPositionAcceptance
from .acceptance_sglang import is_sglang_prometheus, rates_from_sglang
from .acceptance_vllm import counters_from_bench, counters_from_prometheus, is_prometheus

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

POS_COLUMN = re.compile(r"^num_accepted_tokens_per_pos_(\d+)$")


def alphas_from_accept_lengths(accepted: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Conditional rates from per-round accept lengths. accepted, k: [R] int64 -> [max k] float64."""
    rates = []
    for j in range(1, int(k.max()) + 1):
        attempts = np.count_nonzero((k >= j) & (accepted >= j - 1))
        if attempts == 0:
            break
        rates.append(np.count_nonzero(accepted >= j) / attempts)
    return np.asarray(rates)


def alphas_from_counters(num_drafts: float, per_pos: np.ndarray) -> np.ndarray:
    """Conditional rates from vLLM counters: per_pos[i] = rounds accepting 0-based position i."""
    denom = np.concatenate(([num_drafts], per_pos[:-1])).astype(float)
    rates = []
    for num, den in zip(per_pos, denom):
        if den <= 0:
            break
        rates.append(num / den)
    return np.asarray(rates)


def check_counters(num_drafts: float, per_pos: np.ndarray, field: str, path: object) -> None:
    """vLLM's counters are cumulative over positions: drafts >= pos_0 >= pos_1 >= ... >= 0."""
    if np.any(per_pos < 0) or np.any(np.diff(np.concatenate(([num_drafts], per_pos))) > 1e-9 * max(num_drafts, 1.0)):
        raise SpecsightInputError(field, str(path), "counters must satisfy num_drafts >= pos_0 >= pos_1 >= ... >= 0")


class TraceAcceptance(PerPositionAcceptance):
    """Per-position acceptance estimated from a recorded trace (see the module docstring)."""
    name = "trace"

    def __init__(self, alphas: ArrayLike, path: str, fmt: str, rounds: int):
        super().__init__(alphas, source=path)
        self.path, self.format, self.rounds = path, fmt, rounds   # rounds: observations behind it

    @classmethod
    def from_csv(cls, path: object, field: str, k: int | None = None,
                 counters: str = "delta") -> TraceAcceptance:
        p = resolve_path(path, field)
        text = read_text(p, field, "csv")
        if is_sglang_prometheus(text):                                # what SGLang writes (acceptance_sglang.py)
            rates, rounds = rates_from_sglang(text, field, p, k)
            return cls(rates, str(p), "sglang_prometheus", rounds)
        if text.lstrip().startswith("{") or is_prometheus(text):     # what vLLM itself writes (acceptance_vllm.py)
            read = counters_from_bench if text.lstrip().startswith("{") else counters_from_prometheus
            n, per = read(text, field, p)
            fmt = "vllm_bench_json" if read is counters_from_bench else "vllm_prometheus"
            check_counters(n, per, field, p)
            rates = alphas_from_counters(n, per)
            if len(rates) == 0:
                raise SpecsightInputError(field, str(p), "no position was ever attempted (no speculative rounds)")
            return cls(rates, str(p), fmt, int(n))
        cols = read_csv_columns(p, field)
        pos_cols = sorted((int(m.group(1)), c) for c in cols if (m := POS_COLUMN.match(c)))
        if "accepted" in cols:
            acc = as_counts(cols["accepted"], field, "accepted", lo=0, hi=MAX_K)
            if len(acc) == 0:
                raise SpecsightInputError(field, str(p), "has no rows")
            if "k" in cols:
                ks = as_counts(cols["k"], field, "k", lo=1, hi=MAX_K)
            else:
                ks = np.full(len(acc), k if k is not None else max(1, int(acc.max())), dtype=np.int64)
            if np.any(acc > ks):
                raise SpecsightInputError(field, str(p), "a row has accepted > k (drafts proposed)")
            rates, fmt, rounds = alphas_from_accept_lengths(acc, ks), "accept_lengths", len(acc)
        elif "num_drafts" in cols and pos_cols:
            if [i for i, _ in pos_cols] != list(range(len(pos_cols))):
                raise SpecsightInputError(field, str(p),
                                          "num_accepted_tokens_per_pos_<i> columns must run 0, 1, 2, ... without gaps")
            drafts = cols["num_drafts"]
            per_pos = np.stack([cols[c] for _, c in pos_cols], axis=1)     # [rows, positions]
            if len(drafts) == 0:
                raise SpecsightInputError(field, str(p), "has no rows")
            if counters == "cumulative":
                n, per = float(drafts[-1]), per_pos[-1]
            else:
                n, per = float(drafts.sum()), per_pos.sum(axis=0)
            check_counters(n, per, field, p)
            rates, fmt, rounds = alphas_from_counters(n, per), "vllm_counters", int(n)
        else:
            raise SpecsightInputError(field, str(p), "needs column `accepted` (optionally `k`), or `num_drafts` and "
                                      "`num_accepted_tokens_per_pos_0`, ...; found " + ", ".join(cols))
        if len(rates) == 0:
            raise SpecsightInputError(field, str(p), "no position was ever attempted (no rounds with k >= 1)")
        return cls(rates, str(p), fmt, rounds)

    def __repr__(self) -> str:
        return f"TraceAcceptance(path={self.path!r}, format={self.format}, alphas={np.round(self.rates, 4).tolist()})"
