"""Fit the cost model's coefficients from Vidur's operator profiles (real A100/A40 timings).

Vidur (microsoft/vidur, MIT licence) profiles each operator of a transformer layer on real GPUs
(fp16, CUDA kernel time from the PyTorch profiler, median over repeats, milliseconds) across
`num_tokens` (tokens in the pass) and tensor-parallel degree. Its directory layout:

    compute/<sku>/<org>/<model>/mlp.csv      time_stats.<op>.median, n_head, n_kv_head, n_embd,
                                             n_expanded_embd, use_gated_mlp, num_tokens,
                                             num_tensor_parallel_workers
    network/<topology>/all_reduce.csv        time_stats.all_reduce.median, num_workers,
                                             size (bytes), devices_per_node

Linear operators are GEMMs of T tokens by a weight sharded over tp GPUs (Vidur's
ColumnParallelLinear / RowParallelLinear):

    attn_pre_proj   d -> (h + 2 kv) hd / tp        attn_post_proj  h hd / tp -> d
    mlp_up_proj     d -> (2 if gated) I / tp       mlp_down_proj   I / tp -> d

with FLOPs = 2 T in out and bytes = 2 (in out + T (in + out)) (fp16 weights read once, fp16
activations read and written). Each op is timed by the simulator's own `soft_roofline` plus one
kernel's fixed time: exactly the linear term of `CostModel` for a single GEMM.

The all-reduce is fitted with the CostModel's ring model: t = 2 (n-1)/n bytes / bw + 2 (n-1) lat.

Held-out error: leave-one-model-out (fit on the other models, predict the held-out one), so
every model's error is out of sample; the shipped profile is the fit on all models.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from simulator.common.errors import SpecsightInputError
from simulator.common.input_files import read_csv_frame
from simulator.common.paths import REPO_ROOT
from simulator.costs.cost_model import CostModel, soft_roofline
from simulator.hardware.hardware import HardwareProfile, Interconnect, load_profile
from simulator.models.model_spec import ModelSpec

from .least_squares import ATTN, GEMV, TIED, ape, ape_summary, efficiency_of, fit_log_time, params_of

LINEAR_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
BYTES_FP16 = 2
# Bands of tokens in the pass: decode, the knee (where speculation's verify pass lives), prefill.
BANDS = (("1-32", 1, 32), ("64-512", 64, 512), ("1k+", 1024, 10 ** 9))
SHIPPED_DIR = REPO_ROOT / "data" / "vidur-profiling"
SHARED_DIR = REPO_ROOT.parent / "shared" / "data" / "vidur-profiling"
# Intra-node topology whose all-reduce data describes each SKU's HGX/DGX NVLink fabric.
TOPOLOGY = {"a100": "a100_dgx"}
SHARP = {"efficiency.roofline_sharpness": float("inf")}   # the classic max() roofline, for comparison


def default_data_dir() -> Path:
    """The repository's copy (data/vidur-profiling), else ../shared/data/vidur-profiling."""
    for d in (SHIPPED_DIR, SHARED_DIR):
        if (d / "compute").is_dir():
            return d
    raise FileNotFoundError(f"Vidur profiling data not found in {SHIPPED_DIR} or {SHARED_DIR}")


def op_dims(row: Mapping[str, Any], op: str, tp: int) -> tuple[int, int]:
    """(in, out) features of `op` on one tensor-parallel shard."""
    d, h, kv, inner = int(row["n_embd"]), int(row["n_head"]), int(row["n_kv_head"]), int(row["n_expanded_embd"])
    hd = d // h
    gated = str(row["use_gated_mlp"]).strip().lower() in ("true", "1")
    if op == "attn_pre_proj":
        return d, (h + 2 * kv) * hd // tp
    if op == "attn_post_proj":
        return h * hd // tp, d
    if op == "mlp_up_proj":
        return d, (2 if gated else 1) * inner // tp
    if op == "mlp_down_proj":
        return inner // tp, d
    raise ValueError(op)


def geometric_tokens(tokens: np.ndarray) -> np.ndarray:
    """Mask of token counts that are 2^i or 1.5 x 2^i (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, ...).

    Vidur's grid is linear (every 8 tokens up to 1024, then every 16, 32, 256): a fit on every
    row would weigh the compute-bound prefill range ~10x more than decode and the knee; the
    geometric subset weighs each octave of T alike."""
    t = np.asarray(tokens, dtype=np.int64)
    pow2 = (t & (t - 1)) == 0
    s = t // 3
    three_halves = (t % 3 == 0) & (s > 0) & ((s & (s - 1)) == 0) & (t >= 24)
    return pow2 | three_halves


