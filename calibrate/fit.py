"""Fit the cost model to the passes timed on this machine (`calibrate.microbench`).

`fit_device` fits the profile's efficiencies and overheads (`calibrate.least_squares`) on a
seeded ~70 % of the grid's cells and reports the error on the rest; `fit_attention_blocks` does
so once per attention structure and keeps the better one. Each measured pass is priced by the
simulator's own CostModel (`PassPredictor`), so what is fitted is what the simulator charges.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from simulator.hardware.hardware import HardwareProfile

from .least_squares import ATTN, GEMV, TIED, ape, ape_summary, fit_log_time, holdout_groups, params_of, with_params


class PassPredictor:
    """Simulator's CostModel time for each measured pass (rows with role, layers, batch,
    new_tokens, context): the role's spec with num_layers = layers, candidate parameters.
    Target passes score every position (verify); draft passes only the last. The grouping is
    done once, so a least-squares evaluation costs one CostModel per (role, layers).

    one_token: [n] True for the passes with a matrix-vector kernel (one token, or one logit for
    the LM head), whose time depends on efficiency.memory_gemv."""

    def __init__(self, points: pd.DataFrame, specs: Mapping[str, Any], hw: HardwareProfile, dtype: str):
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
        from simulator.costs.cost_model import CostModel
        hw2 = with_params(self.hw, params)
        out = np.empty(self.n)
        for spec, idx, shape in self.groups:
            out[idx] = CostModel(spec, hw2, tp=1, dtype=self.dtype).time_s(*shape)
        return out


def predict_points(points: pd.DataFrame, specs: Mapping[str, Any], hw: HardwareProfile, dtype: str,
                   params: Mapping[str, float]) -> np.ndarray:
    return PassPredictor(points, specs, hw, dtype)(params)


@dataclass(frozen=True)
class DeviceFit:
    params: dict[str, float]
    summary: dict[str, Any]
    points: Any          # DataFrame: every pass point with pred_s, ape, heldout


def fit_device(points: pd.DataFrame, specs: Mapping[str, Any], hw: HardwareProfile, dtype: str,
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


def fit_attention_blocks(points: pd.DataFrame, specs: Mapping[str, Any], hw: HardwareProfile, dtype: str, sm_count: int,
                         sm_source: str, datasheet: HardwareProfile | None = None,
                         **kw: Any) -> tuple[HardwareProfile, DeviceFit, dict[str, Any]]:
    """Fit the device once per attention structure (Efficiency.attention_blocks: split_kv, and
    per_sequence_head over `sm_count` multiprocessors) and keep the one whose fit has the lower
    training residual (rms of log residuals; both have the same free parameters, and the held-out
    points play no part in the choice; a tie keeps split_kv). Returns the profile to build on
    (hw with the chosen structure and sm_count), its fit, and both fits' residuals. datasheet:
    the profile whose own error the fits report (default: hw as given); kw: fit_device's.

    Why both: the timed model's attention is torch's scaled_dot_product_attention with a mask.
    On a GPU its memory-efficient kernel runs one block per (sequence, KV head) and does not
    split the keys, so a pass at batch 1 and 32k context leaves most multiprocessors idle (on an
    H200, 0.86 ms per layer at 32k context for batch 1, 4 and 16 alike: the 4- and 8-layer target
    passes of tests/data/calibration_h200/h200-sxm.calibrated.points.jsonl); other builds or
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


def layer_scaling(df: pd.DataFrame) -> dict[str, Any]:
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

