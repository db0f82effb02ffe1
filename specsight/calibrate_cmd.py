"""`specsight calibrate`, `specsight groundtruth`, `specsight validate`.

    calibrate    time real forward passes on this machine (or read Vidur's tables), fit the cost
                 model's efficiencies and overheads, report held-out error, write a profile YAML
    groundtruth  run real speculative decoding in torch (target + draft, KV caches, exact kernel)
                 and record every round's time and accept lengths
    validate     simulate a ground-truth run with a profile and compare, per (batch, K)

torch is imported only inside the run functions, so `specsight --help` stays fast.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from simulator.errors import SpecsightInputError, require_int, require_range

# NVIDIA/AMD device names (torch.cuda.get_device_name) -> datasheet profile, first match wins.
GPU_NAMES = (("H200", "h200-sxm"), ("H100 PCIe", "h100-pcie"), ("H100", "h100-sxm"), ("B200", "b200"),
             ("A100-SXM4-40GB", "a100-40gb-sxm"), ("A100", "a100-80gb-sxm"), ("L40S", "l40s"), ("L4", "l4"),
             ("4090", "rtx-4090"), ("MI325X", "mi325x"), ("MI300X", "mi300x"))
CPU_SCALE = 8          # --scale default on the CPU: catalog dims / 8 (see docs/calibration.md)
CPU_THREADS = 1        # --threads default on the CPU: stable timings on shared 2-core CI runners
# CPU depths (docs/calibration.md): the target's 8 layers at dims / 8 weigh 142 MB with its LM head,
# a 1-layer draft 20 MB (14 %), about Llama-3.2-1B's share of Llama-3.1-8B's bytes (15 %); with 4
# target layers the draft was 23 % and its LM head (vocabulary 16000) dominated the round.
CPU_LAYERS = 8         # --layers default on the CPU (calibrate times N // 2 and N; groundtruth runs N)
CPU_DRAFT_LAYERS = 1   # draft depth on the CPU: groundtruth's --draft-layers default, and calibrate's
GPU_LAYERS = 4         # --layers default on cuda


def _depths(args: argparse.Namespace, device: str) -> tuple[int, int]:
    """(target layers, draft layers) from --layers/--draft-layers or the device's defaults (an
    unset draft depth: the target's on cuda, CPU_DRAFT_LAYERS on a CPU), both at least 1."""
    n = args.layers if args.layers is not None else (GPU_LAYERS if device == "cuda" else CPU_LAYERS)
    d = args.draft_layers if args.draft_layers is not None else (n if device == "cuda" else CPU_DRAFT_LAYERS)
    for flag, v in (("--layers", n), ("--draft-layers", d)):
        if v < 1:
            raise SpecsightInputError(flag, v, "must be >= 1")
    return n, d


