"""Fit the cost model's achieved fractions and overheads to measured times; write a profile.

What is fitted is exactly what the simulator uses: predictions come from a `predict(params)`
callable that builds a `HardwareProfile` with candidate `Efficiency`/`Overheads` and asks the
simulator's own `CostModel` (or its `soft_roofline`, for single operators) for times.

Parameters (the profile fields they land in):
    efficiency.memory, efficiency.compute     achieved fractions of the peaks, in (0, 1]
    efficiency.roofline_sharpness             p of the soft roofline (t_c^p + t_m^p)^(1/p), >= 1
    overheads.kernel_launch_us                fixed time per kernel of a forward pass
    efficiency.memory_gemv                    bandwidth fraction of one-token (matrix-vector) weight
                                              streaming, in (0, 1]; fitted only when the points include
                                              one-token passes, else tied to efficiency.memory (None)
    efficiency.memory_attention               bandwidth fraction of attention's KV-cache reads, in
                                              (0, 1]; fitted only when the points span two or more
                                              contexts, else tied to efficiency.memory (None)

The fit minimises log-time residuals (scipy.optimize.least_squares, trust-region reflective,
bounded), so a 10 us kernel and a 10 ms pass weigh alike; it restarts from a few sharpness
values because p makes the problem mildly non-convex. Held-out error is the absolute
percentage error |pred - meas| / meas on points the fit never saw.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import yaml
from scipy.optimize import least_squares

from simulator.hardware import Efficiency, HardwareProfile, Overheads, load_profile

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
# of float64 underflow for op times down to 1 ns (simulator.cost_model.soft_roofline raises t to
# the power p directly). The sharp max() roofline is compared with p = inf, not with P_MAX.
P_MAX = 32.0
LOWER = np.array([1e-3, 1e-3, 0.0, 0.0, 1e-3, 1e-3])      # theta = (eff_m, eff_c, log p, launch_us, eff_gemv, eff_attn)
UPPER = np.array([1.0, 1.0, math.log(P_MAX), 1000.0, 1.0, 1.0])
P_STARTS = (2.0, 4.0, 12.0)


def ape(pred, meas) -> np.ndarray:
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


def _stderr(r, names: list[str], params: Mapping[str, Any]) -> dict[str, float]:
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


def _round(x: Any, nd: int = 6) -> Any:
    """Round floats for YAML (so the file reads well); recurse into containers."""
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, str):
        return str(x)          # plain str (torch.__version__ is a str subclass YAML cannot write)
    if isinstance(x, float):
        return float(f"{x:.{nd}g}")
    if isinstance(x, Mapping):
        return {str(k): _round(v, nd) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_round(v, nd) for v in x]
    if isinstance(x, np.generic):
        return _round(x.item(), nd)
    return x


def write_profile(path: str | Path, base: HardwareProfile, params: Mapping[str, float], *,
                  calibration: Mapping[str, Any], fit_source: str, description: str | None = None,
                  iteration_us: float | None = None, iteration_source: str | None = None,
                  sampling_row_us: float | None = None, sampling_row_source: str | None = None,
                  verify_round_us: float | None = None, verify_round_source: str | None = None,
                  peaks: Mapping[str, Any] | None = None, peak_sources: Mapping[str, str] | None = None,
                  interconnect: Mapping[str, float] | None = None, interconnect_source: str | None = None,
                  header: str = "", param_sources: Mapping[str, str] | None = None) -> HardwareProfile:
    """Write a calibrated profile (same schema as hardware_profiles/*.yaml, name = file stem),
    then load it back with simulator.hardware.load_profile to prove the simulator can use it.

    peaks: replaces datasheet figures (memory_bandwidth_tb_s, peak_tflops, memory_capacity_gb),
    e.g. measured CPU ceilings; each replaced number takes its source from peak_sources.
    param_sources: sources of fitted-field values that were measured, not fitted (default: fit_source)."""
    path = Path(path)
    d = base.to_dict()
    d["name"] = path.stem
    if description is not None:
        d["description"] = description
    sources = dict(d["sources"])
    for k, v in (peaks or {}).items():
        d[k] = dict(v) if isinstance(v, Mapping) else v
        for leaf in ([f"{k}.{kk}" for kk in v] if isinstance(v, Mapping) else [k]):
            sources[leaf] = (peak_sources or {}).get(leaf, "measured by specsight calibrate")
        if isinstance(v, Mapping):   # drop sources of dtypes no longer present
            for s in [s for s in sources if s.startswith(f"{k}.") and s.split(".", 1)[1] not in v]:
                del sources[s]
    d["efficiency"] = with_params(base, params).to_dict()["efficiency"]     # (to_dict drops the absent fields)
    d["overheads"] = {"kernel_launch_us": params["overheads.kernel_launch_us"],
                      "iteration_us": d["overheads"]["iteration_us"] if iteration_us is None else iteration_us}
    for key, value, source in (("sampling_row_us", sampling_row_us, sampling_row_source),
                               ("verify_round_us", verify_round_us, verify_round_source)):
        if value is not None:             # absent: no such term (the cost model's default)
            d["overheads"][key] = value
            sources[f"overheads.{key}"] = source or "measured by specsight calibrate"
        else:
            sources.pop(f"overheads.{key}", None)
    for k in PARAM_NAMES:
        if k not in RATES or params.get(k) is not None:
            sources[k] = (param_sources or {}).get(k, fit_source)
        else:
            sources.pop(k, None)
    if iteration_us is not None:
        sources["overheads.iteration_us"] = iteration_source or "measured by specsight calibrate"
    if interconnect is not None:
        d["interconnect"] = {**d["interconnect"], **interconnect}
        for k in interconnect:
            if k != "kind":
                sources[f"interconnect.{k}"] = interconnect_source or "fitted by specsight calibrate"
    d["sources"] = sources
    cal = {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), **calibration}
    cal["base_profile"] = cal.get("base_profile", base.name)
    d["calibration"] = cal
    d = _round(d)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(d, sort_keys=False, width=120, allow_unicode=True)
    path.write_text((header.rstrip() + "\n" if header else "") + text)
    return load_profile(str(path))


# ---- fitting the microbenchmark grid (calibrate on this machine) -----------------------------
class PassPredictor:
    """Simulator's CostModel time for each measured pass (rows with role, layers, batch,
    new_tokens, context): the role's spec with num_layers = layers, candidate parameters.
    Target passes score every position (verify); draft passes only the last. The grouping is
    done once, so a least-squares evaluation costs one CostModel per (role, layers).

    one_token: [n] True for the passes with a matrix-vector kernel (one token, or one logit for
    the LM head), whose time depends on efficiency.memory_gemv."""

    def __init__(self, points, specs: Mapping[str, Any], hw: HardwareProfile, dtype: str):
        self.hw, self.dtype, self.n = hw, dtype, len(points)
        self.groups = []
        self.one_token = np.zeros(self.n, bool)
        for (role, layers), idx in points.groupby(["role", "layers"]).indices.items():
            sub = points.iloc[idx]
            B = sub["batch"].to_numpy(float)
            n = sub["new_tokens"].to_numpy(float)
            c = sub["context"].to_numpy(float)
            logits = n if role == "target" else np.ones_like(n)
            shape = (B * n, B * c, B * (n * c + n * (n + 1) / 2), B * logits, B)
            self.one_token[idx] = (shape[0] == 1) | (shape[3] == 1)
            self.groups.append((dataclasses.replace(specs[role], num_layers=int(layers)), idx, shape))

    def __call__(self, params: Mapping[str, float]) -> np.ndarray:
        from simulator.cost_model import CostModel
        hw2 = with_params(self.hw, params)
        out = np.empty(self.n)
        for spec, idx, shape in self.groups:
            out[idx] = CostModel(spec, hw2, tp=1, dtype=self.dtype).time_s(*shape)
        return out


def predict_points(points, specs: Mapping[str, Any], hw: HardwareProfile, dtype: str,
                   params: Mapping[str, float]) -> np.ndarray:
    return PassPredictor(points, specs, hw, dtype)(params)


@dataclass(frozen=True)
class DeviceFit:
    params: dict[str, float]
    summary: dict[str, Any]
    points: Any          # DataFrame: every pass point with pred_s, ape, heldout


def fit_device(points, specs: Mapping[str, Any], hw: HardwareProfile, dtype: str,
               holdout_frac: float = 0.3, seed: int = 0, stat: str = "median",
               fixed: Mapping[str, float] | None = None, datasheet: HardwareProfile | None = None) -> DeviceFit:
    """Fit on a seeded ~70 % of the grid cells (batch, new tokens, context: one cell's passes at
    every layer count and role stay on one side), report the error on the other ~30 %.

    fixed: parameters measured directly instead of fitted (e.g. the CPU's per-kernel dispatch
    time, `microbench.measure_dispatch`), held at their value.
    datasheet: the profile whose own values datasheet_ape_median reports (default: hw).

    stat: which statistic of the repeats is the measured time, "median" or "min" (a shared CPU:
    interference from other processes only ever adds time, so the minimum estimates the pass's
    own cost; Python's timeit documentation gives the same advice)."""
    import pandas as pd
    df = pd.DataFrame(points)
    df = df[df["role"].isin(list(specs))].reset_index(drop=True)
    if stat not in ("median", "min"):
        raise ValueError(f"stat must be 'median' or 'min', not {stat!r}")
    df["median_s"] = df[f"{stat}_s"]        # the statistic fitted and compared, whatever its name
    cells = [f"{b}:{n}:{c}" for b, n, c in zip(df["batch"], df["new_tokens"], df["context"])]
    held = holdout_groups(cells, holdout_frac, seed)
    train = df[~held].reset_index(drop=True)
    predictor = PassPredictor(train, specs, hw, dtype)
    fixed = dict(fixed or {})
    if not predictor.one_token.any():
        fixed.setdefault(GEMV, TIED)      # nothing to fit the one-token rate on
    if train["context"].nunique() < 2:
        fixed.setdefault(ATTN, TIED)      # nothing tells the KV reads' rate from the weights'
    f = fit_log_time(predictor, train["median_s"].to_numpy(), fixed=fixed)
    df["pred_s"] = predict_points(df, specs, hw, dtype, f.params)
    sheet = hw if datasheet is None else datasheet        # the uncalibrated profile, as shipped
    df["pred_datasheet_s"] = predict_points(df, specs, sheet, dtype, params_of(sheet))
    df["ape"] = ape(df["pred_s"], df["median_s"])
    df["heldout"] = held
    h = df[held]
    s: dict[str, Any] = {}
    s.update({f"heldout_{k}": v for k, v in ape_summary(h["ape"].to_numpy()).items()})
    s.update({f"train_{k}": v for k, v in ape_summary(df[~held]["ape"].to_numpy()).items()})
    s["datasheet_ape_median"] = float(np.median(ape(df["pred_datasheet_s"], df["median_s"])))
    s["heldout_by_role"] = {r: float(np.median(g["ape"])) for r, g in h.groupby("role")}
    one = PassPredictor(df, specs, hw, dtype).one_token
    s["one_token_passes"] = {"train": int((one & ~held).sum()), "heldout": int((one & held).sum()),
                             "heldout_ape_median": float(np.median(df["ape"][one & held])) if (one & held).any()
                             else float("nan"),
                             "memory_gemv": "fitted" if f.params.get(GEMV) is not None else "tied to memory"}
    s["memory_attention"] = "fitted" if f.params.get(ATTN) is not None else "tied to memory"
    s["rms_log_residual_train"] = f.rms_log_residual
    s["stderr"] = f.stderr
    s["holdout"] = f"seeded {int(round(100 * holdout_frac))} % of grid cells (seed {seed})"
    s["statistic"] = f"{stat} of repeats"
    s["layer_scaling"] = layer_scaling(df)
    return DeviceFit(f.params, s, df)


def with_attention_blocks(hw: HardwareProfile, blocks: str, sm_count: int,
                          sm_source: str = "measured") -> HardwareProfile:
    """`hw` with efficiency.attention_blocks = blocks and sm_count (with its source)."""
    return dataclasses.replace(hw, efficiency=dataclasses.replace(hw.efficiency, attention_blocks=blocks),
                               sm_count=int(sm_count), sources={**hw.sources, "sm_count": sm_source})


def fit_attention_blocks(points, specs: Mapping[str, Any], hw: HardwareProfile, dtype: str, sm_count: int,
                         sm_source: str, datasheet: HardwareProfile | None = None,
                         **kw) -> tuple[HardwareProfile, DeviceFit, dict[str, Any]]:
    """Fit the device once per attention structure (Efficiency.attention_blocks: split_kv, and
    per_sequence_head over `sm_count` multiprocessors) and keep the one whose fit has the lower
    training residual (rms of log residuals; both have the same free parameters, and the held-out
    points play no part in the choice; a tie keeps split_kv). Returns the profile to build on
    (hw with the chosen structure and sm_count), its fit, and both fits' residuals. datasheet:
    the profile whose own error the fits report (default: hw as given); kw: fit_device's.

    Why both: the timed model's attention is torch's scaled_dot_product_attention with a mask.
    On a GPU its memory-efficient kernel runs one block per (sequence, KV head) and does not
    split the keys, so a pass at batch 1 and 32k context leaves most multiprocessors idle (seen on
    an H200: 0.86 ms per layer at 32k context for batch 1, 4 and 16 alike); other builds or
    devices may split. The data decide, by the stated rule."""
    fits = {}
    for blocks in ("split_kv", "per_sequence_head"):
        base = with_attention_blocks(hw, blocks, sm_count, sm_source)
        fits[blocks] = (base, fit_device(points, specs, base, dtype, datasheet=datasheet or hw, **kw))
    rms = {b: f.summary["rms_log_residual_train"] for b, (_, f) in fits.items()}
    chosen = "per_sequence_head" if rms["per_sequence_head"] < rms["split_kv"] else "split_kv"
    report = {"chosen": chosen, "sm_count": int(sm_count),
              "rule": "lower training rms log residual (held-out points not used; a tie keeps split_kv)",
              **{b: {"rms_log_residual_train": rms[b], "heldout_ape_median": f.summary["heldout_ape_median"],
                     "heldout_ape_max": f.summary["heldout_ape_max"]} for b, (_, f) in fits.items()}}
    base, fit = fits[chosen]
    sources = {k: v for k, v in base.sources.items() if k != "efficiency.attention_blocks"}
    if chosen != "split_kv":        # (absent: split_kv, which needs no source)
        sources["efficiency.attention_blocks"] = (
            f"chosen by specsight calibrate: fitted both ways, training rms log residual {rms[chosen]:.4f} "
            f"against {rms['split_kv']:.4f} for split_kv")
    return dataclasses.replace(base, sources=sources), fit, report


def layer_scaling(df) -> dict[str, Any]:
    """Target cells timed at two layer counts: the per-layer slope (t2 - t1) / (L2 - L1), the
    intercept t1 - L1 * slope (embedding, LM head, softmax, host), and the fitted model's slope."""
    t = df[df["role"] == "target"]
    counts = sorted(t["layers"].unique())
    if len(counts) < 2:
        return {}
    l1, l2 = counts[0], counts[-1]
    on = ["batch", "new_tokens", "context"]
    j = pd.merge(t[t["layers"] == l1], t[t["layers"] == l2], on=on, how="inner",
                 suffixes=("_1", "_2")).set_index(on)
    if j.empty:
        return {}
    slope = (j["median_s_2"] - j["median_s_1"]) / (l2 - l1)
    pslope = (j["pred_s_2"] - j["pred_s_1"]) / (l2 - l1)
    inter = j["median_s_1"] - l1 * slope
    rows = [{"batch": int(i[0]), "new_tokens": int(i[1]), "context": int(i[2]),
             "t1_ms": 1e3 * r.median_s_1, "t2_ms": 1e3 * r.median_s_2, "slope_ms_per_layer": 1e3 * s_,
             "pred_slope_ms_per_layer": 1e3 * p_, "intercept_ms": 1e3 * c_}
            for i, r, s_, p_, c_ in zip(j.index, j.itertuples(), slope, pslope, inter)]
    return {"layers": [int(l1), int(l2)], "n_cells": len(j),
            "median_ratio_t2_t1": float(np.median(j["median_s_2"] / j["median_s_1"])),
            "median_slope_share_of_t2": float(np.median(l2 * slope / j["median_s_2"])),
            "slope_ape_median": float(np.median(ape(pslope, slope.clip(lower=1e-9)))),
            "negative_slopes": int((slope <= 0).sum()),
            "cells": rows}


def host_overhead(points, stat: str = "median") -> dict[str, Any]:
    """Per-round host time outside the forward passes, from the "host" points (one round's
    sampling and bookkeeping at batch B and K; calibrate.groundtruth.host_work_fn).

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

    NOTE: fitted with one intercept (no c), the intercept takes the verify kernel's fixed time
    (0.37-0.45 ms on the development VM) into every iteration, and a K = 0 round, whose host work
    measured 0.2-0.26 ms at batch 1, is charged 0.4-0.5 ms. per_row_us: the slope against rows =
    B (K + 1) with one intercept, the earlier model, for comparison."""
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


def host_design(batch, k) -> np.ndarray:
    """The host model's rows [1, B (2K + 1), K > 0] (iteration, sampling rows, verify round),
    one per (batch, k); arrays or numbers."""
    B, K = np.atleast_1d(np.asarray(batch, float)), np.atleast_1d(np.asarray(k, float))
    return np.column_stack([np.ones_like(B), B * (2 * K + 1), (K > 0).astype(float)])


def host_round_us(host: Mapping[str, Any], batch: int, k: int) -> float:
    """The host fit's time of one round (host_overhead) on host_design's row, absent terms 0, as
    the cost model charges it."""
    coef = [host.get(key) or 0.0 for key in ("iteration_us", "sampling_row_us", "verify_round_us")]
    return float(host_design(batch, k)[0] @ coef)


def speculation_rounds(df, points, host: Mapping[str, Any], stat: str = "median") -> dict[str, Any]:
    """The rounds of speculative decoding the grid's passes compose, measured and as the fitted
    model prices them: a check of the fit on the quantity that decides whether speculation pays.

    At every grid batch B and context c, and every K of the host points (`Grid.sampling_ks`) whose
    passes are all in the grid, a round is

        K = 0   target pass of B x 1 tokens (the deepest target timed) + host work (B, 0)
        K > 0   draft step of B x 2 tokens (the first, catching up) + (K - 1) draft steps of B x 1
                + target verify pass of B x (K + 1) tokens + host work (B, K)

    measured: the passes' and host points' own times (`stat` of the repeats), no model; model: the
    fitted passes (df["pred_s"], `fit_device`) + the host fit a + b B (2K + 1) + c [K > 0], what
    the simulator charges (`CostModel.round_overhead_s` and the per-logit sampling rows).

    ratio = round(B, K) / round(B, 0) at the same c: a K-round's cost in plain-decoding rounds; the
    speedup is tokens per round / ratio, so a ratio error e moves the predicted speedup by
    1 / (1 + e) - 1 whatever the acceptance. ratio_err = model / measured - 1 (negative: the model
    prices speculation cheaper than the passes measured, and predicts too high a speedup).

    NOTE: why. On the development VM the fit's pass errors are small (held-out median 4-7 %) but
    not uniform in the number of tokens: in runs S..W (docs/calibration.md) the composed measured
    passes put 29 of the 30 (run, B, K > 0) points of the ground truth on their measured side of 1
    while the fitted model's ratio at B = 32, K = 4 was 9-16 % low and at B = 1, K = 4 4-12 % low,
    where the two ground-truth sign misses sat. This reports that bias before any ground-truth run."""
    targets = df[df["role"] == "target"]
    if targets.empty:
        return {"rows": [], "n": 0}
    lmax = int(targets["layers"].max())
    draft_layers = sorted(df.loc[df["role"] == "draft", "layers"].unique())
    dl = int(draft_layers[-1]) if draft_layers else None
    idx = {(r.role, int(r.layers), int(r.batch), int(r.new_tokens), int(r.context)): (r.median_s, r.pred_s)
           for r in df.itertuples()}
    host_t = {(int(p["batch"]), int(p["new_tokens"])): float(p[f"{stat}_s"]) for p in points if p["role"] == "host"}

    def round_times(B: int, K: int, ctx: int):
        parts = [("target", lmax, B, K + 1, ctx, 1)]
        if K > 0:
            if dl is None:
                return None
            parts += [("draft", dl, B, 2, ctx, 1)] + ([("draft", dl, B, 1, ctx, K - 1)] if K > 1 else [])
        if any(p[:5] not in idx for p in parts) or (B, K) not in host_t:
            return None
        meas = sum(idx[p[:5]][0] * p[5] for p in parts) + host_t[(B, K)]
        model = sum(idx[p[:5]][1] * p[5] for p in parts) + 1e-6 * host_round_us(host, B, K)
        return meas, model

    ks = sorted({k for (_, k) in host_t})
    rows = []
    for B in sorted(targets["batch"].unique()):
        for ctx in sorted(targets["context"].unique()):
            base = round_times(int(B), 0, int(ctx))
            if base is None:
                continue
            for K in ks:
                rt = round_times(int(B), K, int(ctx)) if K else None
                if rt is None:
                    continue
                rm, rp = rt[0] / base[0], rt[1] / base[1]
                rows.append({"batch": int(B), "k": int(K), "context": int(ctx),
                             "measured_round_ms": 1e3 * rt[0], "model_round_ms": 1e3 * rt[1],
                             "measured_ratio": rm, "model_ratio": rp, "ratio_err": rp / rm - 1.0})
    if not rows:
        return {"rows": [], "n": 0}
    t = pd.DataFrame(rows)
    by = t.groupby(["batch", "k"])["ratio_err"].median()
    worst = by.abs().idxmax()
    return {"rows": rows, "n": len(rows), "target_layers": lmax, "draft_layers": dl,
            "ratio_err_by_batch_k": {f"B={bb} K={kk}": float(v) for (bb, kk), v in by.items()},
            "ratio_err_median_abs": float(np.median(np.abs(t["ratio_err"]))),
            "ratio_err_max_abs": float(np.max(np.abs(t["ratio_err"]))),
            "worst": {"batch": int(worst[0]), "k": int(worst[1]), "ratio_err": float(by[worst])}}