def load_compute(data_dir: str | Path, sku: str, tokens: str = "geometric") -> pd.DataFrame:
    """One row per (model, linear op, num_tokens, tp): measured seconds, FLOPs and bytes.
    tokens: "geometric" (the subset of geometric_tokens) or "all" rows."""
    root = Path(data_dir) / "compute" / sku
    files = sorted(root.glob("*/*/mlp.csv"))
    if not files:
        raise SpecsightInputError("--sku", sku, f"no {root}/<org>/<model>/mlp.csv files")
    frames = []
    for f in files:
        raw = read_csv_frame(f, "--from-vidur")
        model = f"{f.parent.parent.name}/{f.parent.name}"
        for op in LINEAR_OPS:
            col = f"time_stats.{op}.median"
            if col not in raw:
                continue
            sub = raw[["num_tokens", "num_tensor_parallel_workers", col]].copy()
            sub = sub.groupby(["num_tokens", "num_tensor_parallel_workers"], as_index=False)[col].median()
            dims = raw.iloc[0]
            tp = sub["num_tensor_parallel_workers"].to_numpy()
            io = np.array([op_dims(dims, op, int(t)) for t in tp])
            T = sub["num_tokens"].to_numpy(float)
            frames.append(pd.DataFrame({
                "model": model, "op": op, "num_tokens": T.astype(int), "tp": tp.astype(int),
                "in_features": io[:, 0], "out_features": io[:, 1],
                "time_s": sub[col].to_numpy(float) * 1e-3,
                "flops": 2.0 * T * io[:, 0] * io[:, 1],
                "bytes": BYTES_FP16 * (io[:, 0] * io[:, 1] + T * (io[:, 0] + io[:, 1])),
            }))
    df = pd.concat(frames, ignore_index=True)
    keep = df["time_s"] > 0
    if tokens == "geometric":
        keep &= geometric_tokens(df["num_tokens"].to_numpy())
    elif tokens != "all":
        raise ValueError(f"tokens must be 'geometric' or 'all', not {tokens!r}")
    return df[keep].reset_index(drop=True)


def load_allreduce(data_dir: str | Path, topology: str) -> pd.DataFrame:
    """Intra-node all-reduce times (all workers on one node): num_workers, bytes, seconds."""
    f = Path(data_dir) / "network" / topology / "all_reduce.csv"
    if not f.exists():
        raise SpecsightInputError("topology", topology, f"no {f}")
    raw = read_csv_frame(f, "--from-vidur")
    raw = raw[(raw["devices_per_node"] == raw["num_workers"]) & (raw["num_workers"] > 1)]
    return pd.DataFrame({"num_workers": raw["num_workers"].astype(int).to_numpy(),
                         "bytes": raw["size"].astype(float).to_numpy(),
                         "time_s": raw["time_stats.all_reduce.median"].to_numpy(float) * 1e-3})


def memory_fraction(df: pd.DataFrame, params: Mapping[str, Any]) -> np.ndarray:
    """Per op row: efficiency.memory_gemv where the op is a matrix-vector product (one token:
    cuBLAS's GEMV kernel), efficiency.memory otherwise (the CostModel's linear term)."""
    e = efficiency_of(params)
    return np.where(df["num_tokens"].to_numpy() == 1, e.memory_one_token, e.memory)


def predict_ops(df: pd.DataFrame, hw: HardwareProfile, params: Mapping[str, Any], dtype: str = "fp16") -> np.ndarray:
    """Seconds per op: the simulator's soft roofline over one GEMM plus one kernel's fixed time."""
    F = hw.peak_flops(dtype) * params["efficiency.compute"]
    W = hw.memory_bandwidth_bytes_s * memory_fraction(df, params)
    t = soft_roofline(df["flops"].to_numpy() / F, df["bytes"].to_numpy() / W, params["efficiency.roofline_sharpness"])
    return t + params["overheads.kernel_launch_us"] * 1e-6


