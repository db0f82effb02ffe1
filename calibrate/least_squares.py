"""Least squares of a profile's efficiencies and overheads on log time.

The parameters are the profile fields they land in:
    efficiency.memory, efficiency.compute     achieved fractions of the peaks, in (0, 1]
    efficiency.roofline_sharpness             p of the soft roofline (t_c^p + t_m^p)^(1/p), >= 1
    overheads.kernel_launch_us                fixed time per kernel of a forward pass
    efficiency.memory_gemv                    bandwidth fraction of one-token (matrix-vector) weight
                                              streaming, in (0, 1]; fitted only when the points include
                                              one-token passes, else tied to efficiency.memory (None)
    efficiency.memory_attention               bandwidth fraction of attention's KV-cache reads, in
                                              (0, 1]; fitted only when the points span two or more
                                              contexts, else tied to efficiency.memory (None)

What is fitted is exactly what the simulator uses: predictions come from a `predict(params)`
callable that builds a `HardwareProfile` with candidate `Efficiency`/`Overheads` (`with_params`)
and asks the simulator's own `CostModel` (or its `soft_roofline`, for single operators) for times.
The fit minimises log-time residuals (scipy.optimize.least_squares, trust-region reflective,
bounded), so a 10 us kernel and a 10 ms pass weigh alike; it restarts from a few sharpness
values because p makes the problem mildly non-convex. Held-out error is the absolute
percentage error |pred - meas| / meas on points the fit never saw (`holdout_groups`).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import OptimizeResult, least_squares

from simulator.hardware.hardware import Efficiency, HardwareProfile, Overheads

PARAM_NAMES = ("efficiency.memory", "efficiency.compute", "efficiency.roofline_sharpness",
               "overheads.kernel_launch_us", "efficiency.memory_gemv", "efficiency.memory_attention")
GEMV = "efficiency.memory_gemv"
ATTN = "efficiency.memory_attention"
RATES = (GEMV, ATTN)       # optional bandwidth fractions; absent (None) = efficiency.memory
# fixed={GEMV: TIED}: one memory rate (memory_gemv = memory, written as absent): the fit's points have
# no one-token pass to tell the two rates apart; fixed={ATTN: TIED} likewise where attention's KV
# reads cannot be told apart (one context only, or no attention at all: single operators).
TIED = None
# Bounds: fractions in (0, 1]; p in [1, P_MAX]; launch overhead in [0, 1000] us. P_MAX = 32:
# the soft roofline is then within 2.2 % of max() at the knee (2^(1/32)), and t^p stays clear
# of float64 underflow for op times down to 1 ns (simulator.costs.cost_model.soft_roofline raises t to
# the power p directly). The sharp max() roofline is compared with p = inf, not with P_MAX.
P_MAX = 32.0
LOWER = np.array([1e-3, 1e-3, 0.0, 0.0, 1e-3, 1e-3])      # theta = (eff_m, eff_c, log p, launch_us, eff_gemv, eff_attn)
UPPER = np.array([1.0, 1.0, math.log(P_MAX), 1000.0, 1.0, 1.0])
P_STARTS = (2.0, 4.0, 12.0)


def ape(pred: ArrayLike, meas: ArrayLike) -> np.ndarray:
    """Absolute percentage error as a fraction: |pred - meas| / meas."""
    pred, meas = np.asarray(pred, float), np.asarray(meas, float)
    return np.abs(pred - meas) / meas


def ape_summary(errors: np.ndarray, prefix: str = "") -> dict[str, float]:
    e = np.asarray(errors, float)
    if e.size == 0:
        return {f"{prefix}ape_median": float("nan"), f"{prefix}ape_p90": float("nan"),
                f"{prefix}ape_max": float("nan"), f"{prefix}n": 0}
    return {f"{prefix}ape_median": float(np.median(e)), f"{prefix}ape_p90": float(np.quantile(e, 0.9)),
            f"{prefix}ape_max": float(np.max(e)), f"{prefix}n": int(e.size)}


def params_to_theta(params: Mapping[str, Any]) -> np.ndarray:
    """theta = (eff_m, eff_c, log p, launch_us, eff_gemv, eff_attn); an absent or None
    memory_gemv or memory_attention is eff_m."""
    m = params["efficiency.memory"]
    return np.array([m, params["efficiency.compute"], math.log(params["efficiency.roofline_sharpness"]),
                     params["overheads.kernel_launch_us"], *(m if params.get(k) is None else params[k] for k in RATES)])


def theta_to_params(theta: Sequence[float], tied: Sequence[str] = ()) -> dict[str, Any]:
    """The profile fields of theta; the RATES named in `tied` are None (same as memory)."""
    return {"efficiency.memory": float(theta[0]), "efficiency.compute": float(theta[1]),
            "efficiency.roofline_sharpness": float(math.exp(theta[2])),
            "overheads.kernel_launch_us": float(theta[3]),
            **{k: None if k in tied else float(theta[4 + i]) for i, k in enumerate(RATES)}}


def efficiency_of(params: Mapping[str, Any], base: Efficiency | None = None) -> Efficiency:
    """The fitted fields of `params` over `base`'s others (attention_blocks; default split_kv)."""
    fitted = dict(memory=params["efficiency.memory"], compute=params["efficiency.compute"],
                  roofline_sharpness=params["efficiency.roofline_sharpness"], memory_gemv=params.get(GEMV),
                  memory_attention=params.get(ATTN))
    return Efficiency(**fitted) if base is None else dataclasses.replace(base, **fitted)


