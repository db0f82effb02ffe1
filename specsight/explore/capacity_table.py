"""Capacity and cost with and without speculation, in closed form: the largest batch (of CAPACITY_BATCHES) that keeps
the TPOT target (step time / tokens per round, every sequence alike) within KV memory and the
engine's max_num_seqs, its output tokens per second, the replicas an offered rate needs, and the
price per million output tokens at the profile's price per GPU-hour.

The time to first token is not modelled here (no prefill in the closed form): the simulated
study, or `specsight plan`, checks it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .priced import Priced

CAPACITY_BATCHES = np.unique(np.round(np.geomspace(1, 1024, 160)))   # steps of at most 5 %


@dataclass(frozen=True)
class CapacityRow:
    label: str                        # "plain" or "K=3"
    batch: int                        # 0: no batch meets the target
    limited_by: str                   # tpot, kv, max_num_seqs, max batch
    tpot_ms: float
    tokens_per_s: float               # output tokens per second, one replica
    replicas: int | None              # for the offered rate (None: closed-loop load)
    usd_per_m_tokens: float | None    # None: the profile has no price


def capacity_rows(pr: Priced, alpha: float, tpot_ms: float | None, rate_qps: float | None) -> list[CapacityRow]:
    """Plain decoding and speculation at the scenario's K, each at its largest batch within the
    TPOT target `tpot_ms` (None: no target) and memory; `rate_qps`: the offered request rate."""
    sc = pr.scenario
    price = sc_price(pr)
    gpus = int(sc.hardware.tp)
    mean_output = pr.model.mean_output
    rows = []
    for label, k in (("plain", 0), (f"K={pr.k}", pr.k)):
        t = pr.plain_s(CAPACITY_BATCHES) if k == 0 else pr.spec_s(CAPACITY_BATCHES, k, alpha)
        e = 1.0 if k == 0 else pr.expected_tokens(k, alpha)
        tpot = t / e * 1e3
        limits = {"kv": pr.kv_batch_limit(k), "max_num_seqs": float(pr.max_num_seqs),
                  "max batch": float(CAPACITY_BATCHES[-1])}
        cap_name = min(limits, key=lambda n: limits[n])
        ok = CAPACITY_BATCHES <= limits[cap_name]
        if tpot_ms is not None:
            ok &= tpot <= tpot_ms
        if not ok.any():
            rows.append(CapacityRow(label, 0, "tpot" if tpot_ms is not None else cap_name, float(tpot[0]), 0.0,
                                    None, None))
            continue
        i = int(np.nonzero(ok)[0][-1])
        b = int(CAPACITY_BATCHES[i])
        by_tpot = i + 1 < len(ok) and CAPACITY_BATCHES[i + 1] <= limits[cap_name]     # the next one misses TPOT
        tps = b * e / float(t[i])
        replicas = None if rate_qps is None else max(1, math.ceil(rate_qps * mean_output / tps))
        usd = None if price is None else price * gpus / 3600.0 / tps * 1e6
        rows.append(CapacityRow(label, b, "tpot" if by_tpot else cap_name, float(tpot[i]), tps, replicas, usd))
    return rows


def sc_price(pr: Priced) -> float | None:
    """USD per GPU-hour of the scenario's profile (None where it records none)."""
    return getattr(pr.cm.hw, "price_usd_per_gpu_hour", None)
