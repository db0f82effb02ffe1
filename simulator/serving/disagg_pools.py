"""A disaggregated run's pools summarised (disagg.py): per pool its instances, GPUs, mean batch and
latency, the `pools` entry of the run's summary."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .disagg import DisaggEngine, PhasedDisagg


def pool_summaries(engine: DisaggEngine | PhasedDisagg, req: Any, gpus: tuple[str, str],
                   tps: tuple[int, int]) -> list[dict[str, Any]]:
    """One entry per pool (`gpus`, `tps`: the prefill pool's GPU name and TP, then the decode
    pool's): its instances, GPUs, mean batch (prefill: prompts per iteration; decode: sequences
    per decode round, compiled rounds included), and its latency: prefill TTFT (arrival to the
    prompt computed, before the transfer), decode TPOT."""
    P = len(engine.prefill)
    arrival = req["arrival_s"].to_numpy()
    first, finish = req["first_token_s"].to_numpy(), req["finish_s"].to_numpy()
    out_tok = req["output_tokens"].to_numpy()
    pf = engine.prefill_done_s - arrival
    moved = out_tok > 1
    tpot = (finish - first)[moved] / (out_tok[moved] - 1)
    pools = []
    spans = (("prefill", 0, P, gpus[0], tps[0]), ("decode", P, len(engine.replicas), gpus[1], tps[1]))
    for name, lo, hi, gpu, tp in spans:
        reps = engine.replicas[lo:hi]
        if name == "prefill":        # prompts per iteration
            iters = sum(r.iterations for r in reps)
            batch = sum(r.batch_sum for r in reps) / iters if iters else 0.0
        else:                        # decode sequences per decode round: (sequence, round) pairs / rounds
            rounds = sum(r.rounds_cum for r in reps)
            batch = float(req["rounds"].sum()) / rounds if rounds else 0.0
        entry: dict[str, Any] = {"pool": name, "instances": hi - lo, "tp": tp, "gpus": (hi - lo) * tp,
                                 "gpu": gpu, "mean_batch": batch}
        if name == "prefill":
            ok = pf[~np.isnan(pf)] * 1e3
            entry.update({"ttft_ms_p50": float(np.percentile(ok, 50)) if ok.size else None,
                          "ttft_ms_p99": float(np.percentile(ok, 99)) if ok.size else None})
        else:
            entry.update({"tpot_ms_p50": float(np.percentile(tpot, 50)) * 1e3 if tpot.size else None,
                          "tpot_ms_p99": float(np.percentile(tpot, 99)) * 1e3 if tpot.size else None})
        pools.append(entry)
    return pools
