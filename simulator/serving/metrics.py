"""What a run records, and the summaries computed from it.

Recording is cheap on purpose: per-request counters live in numpy arrays indexed by request id
(`RequestTable`), and each iteration appends one row of floats to a flat `array.array`
(`IterationLog`, which grows geometrically, so appending is amortised O(1)). pandas is only
touched after the simulation, to build the two DataFrames.

Definitions (all times in simulated seconds; the summary reports latencies in ms):
  TTFT   first_token_s - arrival_s: the first token is emitted at the end of the iteration
         that computes the prompt's last chunk.
  TPOT   (finish_s - first_token_s) / (output_tokens - 1); undefined (NaN) for 1-token outputs.
  E2E    finish_s - arrival_s.
  ITL    inter-token latency as a streaming client sees it: tokens accepted in the same round
         arrive together, so each (sequence, round) pair is one sample whose value is the round's
         duration (the gap since that sequence's previous round, since every running sequence
         takes part in every iteration). Percentiles weight each iteration's duration by its
         number of decode sequences. A preempted sequence's wait is not an ITL sample; it shows
         in its TPOT and E2E.
  mean_tokens_per_round  decode tokens emitted / (sequence, round) pairs, K = 0 rounds included.
  mean_accept_length     1 + accepted drafts / speculative (sequence, round) pairs (vLLM's
                         "mean acceptance length").
  acceptance_rate_pos{j} conditional: rounds accepting draft j / rounds that reached draft j
                         (proposed it, and accepted drafts 1..j-1).
"""
from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .iteration_totals import PERCENTILES, IterationTotals, weighted_percentiles

if TYPE_CHECKING:
    import pandas as pd

    from .slo import SLOSpec

ITER_COLUMNS = ("replica", "start_s", "end_s", "batch", "num_decode", "num_prefill_tokens", "k",
                "tokens_emitted", "first_tokens", "draft_s", "verify_s", "prefill_s", "overhead_s",
                "kv_used_blocks", "preempted")
ITER_INT_COLUMNS = ("replica", "batch", "num_decode", "num_prefill_tokens", "k", "tokens_emitted",
                    "first_tokens", "kv_used_blocks", "preempted")
N_ITER_COLS = len(ITER_COLUMNS)
REQUEST_COLUMNS = ("id", "replica", "arrival_s", "first_token_s", "finish_s", "prompt_tokens",
                   "output_tokens", "rounds", "accepted_drafts", "drafted_tokens", "preemptions")


class RequestTable:
    """Per-request state and counters as numpy arrays of length N (indexed by request id)."""

    def __init__(self, arrival_s: np.ndarray, prompt_len: np.ndarray, output_len: np.ndarray):
        n = len(arrival_s)
        self.n = n
        self.arrival_s = np.array(arrival_s, dtype=np.float64)      # [N] s (closed loop: set on issue)
        self.prompt = np.asarray(prompt_len, dtype=np.int64)        # [N] tokens
        self.output = np.asarray(output_len, dtype=np.int64)        # [N] tokens
        self.replica = np.full(n, -1, dtype=np.int64)
        self.first_token_s = np.full(n, np.nan)
        self.finish_s = np.full(n, np.nan)
        self.generated = np.zeros(n, dtype=np.int64)   # tokens emitted so far (kept across preemption)
        self.rounds = np.zeros(n, dtype=np.int64)      # decode rounds taken part in
        self.accepted = np.zeros(n, dtype=np.int64)    # drafts accepted
        self.drafted = np.zeros(n, dtype=np.int64)     # drafts proposed
        self.preemptions = np.zeros(n, dtype=np.int64)

    def frame(self) -> pd.DataFrame:
        import pandas as pd
        return pd.DataFrame({
            "id": np.arange(self.n, dtype=np.int64), "replica": self.replica,
            "arrival_s": self.arrival_s, "first_token_s": self.first_token_s, "finish_s": self.finish_s,
            "prompt_tokens": self.prompt, "output_tokens": self.generated, "rounds": self.rounds,
            "accepted_drafts": self.accepted, "drafted_tokens": self.drafted, "preemptions": self.preemptions,
        })