def jac_ops(df: pd.DataFrame, hw: HardwareProfile, params: Mapping[str, Any], dtype: str = "fp16") -> np.ndarray:
    """Analytic d log(predict_ops) / d theta (see calibrate.least_squares.soft_roofline_jac)."""
    from .least_squares import soft_roofline_jac
    em, ec = params["efficiency.memory"], params["efficiency.compute"]
    tc = df["flops"].to_numpy() / (hw.peak_flops(dtype) * ec)
    tm = df["bytes"].to_numpy() / (hw.memory_bandwidth_bytes_s * memory_fraction(df, params))
    return soft_roofline_jac(tc, tm, params["efficiency.roofline_sharpness"], em, ec,
                             params["overheads.kernel_launch_us"] * 1e-6,
                             one_token=df["num_tokens"].to_numpy() == 1, eff_gemv=params.get(GEMV))


def band_of(tokens: np.ndarray) -> np.ndarray:
    out = np.full(len(tokens), "", dtype=object)
    for name, lo, hi in BANDS:
        out[(tokens >= lo) & (tokens <= hi)] = name
    return out


def allreduce_time_s(hw: HardwareProfile, num_workers: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """The CostModel's ring all-reduce for one collective of `nbytes` over `num_workers` GPUs."""
    out = np.empty(len(nbytes))
    probe = ModelSpec("allreduce-probe", hidden_size=64 * 64, num_layers=1, num_heads=64, num_kv_heads=64,
                      head_dim=64, intermediate_size=64, vocab_size=64)
    for n in np.unique(num_workers):
        cm = CostModel(probe, hw, tp=int(n))
        m = num_workers == n
        out[m] = cm.ring_factor * nbytes[m] / cm.link_bytes_s + cm.ring_latency_s
    return out


def fit_allreduce(ar: pd.DataFrame, hw: HardwareProfile) -> tuple[float, float, np.ndarray]:
    """(bandwidth GB/s, latency us per ring step, in-sample APE) on log-time residuals."""
    n, b, y = ar["num_workers"].to_numpy(), ar["bytes"].to_numpy(), np.log(ar["time_s"].to_numpy())

    def model(x: np.ndarray) -> np.ndarray:
        ic = Interconnect(hw.interconnect.kind, float(np.exp(x[0])), float(np.exp(x[1])))
        h = dataclasses.replace(hw, interconnect=ic)
        return allreduce_time_s(h, n, b)

    r = least_squares(lambda x: np.log(model(x)) - y, np.log([hw.interconnect.bandwidth_gb_s, 5.0]), method="trf")
    return float(np.exp(r.x[0])), float(np.exp(r.x[1])), ape(model(r.x), ar["time_s"].to_numpy())


@dataclass(frozen=True)
class VidurFit:
    sku: str
    base: HardwareProfile
    params: dict[str, float]              # fit on all models (what the shipped profile carries)
    sharp_params: dict[str, float]        # fit on all models with p = inf (the max() roofline)
    table: pd.DataFrame                   # per (model, band): APE medians, datasheet / sharp / soft
    heldout: pd.DataFrame                 # every op row with its leave-one-model-out prediction
    allreduce: dict[str, Any]
    n_points: int

    def summary(self) -> dict[str, Any]:
        """The JSON `specsight calibrate --from-vidur --json` prints."""
        h = self.heldout
        knee = h[h["band"] == "64-512"]
        out: dict[str, Any] = {"method": "vidur", "sku": self.sku, "base_profile": self.base.name}
        out.update({f"heldout_{k}": v for k, v in ape_summary(h["ape_fit"].to_numpy()).items()})
        out["heldout_knee_ape_median"] = float(np.median(knee["ape_fit"])) if len(knee) else float("nan")
        one = h[h["num_tokens"] == 1]
        out["heldout_one_token_ape_median"] = float(np.median(one["ape_fit"])) if len(one) else float("nan")
        out["datasheet_ape_median"] = float(np.median(h["ape_datasheet"]))
        out["datasheet_knee_ape_median"] = float(np.median(knee["ape_datasheet"])) if len(knee) else float("nan")
        out["fitted"] = {k: (None if v is None else round(v, 6)) for k, v in self.params.items()}
        out["allreduce"] = self.allreduce
        out["n_points"] = self.n_points
        out["holdout"] = "leave-one-model-out"
        return out


def fit_vidur(data_dir: str | Path, sku: str = "a100", gpu: str = "a100-80gb-sxm",
              topology: str | None = None, tokens: str = "geometric", one_token_rate: bool = True) -> VidurFit:
    """Fit on all models; evaluate each model with a fit that never saw it.

    one_token_rate: fit efficiency.memory_gemv on the one-token rows (cuBLAS GEMV); False (or no
    such rows) holds it tied to efficiency.memory (one memory rate)."""
    base = load_profile(gpu)
    df = load_compute(data_dir, sku, tokens=tokens)
    y = df["time_s"].to_numpy()
    band = band_of(df["num_tokens"].to_numpy())
    # linear ops: no KV
    tie = {ATTN: TIED, **({} if one_token_rate and (df["num_tokens"] == 1).any() else {GEMV: TIED})}

    def fit_on(mask: np.ndarray, fixed: Mapping[str, float] | None = None):
        sub = df[mask]
        fixed = {**tie, **(fixed or {})}
        return fit_log_time(lambda p: predict_ops(sub, base, p), sub["time_s"].to_numpy(), fixed=fixed,
                            jac=None if "efficiency.roofline_sharpness" in fixed else (lambda p: jac_ops(sub, base, p)))

    full = fit_on(np.ones(len(df), bool))
    sharp = fit_on(np.ones(len(df), bool), fixed=SHARP)
    pred_fit = np.empty(len(df))
    pred_sharp = np.empty(len(df))
    for model in df["model"].unique():
        test = (df["model"] == model).to_numpy()
        f = fit_on(~test)
        s = fit_on(~test, fixed=SHARP)
        pred_fit[test] = predict_ops(df[test], base, f.params)
        pred_sharp[test] = predict_ops(df[test], base, s.params)
    held = df.assign(band=band, pred_datasheet=predict_ops(df, base, params_of(base)),
                     pred_sharp=pred_sharp, pred_fit=pred_fit)
    for k in ("datasheet", "sharp", "fit"):
        held[f"ape_{k}"] = ape(held[f"pred_{k}"], y)
    table = band_table(held)
    topo = topology or TOPOLOGY.get(sku)
    ar_info: dict[str, Any] = {}
    if topo:
        ar = load_allreduce(data_dir, topo)
        bw, lat, e = fit_allreduce(ar, base)
        ar_info = {"topology": topo, "bandwidth_gb_s": round(bw, 3), "latency_us": round(lat, 3),
                   "n_points": int(len(ar)), "ape_median": float(np.median(e)), "ape_max": float(np.max(e)),
                   "datasheet_ape_median": float(np.median(ape(allreduce_time_s(base, ar["num_workers"].to_numpy(),
                                                                                ar["bytes"].to_numpy()),
                                                              ar["time_s"].to_numpy())))}
    return VidurFit(sku, base, full.params, sharp.params, table, held, ar_info, int(len(df)))


def band_table(held: pd.DataFrame) -> pd.DataFrame:
    """Median APE per model and band (and all bands), for the three predictors."""
    rows = []
    for model, g in list(held.groupby("model")) + [("ALL models", held)]:
        for name in [b[0] for b in BANDS] + ["all"]:
            s = g if name == "all" else g[g["band"] == name]
            if len(s) == 0:
                continue
            rows.append({"model": model, "band": name, "n": len(s),
                         "datasheet": float(np.median(s["ape_datasheet"])),
                         "sharp_fit": float(np.median(s["ape_sharp"])),
                         "soft_fit": float(np.median(s["ape_fit"])),
                         "soft_fit_max": float(np.max(s["ape_fit"]))})
    return pd.DataFrame(rows)


def table_markdown(table: pd.DataFrame) -> str:
    """The per-model, per-band table as Markdown (median APE, %)."""
    lines = ["| model | tokens in pass | n | datasheet defaults | fitted, max() roofline | fitted, soft roofline "
             "| soft, max |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in table.itertuples():
        lines.append(f"| {r.model} | {r.band} | {r.n} | {100 * r.datasheet:.1f} % | {100 * r.sharp_fit:.1f} % | "
                     f"{100 * r.soft_fit:.1f} % | {100 * r.soft_fit_max:.1f} % |")
    return "\n".join(lines)


def write_vidur_profile(fit: VidurFit, out: str | Path, data_dir: str | Path) -> HardwareProfile:
    from .profile_writer import write_profile
    s = fit.summary()
    src = (f"specsight calibrate --from-vidur: least squares (log time) on {fit.n_points} Vidur {fit.sku.upper()} "
           f"linear-operator timings (microsoft/vidur data/profiling/compute/{fit.sku}, fp16, MIT licence); "
           f"leave-one-model-out median APE {100 * s['heldout_ape_median']:.1f} %, knee (64-512 tokens) "
           f"{100 * s['heldout_knee_ape_median']:.1f} %, one-token ops (GEMV; efficiency.memory_gemv "
           f"{'fitted on them' if fit.params.get(GEMV) is not None else 'tied to efficiency.memory'}) "
           f"{100 * s['heldout_one_token_ape_median']:.1f} %")
    cal = {
        "method": "vidur-operator-fit",
        "device_name": f"NVIDIA {fit.sku.upper()} (Vidur profiling data)",
        "data": f"microsoft/vidur data/profiling/compute/{fit.sku} and network/{fit.allreduce.get('topology', '-')}",
        "data_dir": str(data_dir),
        "note": ("Vidur times CUDA kernels with the PyTorch profiler: kernel_launch_us here is the fixed "
                 "device time per kernel, not the host launch cost of an eager engine"),
        "models": sorted(fit.heldout["model"].unique().tolist()),
        "ops": list(LINEAR_OPS),
        "n_points": fit.n_points,
        "holdout": "leave-one-model-out",
        "residuals": {k: v for k, v in s.items() if k.startswith(("heldout_", "datasheet_"))},
        "fitted": dict(fit.params),
        "fitted_sharp_roofline": dict(fit.sharp_params),
        "allreduce": fit.allreduce,
    }
    ic = None
    if fit.allreduce:
        ic = {"bandwidth_gb_s": fit.allreduce["bandwidth_gb_s"], "latency_us": fit.allreduce["latency_us"]}
    return write_profile(
        out, fit.base, fit.params, calibration=cal, fit_source=src,
        description=f"{fit.base.description}, calibrated from Vidur's {fit.sku.upper()} operator profiles",
        interconnect=ic,
        interconnect_source=(f"specsight fit (ring model, log-time least squares) of Vidur "
                             f"network/{fit.allreduce.get('topology')}/all_reduce.csv, intra-node rows; "
                             f"median APE {100 * fit.allreduce.get('ape_median', float('nan')):.1f} %") if ic else None,
        header=(f"# Calibrated from real {fit.sku.upper()} operator timings "
                f"(microsoft/vidur profiling data, MIT licence).\n"
                f"# Written by: specsight calibrate --from-vidur DIR --sku {fit.sku} --gpu {fit.base.name}. "
                f"Do not edit by hand; rerun the command."))


def trim_copy(src: str | Path, dst: str | Path, sku: str = "a100",
              topologies: tuple[str, ...] = ("a100_dgx",)) -> list[Path]:
    """Copy the columns this module reads (the median of every operator, the dimensions, the
    token count and TP degree; for all-reduce the median, size and worker layout) from a Vidur
    data/profiling folder, values unchanged (copied as text). What data/vidur-profiling holds."""
    import csv
    src, dst = Path(src), Path(dst)
    written = []

    def copy(f: Path, keep: Callable[[str], bool]) -> None:
        out = dst / f.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        with f.open(newline="") as fin, out.open("w", newline="") as fout:
            r = csv.reader(fin)
            head = next(r)
            idx = [i for i, h in enumerate(head) if keep(h)]
            w = csv.writer(fout, lineterminator="\n")
            w.writerow([head[i] for i in idx])
            for row in r:
                w.writerow([row[i] for i in idx])
        written.append(out)

    dims = {"n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp", "num_tokens",
            "num_tensor_parallel_workers"}
    for f in sorted((src / "compute" / sku).glob("*/*/mlp.csv")):
        copy(f, lambda h: h in dims or (h.startswith("time_stats.") and h.endswith(".median")))
    for topo in topologies:
        copy(src / "network" / topo / "all_reduce.csv",
             lambda h: h in {"time_stats.all_reduce.median", "time_stats.all_reduce.min", "rank", "num_workers",
                             "size", "collective", "devices_per_node", "max_devices_per_node"})
    return written
