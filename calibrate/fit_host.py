"""The host time of a round outside its forward passes, fitted from the timed host work.

`specsight calibrate` times one round's sampling and bookkeeping (`calibrate.host_work`) at
several batch sizes B and draft lengths K; `host_overhead` splits it into the three overheads
the cost model charges (iteration, per logit row, per speculative round).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from .least_squares import ape

if TYPE_CHECKING:
    import pandas as pd


def host_overhead(points: pd.DataFrame, stat: str = "median") -> dict[str, Any]:
    """Per-round host time outside the forward passes, from the "host" points (one round's
    sampling and bookkeeping at batch B and K; calibrate.host_work.host_work_fn).

    The host work reads every probability row the round's passes hand it: K draft rows per
    sequence (each drawn from) and K + 1 target rows (read by the verify kernel), or the one row
    of a K = 0 round, so logit rows = B (2K + 1): exactly the logit positions the simulator's cost
    model counts in the round's passes (K draft steps of B logits, a verify pass of B (K + 1)). A
    speculative round also runs the verify kernel once, a fixed number of small ops whatever B.
    So t = a + b * logit_rows + c * [K > 0], least squares with a, b, c >= 0:

        a  the fixed host time of every iteration           -> overheads.iteration_us
        b  the host time per logit row                       -> overheads.sampling_row_us (the cost
           model charges it per logit, on top of the LM head and softmax of the pass)
        c  the verify kernel's fixed time, speculative rounds only  -> overheads.verify_round_us
           (the cost model charges it once per round with K > 0: CostModel.round_overhead_s)

    Why c is a term of its own: with one intercept, the intercept takes the verify kernel's fixed
    time into every iteration, and a K = 0 round, which runs no verify kernel, is charged for it
    (in the CPU calibrations of tests/data/calibration_cpu/, cpu*.yaml and their points:
    0.22-0.33 ms of host work at batch 1 and K = 0, a fitted verify kernel of 0.36-0.61 ms, so one
    intercept more than doubles a plain round's host time). per_row_us and per_row_ape_median:
    the one-intercept fit against rows = B (K + 1), reported for comparison."""
    from scipy.optimize import nnls
    h = [p for p in points if p["role"] == "host"]
    if not h:
        return {"iteration_us": 0.0, "sampling_row_us": 0.0, "verify_round_us": None, "per_row_us": 0.0, "n": 0}
    B = np.array([p["batch"] for p in h], float)
    K = np.array([p["new_tokens"] for p in h], float)
    t_us = 1e6 * np.array([p[f"{stat}_s"] for p in h], float)
    X = host_design(B, K)
    if not (K > 0).any() or (K > 0).all():
        X = X[:, :2]                      # no K = 0 point or no K > 0 point: c is not identified
    coef, _ = nnls(X, t_us)
    # c is None where the points cannot separate it (only K = 0 rounds, or only K > 0 ones: then the
    # intercept a holds the verify kernel's time too); the profile then leaves the term out
    a, b, c = float(coef[0]), float(coef[1]), float(coef[2]) if coef.size > 2 else None
    e = ape(X @ coef, t_us)
    x_rows = np.column_stack([np.ones_like(B), B * (K + 1)])
    c_rows, _ = nnls(x_rows, t_us)
    return {"iteration_us": a, "sampling_row_us": b, "verify_round_us": c, "n": len(h),
            "ape_median": float(np.median(e)), "ape_max": float(np.max(e)),
            "per_row_us": float(c_rows[1]), "per_row_ape_median": float(np.median(ape(x_rows @ c_rows, t_us)))}


def host_design(batch: ArrayLike, k: ArrayLike) -> np.ndarray:
    """The host model's rows [1, B (2K + 1), K > 0] (iteration, sampling rows, verify round),
    one per (batch, k); arrays or numbers."""
    B, K = np.atleast_1d(np.asarray(batch, float)), np.atleast_1d(np.asarray(k, float))
    return np.column_stack([np.ones_like(B), B * (2 * K + 1), (K > 0).astype(float)])


def host_round_us(host: Mapping[str, Any], batch: int, k: int) -> float:
    """The host fit's time of one round (host_overhead) on host_design's row, absent terms 0, as
    the cost model charges it."""
    coef = [host.get(key) or 0.0 for key in ("iteration_us", "sampling_row_us", "verify_round_us")]
    return float(host_design(batch, k)[0] @ coef)