def with_params(hw: HardwareProfile, params: Mapping[str, float], iteration_us: float | None = None) -> HardwareProfile:
    """`hw` with the candidate efficiencies and overheads (the profile the simulator would load).
    No host sampling term (overheads.sampling_row_us): the timed passes end at the softmax."""
    ov = Overheads(kernel_launch_us=params["overheads.kernel_launch_us"],
                   iteration_us=hw.overheads.iteration_us if iteration_us is None else iteration_us)
    return dataclasses.replace(hw, efficiency=efficiency_of(params, hw.efficiency), overheads=ov)


def params_of(hw: HardwareProfile) -> dict[str, float]:
    """A profile's current values of the fitted fields (its datasheet defaults, before a fit)."""
    return {"efficiency.memory": hw.efficiency.memory, "efficiency.compute": hw.efficiency.compute,
            "efficiency.roofline_sharpness": hw.efficiency.roofline_sharpness,
            "overheads.kernel_launch_us": hw.overheads.kernel_launch_us, GEMV: hw.efficiency.memory_gemv,
            ATTN: hw.efficiency.memory_attention}


@dataclass(frozen=True)
class Fit:
    params: dict[str, Any]        # PARAM_NAMES -> value; memory_gemv / memory_attention None when tied to memory
    train_ape: np.ndarray
    rms_log_residual: float
    fixed: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    stderr: dict[str, float] = field(default_factory=dict)   # free parameter -> standard error (its own units)


def fit_log_time(predict: Callable[[dict[str, float]], np.ndarray], measured_s: np.ndarray,
                 fixed: Mapping[str, float] | None = None, p_starts: Sequence[float] = P_STARTS,
                 start: Mapping[str, float] | None = None,
                 jac: Callable[[dict[str, float]], np.ndarray] | None = None) -> Fit:
    """Least squares on log(pred) - log(meas) over the free parameters.

    predict(params) -> predicted seconds for every measured point (same order as measured_s).
    fixed: parameters held at a value (e.g. roofline_sharpness = inf for the max() roofline;
    efficiency.memory_gemv = TIED for one memory rate, when no point is a one-token pass; the same
    for efficiency.memory_attention).
    jac(params) -> [n_points, 5] d log(pred) / d theta[:5], theta = (eff_m, eff_c, log p, launch_us,
    eff_gemv, eff_attn), for predictions without attention (memory_attention fixed); without it
    the Jacobian is taken by finite differences."""
    y = np.log(np.asarray(measured_s, float))
    fixed = dict(fixed or {})
    tied = tuple(k for k in RATES if k in fixed and fixed[k] is TIED)
    free = [i for i, n in enumerate(PARAM_NAMES) if n not in fixed]
    if jac is not None and ATTN not in fixed:
        raise ValueError("an analytic jac covers theta[:5]: hold efficiency.memory_attention fixed")
    base = {"efficiency.memory": 0.7, "efficiency.compute": 0.6, "efficiency.roofline_sharpness": 4.0,
            "overheads.kernel_launch_us": 5.0, GEMV: None, ATTN: None}
    base.update(start or {})
    base.update(fixed)

    def full_theta(x: np.ndarray) -> np.ndarray:
        th = params_to_theta(base)
        th[free] = x
        for k in tied:
            th[PARAM_NAMES.index(k)] = th[0]
        return th

    def resid(x: np.ndarray) -> np.ndarray:
        pred = predict(theta_to_params(full_theta(x), tied))
        return np.log(np.maximum(pred, 1e-12)) - y

    def jac_free(x: np.ndarray) -> np.ndarray:
        J = jac(theta_to_params(full_theta(x), tied))
        if GEMV in tied:              # eff_gemv = eff_m: the one-token rows move with eff_m
            J = J.copy()
            J[:, 0] += J[:, 4]
        return J[:, free]

    best = None
    starts = p_starts if "efficiency.roofline_sharpness" not in fixed else (base["efficiency.roofline_sharpness"],)
    for p0 in starts:
        th0 = params_to_theta({**base, "efficiency.roofline_sharpness": p0})
        x0 = np.clip(th0[free], LOWER[free] + 1e-9, UPPER[free] - 1e-9)
        r = least_squares(resid, x0, jac=jac_free if jac is not None else "2-point", bounds=(LOWER[free], UPPER[free]),
                          method="trf", x_scale=np.maximum(np.abs(x0), 0.1), diff_step=1e-4, max_nfev=200)
        if best is None or r.cost < best.cost:
            best = r
    assert best is not None
    params = theta_to_params(full_theta(best.x), tied)
    pred = predict(params)
    return Fit(params=params, train_ape=ape(pred, measured_s),
               rms_log_residual=float(np.sqrt(np.mean(best.fun ** 2))), fixed=tuple(fixed),
               stderr=_stderr(best, [PARAM_NAMES[i] for i in free], params))