class IterationLog:
    """One row of ITER_COLUMNS floats per iteration, appended to a flat array('d'). After `drop`, the
    rows are folded into IterationTotals instead of kept: by the replicas that run ahead (RunAhead)
    whenever the log holds more than `fold_floats` floats, and the rest at `fold`."""
    FOLD_ROWS = 1 << 18          # rows folded at a time (30 MB of log)

    def __init__(self) -> None:
        self.buf = array("d")
        self.totals: IterationTotals | None = None
        self.fold_floats = sys.maxsize
        self._caps = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.buf) // N_ITER_COLS

    def drop(self, kv_capacity_blocks: list[int]) -> IterationTotals:
        """Keep no rows from now on: the IterationTotals the rows will be folded into."""
        self.totals = IterationTotals()
        self._caps = np.asarray(kv_capacity_blocks, dtype=np.int64)
        self.fold_floats = self.FOLD_ROWS * N_ITER_COLS
        return self.totals

    def fold(self) -> None:
        """Fold the rows logged so far into the totals (`drop`), a block at a time, and empty the log."""
        assert self.totals is not None, "fold() after drop()"
        for start in range(0, len(self), self.FOLD_ROWS):
            _fold_rows(self.buf, start, self.FOLD_ROWS, self.totals, self._caps)
        del self.buf[:]       # (the same array the replicas append to: emptied, not replaced)

    def fold_blocks(self) -> None:
        """Fold the whole FOLD_ROWS blocks logged so far (`fold`), keeping the rest: the blocks, and
        so the totals' sums, are the ones one `fold` at the end gives."""
        assert self.totals is not None, "fold_blocks() after drop()"
        whole = len(self) // self.FOLD_ROWS * self.FOLD_ROWS
        for start in range(0, whole, self.FOLD_ROWS):
            _fold_rows(self.buf, start, self.FOLD_ROWS, self.totals, self._caps)
        del self.buf[:whole * N_ITER_COLS]

    def frame(self, kv_capacity_blocks: list[int]) -> pd.DataFrame:
        """The log as a DataFrame sorted by start time, then replica (stable), emptying the log: each
        column is gathered in that order straight from the log and handed to pandas uncopied, then
        the log's memory is released, so the peak is the log and one copy of it and the summary's
        work runs beside the DataFrame alone (a million requests over 64 replicas: ~12M rows,
        1.4 GB each)."""
        import pandas as pd
        a = np.frombuffer(self.buf, dtype=np.float64).reshape(-1, N_ITER_COLS) if len(self.buf) else \
            np.zeros((0, N_ITER_COLS))
        order = np.lexsort((a[:, 0], a[:, 1]))          # start_s, then replica; stable, as sort_values
        cols: dict[str, Any] = {}
        for j, name in enumerate(ITER_COLUMNS):
            col = a[:, j].take(order)
            cols[name] = col.astype(np.int64) if name in ITER_INT_COLUMNS else col
        cap = np.asarray(kv_capacity_blocks, dtype=np.int64)
        cols["kv_capacity_blocks"] = cap[cols["replica"]] if len(a) else np.zeros(0, dtype=np.int64)
        del a, order
        del self.buf[:]       # (the same array the replicas append to: emptied, not replaced)
        return pd.DataFrame(cols, copy=False)


def _fold_rows(buf: array, start: int, rows: int, totals: IterationTotals, caps: np.ndarray) -> None:
    """Rows start..start+rows of the log into totals. The block is copied out of buf (at most
    FOLD_ROWS rows, 30 MB): a view would live on in any frame that outlives this call (a sampling
    profiler's, as dask's in a threaded worker), and while one lives buf cannot grow or be emptied."""
    a = np.array(np.frombuffer(buf, dtype=np.float64).reshape(-1, N_ITER_COLS)[start:start + rows])
    totals.add({name: a[:, j] for j, name in enumerate(ITER_COLUMNS)}, caps[a[:, 0].astype(np.int64)])


# ---- summaries ---------------------------------------------------------------------------
def _pcts(prefix: str, values_ms: np.ndarray, out: dict[str, Any]) -> None:
    v = values_ms[np.isfinite(values_ms)]
    out[f"{prefix}_mean"] = float(v.mean()) if v.size else math.nan
    for q in PERCENTILES:
        out[f"{prefix}_p{q}"] = float(np.percentile(v, q)) if v.size else math.nan


def weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """Inverse-CDF percentile: the smallest value whose cumulative weight reaches q% of the total."""
    return weighted_percentiles(values, weights, (q,))[0]


def per_request_latencies(req: pd.DataFrame) -> dict[str, np.ndarray]:
    """TTFT, TPOT, E2E in seconds per request ([N] float64; TPOT NaN for 1-token outputs)."""
    ttft = (req["first_token_s"] - req["arrival_s"]).to_numpy()
    e2e = (req["finish_s"] - req["arrival_s"]).to_numpy()
    out = req["output_tokens"].to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (req["finish_s"] - req["first_token_s"]).to_numpy() / np.maximum(out - 1, 1), np.nan)
    return {"ttft": ttft, "tpot": tpot, "e2e": e2e}


def iteration_totals(it: pd.DataFrame) -> IterationTotals:
    """The iteration log's DataFrame folded into IterationTotals as one block."""
    totals = IterationTotals()
    totals.add({name: it[name].to_numpy() for name in ITER_COLUMNS}, it["kv_capacity_blocks"].to_numpy())
    return totals