def _ints(s: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in str(s).split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from None


def _device_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda if available, else cpu")
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default=None, help="default: bf16 on cuda, fp32 on cpu")
    p.add_argument("--scale", type=int, default=None,
                   help=f"divide heads, MLP width and vocabulary by this (default: 1 on cuda, {CPU_SCALE} on cpu)")
    p.add_argument("--threads", type=int, default=None,
                   help=f"torch CPU threads (default on cpu: {CPU_THREADS}; 0 = torch's default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--graphs", action=argparse.BooleanOptionalAction, default=None,
                   help="CUDA graphs for the forward passes (default: on for cuda; ignored on cpu)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_parser(subparsers) -> None:
    """Register calibrate, groundtruth and validate on the `specsight` subparsers."""
    p = subparsers.add_parser("calibrate", help="time real forward passes (or read Vidur tables), fit, write a profile")
    p.add_argument("--model", default="llama-3.1-8b", help="catalog model or config.json whose dims are timed")
    p.add_argument("--draft", default=None, help="draft model whose step shapes are timed too (e.g. llama-3.2-1b)")
    p.add_argument("--layers", type=int, default=None,
                   help=f"target timed at N//2 and N layers (default {GPU_LAYERS} on cuda, {CPU_LAYERS} on cpu)")
    p.add_argument("--draft-layers", type=int, default=None,
                   help=f"draft layers timed (default: --layers on cuda, {CPU_DRAFT_LAYERS} on cpu, the ground truth's "
                        f"default draft depth; on cuda pass groundtruth's --draft-layers here to time its draft)")
    p.add_argument("--sweeps", type=int, default=None,
                   help="spread each pass's repeats over this many sweeps through the whole grid, so every pass sees "
                        "the same drifting machine (default: --repeats on cpu, 1 on cuda)")
    p.add_argument("--evict", action=argparse.BooleanOptionalAction, default=None,
                   help="read a last-level-cache-sized buffer before every timed repeat, so each pass streams its "
                        "weights from memory as in a speculative round (default: on for cpu, off for cuda)")
    p.add_argument("--quick", action="store_true", help="small grid (cuda-quick / cpu-quick)")
    p.add_argument("--grid", default=None, help="grid name: cuda, cuda-quick, cpu, cpu-quick, cpu-tiny")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--gpu", default=None, help="base profile: datasheet peaks to fit fractions of (default: from the "
                   "device name); with --from-vidur, the GPU Vidur measured (a100-80gb-sxm)")
    p.add_argument("--stat", choices=("median", "min"), default=None,
                   help="statistic of the repeats that is fitted (default: median on cuda, min on cpu)")
    p.add_argument("--holdout", type=float, default=0.3, help="fraction of grid cells held out (seeded)")
    p.add_argument("--points", default=None, help="JSONL of measured points (default: <out>.points.jsonl); resumed")
    p.add_argument("--from-vidur", metavar="DIR", default=None, help="fit from Vidur profiling data instead of timing")
    p.add_argument("--sku", default="a100", help="with --from-vidur: compute/<sku> folder")
    p.add_argument("--out", required=True, help="profile YAML to write (its name is the file stem)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    _device_args(p)
    p.set_defaults(func=run_calibrate)

    g = subparsers.add_parser("groundtruth", help="real speculative decoding in torch, timed per round")
    g.add_argument("--model", default="llama-3.1-8b")
    g.add_argument("--draft", default="llama-3.2-1b", help="independent draft model (same vocabulary)")
    g.add_argument("--layers", type=int, default=None,
                   help=f"target layers (default {GPU_LAYERS} on cuda, {CPU_LAYERS} on cpu)")
    g.add_argument("--draft-layers", type=int, default=CPU_DRAFT_LAYERS, help=f"draft layers (default {CPU_DRAFT_LAYERS})")
    g.add_argument("--batch", type=_ints, default=(1, 8, 32), help="comma-separated batch sizes")
    g.add_argument("--k", type=_ints, default=(0, 2, 4), help="comma-separated K values (0 = plain decoding)")
    g.add_argument("--steps", type=int, default=None,
                   help="timed rounds per (batch, K) (default: max(16, ceil(256 / batch)), so every configuration "
                        "records at least 256 accept lengths; see calibrate.groundtruth.GTConfig.steps_for)")
    g.add_argument("--warmup", type=int, default=3, help="warm-up rounds per (batch, K), recorded but flagged")
    g.add_argument("--prompt-len", type=int, default=256)
    g.add_argument("--temperature", type=float, default=1.0)
    g.add_argument("--interleave", action=argparse.BooleanOptionalAction, default=True,
                   help="at each batch, run the K values' rounds in turn, each with its own caches, so their "
                        "speedups compare the same stretch of machine time (default: on)")
    g.add_argument("--out", required=True, help="RUN.json, or a folder (DIR/groundtruth.json)")
    g.add_argument("--json", action="store_true")
    _device_args(g)
    g.set_defaults(func=run_groundtruth)

    v = subparsers.add_parser("validate", help="simulate a ground-truth run and compare with what was measured")
    v.add_argument("run", help="groundtruth RUN.json or its folder")
    v.add_argument("--profile", default=None, help="hardware profile (name or YAML; default: datasheet profile of the run's GPU)")
    v.add_argument("--dtype", default=None, choices=["fp32", "fp16", "bf16", "fp8"],
                   help="cost the rounds at this dtype (default: the run's own)")
    v.add_argument("--out", default=None, help="also write the Markdown report here")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=run_validate)


def run(args: argparse.Namespace) -> int:
    return int(args.func(args) or 0)


# ---- shared setup ---------------------------------------------------------------------------
def _setup(args: argparse.Namespace) -> tuple[str, str, int]:
    import torch
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise SpecsightInputError("--device", "cuda", "no CUDA device is visible to torch; use --device cpu")
    dtype = args.dtype or ("bf16" if device == "cuda" else "fp32")
    scale = args.scale or (1 if device == "cuda" else CPU_SCALE)
    if scale < 1:
        raise SpecsightInputError("--scale", scale, "must be an integer >= 1")
    if device == "cpu":
        threads = CPU_THREADS if args.threads is None else args.threads
        if threads > 0:
            torch.set_num_threads(threads)
        _keep_freed_memory()
    torch.manual_seed(args.seed)
    return device, dtype, scale


def _graphs(args: argparse.Namespace, device: str) -> bool:
    return device == "cuda" and (args.graphs is None or bool(args.graphs))


def _keep_freed_memory() -> None:
    """Linux/glibc: keep freed buffers in the process (no mmap for big blocks, no trimming), so
    repeated passes reuse memory instead of paying page faults each time (a server process reaches
    the same state after its first requests). Silently skipped elsewhere."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 30)    # M_MMAP_THRESHOLD
        libc.mallopt(-1, 1 << 40)    # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def _specs(args: argparse.Namespace, scale: int, draft: str | None):
    from calibrate.layers import scaled_spec
    from simulator.model_spec import load_model
    t = scaled_spec(load_model(args.model, field="--model"), scale)
    d = scaled_spec(load_model(draft, field="--draft"), scale) if draft else None
    if d is not None and d.vocab_size != t.vocab_size:
        raise SpecsightInputError("--draft", draft, f"vocabulary {d.vocab_size} differs from the target's {t.vocab_size}")
    return t, d


def guess_gpu_profile(device_name: str) -> str:
    for key, prof in GPU_NAMES:
        if key.lower() in device_name.lower():
            return prof
    raise SpecsightInputError("--gpu", device_name, "unknown GPU: pass --gpu <hardware profile>")


def _print(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, indent=None, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


# ---- calibrate ------------------------------------------------------------------------------
def run_calibrate(args: argparse.Namespace) -> int:
    if args.from_vidur:
        return _calibrate_vidur(args)
    t0 = time.perf_counter()
    device, dtype, scale = _setup(args)
    from calibrate import microbench as mb
    from calibrate.fit import fit_attention_blocks, host_overhead, speculation_rounds, write_profile
    from simulator.hardware import load_profile

    n_layers, draft_layers = _depths(args, device)
    require_int("--repeats", args.repeats, lo=1)
    require_int("--warmup", args.warmup, lo=0)
    require_range("--holdout", args.holdout, 0.0, 1.0, lo_open=True, hi_open=True)    # a fraction of the grid's cells
    evict = device == "cpu" if args.evict is None else bool(args.evict)
    target, draft = _specs(args, scale, args.draft)
    grid_name = args.grid or (f"{device}-quick" if args.quick else device)
    if grid_name not in mb.GRIDS:
        raise SpecsightInputError("--grid", grid_name, f"one of {', '.join(mb.GRIDS)}")
    layers = (max(1, n_layers // 2), n_layers)
    cfg = mb.BenchConfig(target=target, draft=draft, layers=layers, draft_layers=draft_layers,
                         grid=mb.GRIDS[grid_name], device=device, dtype=dtype, warmup=args.warmup,
                         repeats=args.repeats, seed=args.seed, graphs=_graphs(args, device),
                         evict_bytes=mb.last_level_cache_bytes() if evict else 0,
                         sweeps=args.sweeps if args.sweeps is not None else (1 if device == "cuda" else args.repeats))
    if cfg.sweeps < 1:
        raise SpecsightInputError("--sweeps", cfg.sweeps, "must be >= 1")
    out = Path(args.out)
    points_path = Path(args.points) if args.points else out.with_name(out.stem + ".points.jsonl")
    env = mb.environment(device)
    points = mb.measure(cfg, points_path, progress=not (args.no_progress or args.json))
    stat = args.stat or ("median" if device == "cuda" else "min")
    host = host_overhead(points, stat)
    iteration_us = host["iteration_us"]

    peaks = peak_sources = bandwidth_probes = None
    if device == "cuda":
        base = load_profile(args.gpu or guess_gpu_profile(env["device_name"]))
    else:
        weight_bytes = _weight_bytes(target, max(layers), dtype)
        pk = mb.measure_peaks(device, dtype, weight_bytes, repeats=args.repeats, evict=cfg.evictor())
        base = cpu_profile(out.stem, env, pk, dtype)
        peaks = {"memory_bandwidth_tb_s": base.memory_bandwidth_tb_s, "peak_tflops": dict(base.peak_tflops),
                 "memory_capacity_gb": base.memory_capacity_gb}
        peak_sources = dict(base.sources)
        bandwidth_probes = {k: round(v / 1e9, 3) for k, v in pk["read_bytes_s_by_kernel"].items()}
    specs = {"target": target} if draft is None else {"target": target, "draft": draft}
    dispatch = fixed = param_sources = None
    if device == "cpu":     # eager CPU: per-op dispatch is host time, measured rather than fitted
        dispatch = mb.measure_dispatch(target, max(layers), device, dtype)
        fixed = {"overheads.kernel_launch_us": dispatch["kernel_launch_us"]}
        param_sources = {"overheads.kernel_launch_us": (
            f"measured by specsight calibrate on {env['device_name']}: fastest pass of the model's structure at "
            f"negligible width ({dispatch['layers']} layers, {1e3 * dispatch['pass_s']:.2f} ms) / "
            f"{dispatch['kernels']} kernels")}
    sm_source = f"measured by specsight calibrate on {env['device_name']}: {env['sm_count_source']}"
    base, fit, attention_choice = fit_attention_blocks(points, specs, base, dtype, env["sm_count"], sm_source,
                                                       holdout_frac=args.holdout, seed=args.seed, stat=stat, fixed=fixed)
    s = fit.summary
    rounds = speculation_rounds(fit.points, points, host, stat)
    host_by_k = {}
    for p in points:
        if p["role"] == "host":
            host_by_k.setdefault(int(p["new_tokens"]), []).append(1e6 * p[f"{stat}_s"])
    cal = {
        "method": "microbenchmark-fit", **{k: env[k] for k in ("device_name", "driver", "torch", "python") if k in env},
        "dtype": dtype, "cuda_graphs": cfg.graphs, "model": args.model, "draft": args.draft, "scale": scale,
        "target_dims": {k: getattr(target, k) for k in ("hidden_size", "num_heads", "num_kv_heads", "head_dim",
                                                         "intermediate_size", "vocab_size")},
        "layers": list(layers), "draft_layers": cfg.draft_layers,
        "grid": {"name": grid_name, "batches": list(cfg.grid.batches), "new_tokens": list(cfg.grid.new_tokens),
                 "contexts": list(cfg.grid.contexts), "max_tokens": cfg.grid.max_tokens,
                 "max_kv_tokens": cfg.grid.max_kv_tokens},
        "timing": (f"{args.warmup} warm-up + {stat} of {args.repeats} repeats, device synchronised around perf_counter"
                   + (f"; before every timed repeat a {cfg.evict_bytes / 2**20:.0f} MiB read evicts the caches"
                      if cfg.evict_bytes else "")
                   + (f"; the repeats spread over {cfg.n_sweeps} sweeps through the grid" if cfg.n_sweeps > 1 else "")),
        "sweeps": cfg.n_sweeps,
        "evict_bytes": cfg.evict_bytes,
        "n_points": int(len(fit.points)), "points_file": str(points_path), "key": cfg.key,
        "holdout": s["holdout"],
        "residuals": {k: v for k, v in s.items() if k.startswith(("heldout_ape", "train_ape", "datasheet_", "rms_"))},
        "fitted": dict(fit.params),
        "fitted_stderr": s["stderr"],
        "one_token_passes": s["one_token_passes"],
        "memory_attention": s["memory_attention"],
        "attention_blocks": attention_choice,
        "layer_scaling": {k: v for k, v in s["layer_scaling"].items() if k != "cells"},
        "host_round_us_by_k": {str(k): round(float(sorted(v)[len(v) // 2]), 1) for k, v in sorted(host_by_k.items())},
        "host_overhead": host,
        "speculation_rounds": {k: v for k, v in rounds.items() if k != "rows"},
    }
    if dispatch is not None:
        cal["dispatch"] = dispatch
    failed = sorted({p["graphs_failed"] for p in points if p.get("graphs_failed")})
    if failed:
        cal["cuda_graphs_failed"] = failed
    if device == "cpu":
        cal["base_profile"] = "none (a CPU has no datasheet profile: its ceilings were measured here)"
        cal["loadavg_1m_start"] = env.get("loadavg_1m")
        cal["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
        cal["bandwidth_probes_gb_s"] = bandwidth_probes
    src = (f"specsight calibrate on {env['device_name']} ({dtype}, {args.model} dims/{scale}, layers {layers}): "
           f"least squares (log time) on {s['train_n']} passes; held-out median APE "
           f"{100 * s['heldout_ape_median']:.1f} % over {s['heldout_n']}")
    prof = write_profile(out, base, fit.params, calibration=cal, fit_source=src, param_sources=param_sources,
                         iteration_us=iteration_us,
                         iteration_source=(f"measured by specsight calibrate on {env['device_name']}: intercept of a round's "
                                           f"host work (sampling draws, verify_chain, commit) against logit rows "
                                           f"B (2K + 1) and a verify-kernel term for K > 0, {host['n']} points"),
                         sampling_row_us=host["sampling_row_us"],
                         sampling_row_source=(f"measured by specsight calibrate on {env['device_name']}: slope of a round's "
                                              f"host work (sampling draws, verify_chain, commit) against logit rows "
                                              f"B (2K + 1), {host['n']} points, {stat} of repeats"),
                         verify_round_us=host["verify_round_us"],
                         verify_round_source=(f"measured by specsight calibrate on {env['device_name']}: a round's host "
                                              f"work (sampling draws, verify_chain, commit) above the row terms when "
                                              f"K > 0 (the verify kernel's fixed time), {host['n']} points, {stat} of repeats"),
                         peaks=peaks, peak_sources=peak_sources,
                         description=f"{base.description} (calibrated by specsight on {env['device_name']})",
                         header=f"# Calibrated by: specsight calibrate --device {device} --model {args.model}"
                                f"{' --draft ' + args.draft if args.draft else ''} --layers {n_layers} --draft-layers {draft_layers} "
                                f"--grid {grid_name} --scale {scale} --dtype {dtype} --repeats {args.repeats} --sweeps {cfg.n_sweeps}"
                                f"{'' if evict else ' --no-evict'}")
    result = {"profile": str(out), "profile_name": prof.name, "device_name": env["device_name"], "dtype": dtype,
              "heldout_ape_median": s["heldout_ape_median"], "heldout_ape_max": s["heldout_ape_max"],
              "heldout_ape_p90": s["heldout_ape_p90"], "heldout_n": s["heldout_n"],
              "train_ape_median": s["train_ape_median"], "datasheet_ape_median": s["datasheet_ape_median"],
              "heldout_by_role": s["heldout_by_role"], "one_token_passes": s["one_token_passes"],
              "memory_attention": s["memory_attention"], "attention_blocks": attention_choice,
              "fitted": fit.params, "fitted_stderr": s["stderr"], "iteration_us": iteration_us,
              "host_round_us_by_k": cal["host_round_us_by_k"], "host_overhead": host, "dispatch": dispatch,
              "layer_scaling": cal["layer_scaling"], "speculation_rounds": rounds,
              "draft_layers": cfg.draft_layers, "evict_bytes": cfg.evict_bytes,
              "sweeps": cfg.n_sweeps,
              "n_points": cal["n_points"], "points_file": str(points_path),
              "elapsed_s": round(time.perf_counter() - t0, 1)}
    if device == "cpu":
        result["measured_peaks"] = peaks
        result["bandwidth_probes_gb_s"] = bandwidth_probes
    if args.json:
        _print(result)
    else:
        ls = s["layer_scaling"]
        print(prof.describe())
        print(f"fitted (+- standard error): {_fitted_text(fit.params, s['stderr'])}, iteration_us={iteration_us:.1f}, "
              f"sampling_row_us={host['sampling_row_us']:.2f}, verify_round_us="
              + ("not separable from the host points" if host["verify_round_us"] is None else f"{host['verify_round_us']:.1f}"))
        print(f"held-out APE: median {100 * s['heldout_ape_median']:.1f} %, max {100 * s['heldout_ape_max']:.1f} % "
              f"({s['heldout_n']} passes); train median {100 * s['train_ape_median']:.1f} %; "
              f"datasheet defaults median {100 * s['datasheet_ape_median']:.1f} %")
        if ls:
            print(f"layers {ls['layers']}: t({ls['layers'][1]})/t({ls['layers'][0]}) median {ls['median_ratio_t2_t1']:.2f}; "
                  f"per-layer slope error of the fit: median {100 * ls['slope_ape_median']:.1f} %")
        if rounds["n"]:
            w = rounds["worst"]
            print(f"speculative rounds the grid's passes compose (K > 0 round / K = 0 round, fitted model vs measured "
                  f"passes): median |error| {100 * rounds['ratio_err_median_abs']:.1f} %, worst B={w['batch']} K={w['k']} "
                  f"{100 * w['ratio_err']:+.1f} % (negative: the model predicts too high a speedup)")
        print(f"points: {points_path} ({cal['n_points']} passes); {result['elapsed_s']} s")
    return 0


def _fitted_text(params: dict[str, Any], stderr: dict[str, float] | None = None,
                 why_tied: dict[str, str] | None = None) -> str:
    """'efficiency.memory=0.7964 (+- 0.012), ...'; a rate held tied to memory (None) says why."""
    why = {"efficiency.memory_gemv": "no one-token passes", "efficiency.memory_attention": "one context only",
           **(why_tied or {})}
    se = stderr or {}
    return ", ".join((f"{k}={v:.4g}" + (f" (+- {se[k]:.2g})" if k in se else "")) if v is not None
                     else f"{k}=tied to efficiency.memory ({why.get(k, 'not fitted')})" for k, v in params.items())


def _weight_bytes(spec, layers: int, dtype: str) -> int:
    """Bytes of weights a pass streams (layers + LM head): the CPU bandwidth probe's buffer size."""
    import dataclasses
    from simulator.hardware import DTYPE_BYTES
    s = dataclasses.replace(spec, num_layers=layers)
    return int((s.layer_params_dense_part + s.lm_head_params) * DTYPE_BYTES[dtype])


def cpu_profile(name: str, env: dict, pk: dict, dtype: str):
    """A base profile for a CPU whose ceilings were just measured (no datasheet)."""
    from simulator.hardware import Efficiency, HardwareProfile, Interconnect, Overheads
    try:
        ram_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError, AttributeError):
        ram_gb = 1.0
    who = f"measured by specsight calibrate on {env['device_name']}"
    bw = pk["read_bytes_s"]
    return HardwareProfile(
        name=name, description=f"CPU: {env['device_name']}", vendor="cpu",
        memory_capacity_gb=round(ram_gb, 2), memory_bandwidth_tb_s=bw / 1e12,
        peak_tflops={dtype: pk["matmul_flops_s"] / 1e12},
        interconnect=Interconnect("none", bw / 1e9, 0.0),
        efficiency=Efficiency(1.0, 1.0, 4.0), overheads=Overheads(0.0, 0.0),
        sources={"memory_capacity_gb": f"{who}: physical memory (os.sysconf)",
                 "memory_bandwidth_tb_s": (f"{who}: matrix-vector product over a {pk['read_buffer_bytes'] / 1e6:.0f} MB "
                                           f"fp32 buffer (the timed model's weight bytes), bytes read / fastest time, the "
                                           f"faster of two orientations: {pk['read_kernel']}"),
                 f"peak_tflops.{dtype}": f"{who}: best of square {dtype} matmuls (fastest: {pk['matmul_size']}^3), fastest time",
                 "interconnect.bandwidth_gb_s": "no interconnect (one CPU); placeholder = measured read bandwidth, unused at tp = 1",
                 "interconnect.latency_us": "no interconnect (one CPU); unused at tp = 1",
                 "efficiency.memory": "fit", "efficiency.compute": "fit", "efficiency.roofline_sharpness": "fit",
                 "overheads.kernel_launch_us": "fit", "overheads.iteration_us": "measured"})


