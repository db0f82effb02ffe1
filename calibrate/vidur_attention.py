"""The cost model's attention term against Vidur's A100 FlashAttention timings.

Vidur (microsoft/vidur commit acb95f6, MIT licence) timed Sarathi's FlashAttention wrapper on an
A100 (flash_attn_with_kvcache over a paged KV cache of 16-token blocks, fp16, CUDA kernel time
from Kineto, milliseconds per layer): decode passes of `batch_size` sequences, one new token each
over `kv_cache_size` cached tokens, and prefill chunks of `prefill_chunk_size` tokens of one
sequence over `kv_cache_size` cached tokens. The repository's reduced copy is
data/vidur-profiling/compute/a100/attention-legacy/attention.csv (scripts/reduce_vidur_attention.py).

Each row is priced with the cost model's attention op class on a one-layer `ModelSpec` of the
row's shape (`simulator.costs.pass_time.attention_time_s`, the `attention` entry of `CostModel.breakdown`): B sequences
of n new tokens over c cached tokens,

    FLOPs = (4 h d_head / tp) B n (c + (n + 1) / 2)      KV bytes = kv_bytes_per_token B (c + 2 n)
    t = soft_roofline(FLOPs / (peak eff_compute), bytes / (bandwidth eff_memory_attention / wave))
        + overheads.kernel_launch_us                      (one attention kernel per layer)

(wave: CostModel.kv_wave_factor, 1 for split-KV attention). What is fitted are the attention
rates only: efficiency.memory_attention and the fixed time per attention kernel (the field the
cost model charges per kernel, overheads.kernel_launch_us: Kineto times device kernels, so here
it is the kernel's fixed device time, not a host launch cost). Held out: the decode rows of one
band of contexts are predicted by a fit on the other bands (every row out of sample).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.common.errors import SpecsightInputError
from simulator.common.input_files import read_csv_frame
from simulator.common.paths import REPO_ROOT
from simulator.costs.cost_model import PREFILL_QUERY_TILE, CostModel, soft_roofline
from simulator.costs.pass_shape import causal_pairs
from simulator.costs.pass_time import attention_time_s
from simulator.hardware.hardware import HardwareProfile, load_profile
from simulator.models.model_spec import ModelSpec

from .least_squares import ATTN, ape, fit_log_time, params_of, with_params
from .vidur import SHARED_DIR, SHIPPED_DIR

RELATIVE = Path("compute") / "a100" / "attention-legacy" / "attention.csv"
SHAPE = ("n_embd", "n_q_head", "n_kv_head", "num_tensor_parallel_workers")
DECODE_COL, PREFILL_COL = "time_stats.attn_decode.median", "time_stats.attn_prefill.median"
DTYPE = "fp16"                      # Vidur profiles in fp16
A100_SM_COUNT = 108                 # NVIDIA A100 whitepaper: 108 SMs on the A100 (SXM4 and PCIe)
# Bands (lo, hi inclusive) of the error tables.
BATCH_BANDS = ((1, 3), (4, 15), (16, 31), (32, 63), (64, 128))
CONTEXT_BANDS = ((0, 256), (257, 1024), (1025, 2048), (2049, 4096))
CHUNK_BANDS = ((64, 128), (129, 512), (513, 1024), (1025, 2048), (2049, 4096))
HELDOUT_GOAL = 0.10                 # goal: the decode attention's median APE on rows held out of the fit
LAUNCH = "overheads.kernel_launch_us"


def default_csv() -> Path:
    """The repository's reduced copy, else the full table in ../shared/data/vidur-profiling."""
    for root in (SHIPPED_DIR, SHARED_DIR, REPO_ROOT.parent.parent / "shared" / "data" / "vidur-profiling"):
        if (root / RELATIVE).is_file():
            return root / RELATIVE
    raise FileNotFoundError(f"Vidur attention timings not found: {SHIPPED_DIR / RELATIVE}")