def summarize(req: pd.DataFrame, it: pd.DataFrame | IterationTotals, acc_hist: np.ndarray, slo: SLOSpec,
              extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The summary dict of one run (see the module docstring and docs/simulator.md); `it` is the
    iteration log's DataFrame or its IterationTotals (a run that drops the log)."""
    s: dict[str, Any] = {}
    n = len(req)
    s["num_requests"] = int(n)
    s["num_iterations"] = s["num_decode_rounds"] = 0       # (their place in the summary's order)
    t0 = float(req["arrival_s"].min()) if n else 0.0
    t1 = float(req["finish_s"].max()) if n else 0.0
    dur = t1 - t0
    s["duration_s"] = dur
    out_tok = int(req["output_tokens"].sum())
    s["output_tokens"] = out_tok
    s["prompt_tokens"] = int(req["prompt_tokens"].sum())
    s["output_tokens_per_s"] = out_tok / dur if dur > 0 else math.nan
    s["requests_per_s"] = n / dur if dur > 0 else math.nan
    lat = per_request_latencies(req)
    for key in ("ttft", "tpot", "e2e"):
        _pcts(f"{key}_ms", lat[key] * 1e3, s)
    # the iterations: counts, sums and ITL percentiles (simulator/serving/iteration_totals.py)
    totals = it if isinstance(it, IterationTotals) else iteration_totals(it)
    its = totals.summary(dur, int(extra.get("replicas", 1)) if extra else 1)
    s.update((k, its.pop(k)) for k in list(its) if k.startswith(("num_", "itl_")))
    # goodput: requests meeting both per-request thresholds, per second
    ok = np.ones(n, dtype=bool)
    if slo.tpot_ms_p99 is not None:
        ok &= ~(lat["tpot"] * 1e3 > slo.tpot_ms_p99)          # NaN TPOT (1-token output) passes
    if slo.ttft_ms_p99 is not None:
        ok &= lat["ttft"] * 1e3 <= slo.ttft_ms_p99
    s["slo_attainment"] = float(ok.mean()) if n else math.nan
    s["goodput_requests_per_s"] = float(ok.sum()) / dur if dur > 0 else math.nan

    # speculation
    s["mean_tokens_per_round"], s["mean_k"] = its.pop("mean_tokens_per_round"), its.pop("mean_k")
    h = np.asarray(acc_hist, dtype=np.float64)          # [k_max+1, k_max+1]: rounds with (k, accepted)
    spec_rounds = h[1:].sum() if h.shape[0] > 1 else 0.0
    if spec_rounds > 0:
        ks = np.arange(h.shape[0])
        accepted = float((h * ks[None, :]).sum())
        drafted = float((h.sum(axis=1) * ks).sum())
        s["mean_accept_length"] = 1.0 + accepted / spec_rounds
        s["acceptance_rate"] = accepted / drafted
        for j in range(1, h.shape[0]):
            reached = h[j:, j - 1:].sum()                  # proposed >= j drafts and accepted >= j-1
            got = h[j:, j:].sum()
            s[f"acceptance_rate_pos{j}"] = float(got / reached) if reached else math.nan
    else:
        s["mean_accept_length"] = math.nan
        s["acceptance_rate"] = math.nan

    mean_batch = its.pop("mean_batch")
    s.update(its)                                        # GPU time split, busy fraction, KV utilisation
    s["preemptions"] = int(req["preemptions"].sum())
    s["preempted_requests"] = int((req["preemptions"] > 0).sum())
    s["mean_batch"] = mean_batch
    if extra:
        s.update(extra)
    return s


SPEEDUP_KEYS = ("output_tokens_per_s", "requests_per_s", "goodput_requests_per_s")
LATENCY_SPEEDUP_KEYS = tuple(f"{m}_ms_p{q}" for m in ("tpot", "ttft", "itl", "e2e") for q in PERCENTILES)


def speedups(spec: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, float]:
    """Ratios against the K = 0 baseline: throughputs spec/base, latencies base/spec (> 1 is better)."""
    out: dict[str, float] = {}

    def ratio(a: float, b: float) -> float:
        return float(a / b) if b and math.isfinite(a) and math.isfinite(b) else math.nan

    for key in SPEEDUP_KEYS:
        out[f"speedup_{key}"] = ratio(spec[key], base[key])
        out[f"baseline_{key}"] = base[key]
    for key in LATENCY_SPEEDUP_KEYS:
        metric, _, q = key.rpartition("_ms_")
        out[f"speedup_{metric}_{q}"] = ratio(base[key], spec[key])
        out[f"baseline_{key}"] = base[key]
    return out