def _calibrate_vidur(args: argparse.Namespace) -> int:
    from calibrate.vidur import fit_vidur, table_markdown, write_vidur_profile
    gpu = args.gpu or "a100-80gb-sxm"
    if not Path(args.from_vidur).is_dir():
        raise SpecsightInputError("--from-vidur", args.from_vidur, "must be a folder laid out as Vidur's data/profiling")
    fit = fit_vidur(args.from_vidur, sku=args.sku, gpu=gpu)
    prof = write_vidur_profile(fit, args.out, args.from_vidur)
    s = fit.summary()
    s["profile"] = str(args.out)
    if args.json:
        _print(s)
    else:
        print(prof.describe())
        print(f"fitted: {_fitted_text(fit.params, why_tied={'efficiency.memory_attention': 'linear operators only'})}")
        print(f"held-out (leave-one-model-out) APE: median {100 * s['heldout_ape_median']:.1f} %, max "
              f"{100 * s['heldout_ape_max']:.1f} %; knee (64-512 tokens) median {100 * s['heldout_knee_ape_median']:.1f} %")
        if fit.allreduce:
            a = fit.allreduce
            print(f"all-reduce ({a['topology']}): {a['bandwidth_gb_s']:.1f} GB/s, {a['latency_us']:.1f} us per collective; "
                  f"median APE {100 * a['ape_median']:.1f} % (datasheet {100 * a['datasheet_ape_median']:.1f} %)")
        print(table_markdown(fit.table))
    return 0