def _stderr(r: OptimizeResult, names: list[str], params: Mapping[str, Any]) -> dict[str, float]:
    """Standard errors of the free parameters from the linearised least squares at the solution:
    cov = (J^T J)^+ s^2, s^2 = residual sum of squares / (points - parameters), J the Jacobian of
    the log residuals. A parameter the points barely move has a large one (a flat direction of the
    loss); one at a bound is not covered by this approximation. The sharpness is fitted as log p:
    its error is p times that of log p."""
    dof = r.fun.size - len(names)
    if dof <= 0 or not names:
        return {}
    J = np.atleast_2d(r.jac)
    cov = np.linalg.pinv(J.T @ J) * float(r.fun @ r.fun) / dof
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    out = {}
    for name, e in zip(names, se):
        out[name] = float(e * params[name]) if name == "efficiency.roofline_sharpness" else float(e)
    return out


def soft_roofline_jac(t_compute: np.ndarray, t_memory: np.ndarray, p: float, eff_m: float, eff_c: float,
                      extra_s: np.ndarray | float = 0.0, one_token: np.ndarray | None = None,
                      eff_gemv: float | None = None) -> np.ndarray:
    """d log(S + extra) / d theta for S = (tc^p + tm^p)^(1/p), tc proportional to 1/eff_c and
    tm to 1/eff_m (to 1/eff_gemv on the rows where one_token is True: a matrix-vector kernel),
    theta = (eff_m, eff_c, log p, launch_us, eff_gemv) with extra = launch_us * 1e-6 (one kernel).
    Normalised by m = max(tc, tm) so nothing underflows: [n, 5]."""
    tc, tm = np.asarray(t_compute, float), np.asarray(t_memory, float)
    m = np.maximum(tc, tm)
    a, b = tc / m, tm / m
    ap, bp = a ** p, b ** p
    sig = ap + bp                                      # in [1, 2]
    S = m * sig ** (1.0 / p)
    pred = S + extra_s
    dS_dtc = a ** (p - 1) * sig ** ((1.0 - p) / p)
    dS_dtm = b ** (p - 1) * sig ** ((1.0 - p) / p)
    with np.errstate(divide="ignore", invalid="ignore"):
        dlogS_dp = -np.log(sig) / p ** 2 + np.nan_to_num((ap * np.log(a) + bp * np.log(b)) / (p * sig))
    one = np.zeros(tc.size, bool) if one_token is None else np.asarray(one_token, bool)
    d_mem = -dS_dtm * tm / np.where(one, eff_m if eff_gemv is None else eff_gemv, eff_m) / pred
    J = np.empty((tc.size, 5))
    J[:, 0] = np.where(one, 0.0, d_mem)
    J[:, 1] = -dS_dtc * tc / eff_c / pred
    J[:, 2] = p * S * dlogS_dp / pred
    J[:, 3] = 1e-6 / pred
    J[:, 4] = np.where(one, d_mem, 0.0)
    return J


def holdout_groups(groups: Sequence[Any], frac: float, seed: int) -> np.ndarray:
    """Boolean mask, True for points whose group is held out: a seeded choice of whole groups
    (e.g. whole context values), at least one and never all of them."""
    g = np.asarray(groups)
    uniq = np.unique(g)
    rng = np.random.default_rng(seed)
    n = int(min(max(1, round(frac * uniq.size)), max(1, uniq.size - 1)))
    held = rng.choice(uniq, size=n, replace=False)
    return np.isin(g, held)
