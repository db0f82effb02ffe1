"""The per-iteration log reduced to what the run summary needs (`metrics.summarize`).

Every summary figure taken from the iterations is a sum, a count or a maximum over the rows,
except the inter-token-latency percentiles, which need each decode iteration's duration and
decode batch size (the ITL samples). `IterationTotals.add` folds a block of rows in; a run that
keeps the log folds it in once, as one block, and one that drops it (`simulate(...,
iterations="none")`) folds it in block by block while it runs, keeping only the ITL samples
(12 bytes per iteration with a decode sequence, against 120 for a logged row).

Summed in blocks, the floating-point sums (ITL mean, the GPU time split, busy fraction, KV
utilisation mean) can differ from the one-block sums in the last bits; counts, integer sums,
maxima and the ITL percentiles are the same.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

PERCENTILES = (50, 90, 99)
TIME_PARTS = ("draft", "verify", "prefill", "overhead")


def weighted_percentiles(values: np.ndarray, weights: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """Inverse-CDF percentiles: for each q, the smallest value whose cumulative weight reaches q% of
    the total (one sort for all of them; NaN where no weight is positive)."""
    m = weights > 0
    if not np.any(m):
        return [math.nan] * len(qs)
    v, w = values[m], weights[m]
    order = np.argsort(v, kind="stable")
    cw = np.cumsum(w[order])
    sv = v[order]
    out = []
    for q in qs:
        i = int(np.searchsorted(cw, q / 100.0 * cw[-1], side="left"))
        out.append(float(sv[min(i, len(v) - 1)]))
    return out


class IterationTotals:
    """Counts, sums and maxima of iteration-log rows, and the ITL samples (see the module docstring)."""

    def __init__(self) -> None:
        self.iterations = 0
        self.decode_rounds = 0            # iterations with a decode sequence
        self.seq_rounds = 0               # (sequence, round) pairs
        self.decode_tokens = 0            # tokens emitted by decode rounds (first tokens excluded)
        self.k_seq_rounds = 0             # sum of K over (sequence, round) pairs
        self.batch_sum = 0
        self.itl_weighted_ms = 0.0        # sum of duration_ms x decode sequences
        self.time_s = dict.fromkeys(TIME_PARTS, 0.0)
        self.duration_s = 0.0
        self.kv_util_time_s = 0.0         # sum of KV utilisation x duration
        self.kv_util_max = -math.inf
        self._itl_ms: list[np.ndarray] = []
        self._itl_weight: list[np.ndarray] = []

    def add(self, col: Mapping[str, np.ndarray], kv_capacity_blocks: np.ndarray) -> None:
        """Fold in rows given as columns (ITER_COLUMNS names; kv_capacity_blocks per row)."""
        n = len(col["start_s"])
        if n == 0:
            return
        ndec = col["num_decode"].astype(np.int64, copy=False)
        dt = col["end_s"] - col["start_s"]
        itl_ms = dt * 1e3
        self.iterations += n
        self.decode_rounds += int((ndec > 0).sum())
        nd = int(ndec.sum())
        self.seq_rounds += nd
        self.decode_tokens += int((col["tokens_emitted"].astype(np.int64, copy=False)
                                   - col["first_tokens"].astype(np.int64, copy=False)).sum())
        self.k_seq_rounds += int((col["k"].astype(np.int64, copy=False) * ndec).sum())
        self.batch_sum += int(col["batch"].astype(np.int64, copy=False).sum())
        self.itl_weighted_ms += float((itl_ms * ndec).sum())
        m = ndec > 0
        self._itl_ms.append(itl_ms[m])
        self._itl_weight.append(ndec[m].astype(np.int32))
        for k in TIME_PARTS:
            self.time_s[k] += float(col[f"{k}_s"].sum())
        util = col["kv_used_blocks"].astype(np.int64, copy=False) / kv_capacity_blocks
        self.kv_util_time_s += float((util * dt).sum())
        self.duration_s += float(dt.sum())
        self.kv_util_max = max(self.kv_util_max, float(util.max()))

    def summary(self, wall_s: float, replicas: int) -> dict[str, Any]:
        """The summary's iteration figures (wall_s: the run's simulated duration)."""
        s: dict[str, Any] = {"num_iterations": self.iterations, "num_decode_rounds": self.decode_rounds}
        nd = self.seq_rounds
        s["itl_ms_mean"] = self.itl_weighted_ms / nd if nd else math.nan
        v = np.concatenate(self._itl_ms) if self._itl_ms else np.zeros(0)
        w = np.concatenate(self._itl_weight).astype(float) if self._itl_weight else np.zeros(0)
        for q, p in zip(PERCENTILES, weighted_percentiles(v, w, PERCENTILES)):
            s[f"itl_ms_p{q}"] = p
        s["mean_tokens_per_round"] = self.decode_tokens / nd if nd else math.nan
        s["mean_k"] = self.k_seq_rounds / nd if nd else math.nan
        busy = sum(self.time_s.values())
        for k, t in self.time_s.items():
            s[f"{k}_time_frac"] = t / busy if busy > 0 else math.nan
        s["busy_frac"] = busy / (wall_s * replicas) if wall_s > 0 else math.nan
        d = self.duration_s
        s["kv_util_mean"] = self.kv_util_time_s / d if d > 0 else math.nan
        s["kv_util_max"] = self.kv_util_max if self.iterations else math.nan
        s["mean_batch"] = self.batch_sum / self.iterations if self.iterations else math.nan
        return s