# ---- groundtruth ----------------------------------------------------------------------------
def run_groundtruth(args: argparse.Namespace) -> int:
    device, dtype, scale = _setup(args)
    from calibrate.groundtruth import GTConfig, run_groundtruth as gt_run, write_run
    if any(b < 1 for b in args.batch) or any(k < 0 for k in args.k) or not args.batch or not args.k:
        raise SpecsightInputError("--batch/--k", f"{args.batch}/{args.k}", "batches >= 1, K >= 0")
    if args.prompt_len < 3:
        raise SpecsightInputError("--prompt-len", args.prompt_len, "must be >= 3")
    if args.steps is not None:
        require_int("--steps", args.steps, lo=1)
    require_int("--warmup", args.warmup, lo=0)
    require_range("--temperature", args.temperature, 0.0, lo_open=True)   # sampling from softmax(logits / T)
    target, draft = _specs(args, scale, args.draft if any(k > 0 for k in args.k) else None)
    cfg = GTConfig(batches=tuple(args.batch), ks=tuple(args.k), steps=args.steps, warmup=args.warmup,
                   prompt_len=args.prompt_len, temperature=args.temperature, seed=args.seed,
                   interleave=args.interleave)
    n_layers, draft_layers = _depths(args, device)
    run = gt_run(target, draft, target_layers=n_layers, draft_layers=draft_layers, device=device,
                 dtype=dtype, cfg=cfg, graphs=_graphs(args, device), progress=not (args.no_progress or args.json))
    run["provenance"]["arguments"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(args).items()
                                      if k not in ("func",) and not callable(v)}
    run["provenance"]["scale"] = scale
    run["target"]["catalog"] = args.model
    if run.get("draft"):
        run["draft"]["catalog"] = args.draft
    path = write_run(run, args.out)
    rows = []
    for r in run["runs"]:
        timed = [x for x in r["rounds"] if not x["warmup"]]
        walls = sorted(x["wall_s"] for x in timed)
        acc = [a for x in timed for a in x["accepted"]]
        rows.append({"batch": r["batch"], "k": r["k"], "rounds": len(timed),
                     "median_round_ms": 1e3 * walls[len(walls) // 2],
                     "mean_accepted": sum(acc) / len(acc) if acc else 0.0})
    if args.json:
        _print({"run": str(path), "device_name": run["provenance"]["device_name"], "configs": rows})
    else:
        print(f"wrote {path}")
        for r in rows:
            print(f"  B={r['batch']:>4} K={r['k']}: median round {r['median_round_ms']:.2f} ms, "
                  f"mean accepted {r['mean_accepted']:.2f} over {r['rounds']} rounds")
    return 0


# ---- validate -------------------------------------------------------------------------------
def run_validate(args: argparse.Namespace) -> int:
    from calibrate.groundtruth import load_run
    from calibrate.validate import report_markdown, validate
    try:
        run = load_run(args.run)
    except (OSError, ValueError, json.JSONDecodeError) as e:
        raise SpecsightInputError("run", args.run, f"a groundtruth RUN.json or folder ({e})") from None
    profile = args.profile
    if profile is None:
        if run["provenance"].get("device") != "cuda":
            raise SpecsightInputError("--profile", None, "a CPU run needs its calibrated profile (--profile PATH.yaml)")
        profile = guess_gpu_profile(run["provenance"]["device_name"])
    table, summary = validate(run, profile, dtype=args.dtype)
    md = report_markdown(table, summary)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(md)
    if args.json:
        _print({**summary, "rows": json.loads(table.to_json(orient="records"))})
    else:
        print(md)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (python -m specsight.calibrate_cmd ...) until specsight.cli wires it in."""
    parser = argparse.ArgumentParser(prog="specsight")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return run(args)
    except SpecsightInputError as e:
        print(f"specsight: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