def load_attention(path: str | Path | None = None) -> pd.DataFrame:
    """One row per measured (shape, kind, batch, new tokens, context): the median of the repeated
    rows' medians, in seconds. Columns: the SHAPE columns, kind ('decode' | 'prefill'), batch,
    new_tokens (1 for decode, the chunk for prefill), context (tokens cached per sequence), time_s."""
    f = Path(path) if path is not None else default_csv()
    if not f.is_file():
        raise SpecsightInputError("attention csv", str(f), "Vidur's attention.csv (or its reduced copy)")
    raw = read_csv_frame(f, "--from-vidur")
    need = set(SHAPE) | {"batch_size", "kv_cache_size", "prefill_chunk_size", DECODE_COL, PREFILL_COL}
    if need - set(raw.columns):
        raise SpecsightInputError("attention csv", str(f), f"columns {sorted(need)}")
    frames = []
    for kind, col in (("decode", DECODE_COL), ("prefill", PREFILL_COL)):
        sub = raw[raw[col].notna() & (raw[col] > 0)]
        new = np.ones(len(sub), int) if kind == "decode" else sub["prefill_chunk_size"].to_numpy(int)
        frames.append(pd.DataFrame({**{c: sub[c].to_numpy(int) for c in SHAPE}, "kind": kind,
                                    "batch": sub["batch_size"].to_numpy(int), "new_tokens": new,
                                    "context": sub["kv_cache_size"].to_numpy(int),
                                    "time_s": sub[col].to_numpy(float) * 1e-3}))
    df = pd.concat(frames, ignore_index=True)
    keys = [*SHAPE, "kind", "batch", "new_tokens", "context"]
    return df.groupby(keys, as_index=False, sort=True)["time_s"].median()


def model_of(shape: Sequence[int]) -> ModelSpec:
    """A one-layer model of (n_embd, n_q_head, n_kv_head, tp)'s attention (head_dim = n_embd / heads);
    the other dimensions do not enter the attention term."""
    d, h, kv = (int(x) for x in shape[:3])
    return ModelSpec(f"vidur-attention-{d}-{h}-{kv}", hidden_size=d, num_layers=1, num_heads=h, num_kv_heads=kv,
                     head_dim=d // h, intermediate_size=1, vocab_size=1)


def price(df: pd.DataFrame, hw: HardwareProfile) -> np.ndarray:
    """Seconds per layer for every row: the cost model's attention op (pass_time.attention_time_s,
    CostModel.breakdown's 'attention' entry) plus its one kernel's overheads.kernel_launch_us."""
    out = np.empty(len(df))
    for shape, at in df.groupby(list(SHAPE), sort=False).indices.items():     # positions of each shape's rows
        g = df.iloc[at]
        cm = CostModel(model_of(shape), hw, tp=int(shape[3]), dtype=DTYPE)
        B, n, c = (g[k].to_numpy(float) for k in ("batch", "new_tokens", "context"))
        decode = (g["kind"] == "decode").to_numpy()
        # the num_seqs time_s is given: the decode sequences, or the prefill chunk's query tiles (attention_rows)
        rows = np.where(decode, B, -(-(B * n * cm.query_group) // PREFILL_QUERY_TILE))
        T, cached = B * n, B * c
        out[at] = (attention_time_s(cm.pass_constants(rows), T, cached, causal_pairs(T, cached, B))
                   + hw.overheads.kernel_launch_us * 1e-6)
    return out


def per_head_waves(hw: HardwareProfile, sm_count: int = A100_SM_COUNT) -> HardwareProfile:
    """hw with attention_blocks per_sequence_head over sm_count multiprocessors (kv_wave_factor)."""
    eff = dataclasses.replace(hw.efficiency, attention_blocks="per_sequence_head")
    return dataclasses.replace(hw, efficiency=eff, sm_count=sm_count)


def fit_rates(df: pd.DataFrame, hw: HardwareProfile) -> dict[str, Any]:
    """efficiency.memory_attention and overheads.kernel_launch_us (the attention kernel's fixed
    time) by least squares on log time; every other field of hw held as it is."""
    fixed = {k: v for k, v in params_of(hw).items() if k not in (ATTN, LAUNCH)}   # memory_gemv None: TIED
    f = fit_log_time(lambda p: price(df, with_params(hw, p)), df["time_s"].to_numpy(), fixed=fixed,
                     start={ATTN: hw.efficiency.memory_kv, LAUNCH: 10.0})
    return {ATTN: f.params[ATTN], LAUNCH: f.params[LAUNCH], "stderr": f.stderr}


def fitted(hw: HardwareProfile, rates: Mapping[str, Any]) -> HardwareProfile:
    return with_params(hw, {**params_of(hw), ATTN: rates[ATTN], LAUNCH: rates[LAUNCH]})


def prefill_class_time_s(df: pd.DataFrame, hw: HardwareProfile, x: Sequence[float]) -> np.ndarray:
    """A prefill-class kernel's time with its own rates, which the cost model does not have:
    x = (compute fraction of the attention FLOPs, weight of a causal (diagonal) query-key pair
    relative to a cached one, fixed us per kernel); the KV reads at hw's attention rate.
    FLOPs = (4 h d_head / tp) B n (c + w (n + 1) / 2)."""
    eff_c, w, fixed_us = x
    out = np.empty(len(df))
    for shape, at in df.groupby(list(SHAPE), sort=False).indices.items():
        g = df.iloc[at]
        cm = CostModel(model_of(shape), hw, tp=int(shape[3]), dtype=DTYPE)
        B, n, c = (g[k].to_numpy(float) for k in ("batch", "new_tokens", "context"))
        cached, causal = B * n * c, causal_pairs(B * n, 0, B)
        t_c = cm.attn_flops_per_pair * (cached + w * causal) / (hw.peak_flops(DTYPE) * eff_c)
        t_m = cm.kv_bytes_per_token * B * (c + 2 * n) / cm.bw_kv_bytes_s
        out[at] = soft_roofline(t_c, t_m, cm.p) + fixed_us * 1e-6
    return out


def fit_prefill_class(df: pd.DataFrame, hw: HardwareProfile) -> tuple[np.ndarray, np.ndarray]:
    """prefill_class_time_s's x fitted on log time, and each context band's rows predicted by a
    fit on the other bands: (x on all rows, held-out predictions)."""
    from scipy.optimize import least_squares
    lo, hi = np.array([1e-3, 0.25, 0.0]), np.array([1.0, 8.0, 1000.0])

    def fit(sub: pd.DataFrame) -> np.ndarray:
        y = np.log(sub["time_s"].to_numpy())
        return least_squares(lambda x: np.log(prefill_class_time_s(sub, hw, x)) - y, [0.5, 1.0, 10.0],
                             bounds=(lo, hi), x_scale=[0.1, 1.0, 10.0]).x

    band = band_index(df["context"].to_numpy(), CONTEXT_BANDS)
    held = np.full(len(df), np.nan)
    for i in np.unique(band[band >= 0]):
        test = band == i
        held[test] = prefill_class_time_s(df[test].reset_index(drop=True), hw, fit(df[~test].reset_index(drop=True)))
    return fit(df), held


def band_index(values: np.ndarray, bands: Sequence[tuple[int, int]]) -> np.ndarray:
    """The index of each value's band (-1: none)."""
    out = np.full(len(values), -1)
    for i, (lo, hi) in enumerate(bands):
        out[(values >= lo) & (values <= hi)] = i
    return out


def heldout_by_context(df: pd.DataFrame, hw: HardwareProfile,
                       bands: Sequence[tuple[int, int]] = CONTEXT_BANDS) -> tuple[np.ndarray, list[dict]]:
    """Each context band's rows predicted by a fit on the other bands: (predictions, fits)."""
    band = band_index(df["context"].to_numpy(), bands)
    pred = np.full(len(df), np.nan)
    fits = []
    for i in np.unique(band[band >= 0]):
        test = band == i
        rates = fit_rates(df[~test].reset_index(drop=True), hw)
        pred[test] = price(df[test].reset_index(drop=True), fitted(hw, rates))
        fits.append({"held_out_context": list(bands[i]), ATTN: rates[ATTN], LAUNCH: rates[LAUNCH]})
    return pred, fits


def band_table(df: pd.DataFrame, err: np.ndarray, rows: str, row_bands: Sequence[tuple[int, int]],
               col_bands: Sequence[tuple[int, int]] = CONTEXT_BANDS) -> pd.DataFrame:
    """Median APE per (row band of df[rows], context band), with an 'all' row and column."""
    r = band_index(df[rows].to_numpy(), row_bands)
    c = band_index(df["context"].to_numpy(), col_bands)
    names = [f"{lo}-{hi}" for lo, hi in col_bands] + ["all"]
    table = {}
    for i, (lo, hi) in list(enumerate(row_bands)) + [(-2, ("all", ""))]:
        in_row = r >= 0 if i == -2 else r == i
        cells = []
        for j in list(range(len(col_bands))) + [-2]:
            m = in_row & (c >= 0 if j == -2 else c == j)
            cells.append(float(np.median(err[m])) if m.any() else float("nan"))
        table["all" if i == -2 else f"{lo}-{hi}"] = cells
    return pd.DataFrame.from_dict(table, orient="index", columns=names)


@dataclass(frozen=True)
class AttentionReport:
    decode: pd.DataFrame          # decode rows with pred_* and ape_* columns
    prefill: pd.DataFrame         # prefill rows likewise
    rates: dict[str, Any]         # the fit on all decode rows
    waves_rates: dict[str, Any]   # the same with attention_blocks per_sequence_head
    prefill_class: np.ndarray     # prefill_class_time_s's x fitted on the prefill rows (not in the cost model)
    fold_fits: list[dict]         # the held-out fits, one per context band
    base: str

    def tables(self) -> dict[str, pd.DataFrame]:
        """Median APE tables: decode (batch band x context band) and prefill (chunk x context)."""
        d, p = self.decode, self.prefill
        out = {f"decode_{k}": band_table(d, d[f"ape_{k}"].to_numpy(), "batch", BATCH_BANDS)
               for k in ("datasheet", "heldout", "waves_heldout")}
        out.update({f"prefill_{k}": band_table(p, p[f"ape_{k}"].to_numpy(), "new_tokens", CHUNK_BANDS)
                    for k in ("datasheet", "fit", "class_heldout")})
        return out

    def summary(self) -> dict[str, Any]:
        d, p = self.decode, self.prefill
        med = {f"decode_{k}_ape_median": float(np.median(d[f"ape_{k}"])) for k in
               ("datasheet", "fit", "heldout", "waves_fit", "waves_heldout")}
        med.update({f"prefill_{k}_ape_median": float(np.median(p[f"ape_{k}"]))
                    for k in ("datasheet", "fit", "class_fit", "class_heldout")})
        # predicted / measured, median: below 1 where the model prices the kernels too fast
        med.update({f"{name}_datasheet_ratio_median": float(np.median(f["pred_datasheet"] / f["time_s"]))
                    for name, f in (("decode", d), ("prefill", p))})
        return {"base_profile": self.base, "decode_points": int(len(d)), "prefill_points": int(len(p)),
                **med, "heldout_goal": HELDOUT_GOAL,
                "heldout_goal_met": med["decode_heldout_ape_median"] <= HELDOUT_GOAL,
                "holdout": "leave-one-context-band-out: " + ", ".join(f"{lo}-{hi}" for lo, hi in CONTEXT_BANDS),
                "fitted": {ATTN: self.rates[ATTN], LAUNCH: self.rates[LAUNCH]},
                "fitted_stderr": self.rates["stderr"],
                "fitted_per_sequence_head": {ATTN: self.waves_rates[ATTN], LAUNCH: self.waves_rates[LAUNCH],
                                             "sm_count": A100_SM_COUNT},
                "heldout_fits": self.fold_fits,
                "prefill_class_fitted": dict(zip(("compute_fraction", "causal_pair_weight", "fixed_us"),
                                                 (float(v) for v in self.prefill_class)))}


def attention_report(path: str | Path | None = None, gpu: str = "a100-80gb-sxm") -> AttentionReport:
    """Datasheet error, the fit on all decode rows, and its error held out by context band; the
    same for the per-(sequence, KV head) wave model; the prefill rows priced by both."""
    hw = load_profile(gpu)
    df = load_attention(path)
    dec = df[df["kind"] == "decode"].reset_index(drop=True)
    pre = df[df["kind"] == "prefill"].reset_index(drop=True)
    if dec.empty:
        raise SpecsightInputError("attention csv", str(path), "decode rows (time_stats.attn_decode.median)")
    rates = fit_rates(dec, hw)
    held, folds = heldout_by_context(dec, hw)
    waves = per_head_waves(hw)
    waves_rates = fit_rates(dec, waves)
    waves_held, _ = heldout_by_context(dec, waves)
    dec = dec.assign(pred_datasheet=price(dec, hw), pred_fit=price(dec, fitted(hw, rates)), pred_heldout=held,
                     pred_waves_fit=price(dec, fitted(waves, waves_rates)), pred_waves_heldout=waves_held)
    fit_hw = fitted(hw, rates)
    x, class_held = fit_prefill_class(pre, fit_hw)
    pre = pre.assign(pred_datasheet=price(pre, hw), pred_fit=price(pre, fit_hw),
                     pred_class_fit=prefill_class_time_s(pre, fit_hw, x), pred_class_heldout=class_held)
    for frame, keys in ((dec, ("datasheet", "fit", "heldout", "waves_fit", "waves_heldout")),
                        (pre, ("datasheet", "fit", "class_fit", "class_heldout"))):
        for k in keys:
            frame[f"ape_{k}"] = ape(frame[f"pred_{k}"], frame["time_s"])
    return AttentionReport(dec, pre, rates, waves_rates, x, folds, hw.name)


def table_markdown(table: pd.DataFrame, rows: str) -> str:
    """A band table as Markdown (median APE, %)."""
    lines = [f"| {rows} \\ context | " + " | ".join(table.columns) + " |",
             "| --- |" + " ---: |" * len(table.columns)]
    for name, r in table.iterrows():
        lines.append(f"| {name} | " + " | ".join("-" if np.isnan(v) else f"{100 * v:.1f} %" for v in r) + " |")
    return "\n".join(lines)
