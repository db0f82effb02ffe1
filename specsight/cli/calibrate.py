"""`specsight calibrate`: time real forward passes on this machine (or read Vidur's tables), fit the
cost model's efficiencies and overheads, report held-out error, write a profile YAML
(calibrate.pipeline.calibrate_profile / calibrate_from_vidur).

Flags follow the names every command uses (specsight/cli/args.py): --hardware NAME|YAML (aliases
--gpu, --profile), --out, --json (specsight/cli/emit.py writes it). The pass grid is --passes NAME;
--grid NAME is its alias (a scenario-override grid, --grid KEY=V1,V2, does not apply to calibrate).
The device flags (--device, --dtype, --scale, --threads, --seed, --graphs) are shared with
`specsight groundtruth` (add_device_args, machine_config). Every flag and --out are checked before
torch is imported or a pass is timed.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from calibrate.grids import GRIDS
from calibrate.machine import CPU_DRAFT_LAYERS, CPU_LAYERS, CPU_SCALE, CPU_THREADS, GPU_LAYERS, MachineConfig
from simulator.common.atomic_files import write_text
from simulator.common.errors import SpecsightInputError

from .args import add_hardware, add_json, add_set, check_out_file, scenario_overrides
from .emit import emit_json


def add_device_args(p: argparse.ArgumentParser) -> None:
    """--device, --dtype, --scale, --threads, --seed, --graphs, --no-progress (calibrate, groundtruth)."""
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


def machine_config(args: argparse.Namespace) -> MachineConfig:
    return MachineConfig(device=args.device, dtype=args.dtype, scale=args.scale, threads=args.threads,
                         seed=args.seed, graphs=args.graphs)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
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
    p.add_argument("--quick", action="store_true", help="the device's quick pass grid (cuda-quick / cpu-quick)")
    p.add_argument("--passes", "--grid", dest="passes", metavar="NAME", default=None,
                   help=f"pass grid: {', '.join(GRIDS)} (default: the device's; alias --grid NAME)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    add_hardware(p, help="base profile whose datasheet peaks the fit takes fractions of (default: the device "
                         "name's; with --from-vidur, the GPU Vidur measured, a100-80gb-sxm)")
    p.add_argument("--stat", choices=("median", "min"), default=None,
                   help="statistic of the repeats that is fitted (default: median on cuda, min on cpu)")
    p.add_argument("--holdout", type=float, default=0.3, help="fraction of grid cells held out (seeded)")
    p.add_argument("--points", default=None, help="JSONL of measured points (default: <out>.points.jsonl); resumed")
    p.add_argument("--attention", choices=("torch", "vllm"), default="torch",
                   help="the passes' attention: torch's SDPA (default) or vLLM's own CPU kernels, loaded from "
                        "--engine-venv (for a profile that predicts vLLM's CPU engine; docs/calibration.md)")
    p.add_argument("--engine-venv", default=".venv-vllm",
                   help="with --attention vllm: vLLM's environment (default .venv-vllm, made by "
                        "scripts/setup.sh --engine vllm)")
    p.add_argument("--from-vidur", metavar="DIR", default=None, help="fit from Vidur profiling data instead of timing")
    p.add_argument("--sku", default="a100", help="with --from-vidur: compute/<sku> folder")
    p.add_argument("--out", required=True, help="profile YAML to write (its name is the file stem)")
    p.add_argument("--from-bench", nargs="+", metavar="FILE", default=None,
                   help="fit an engine's host constants from its serving benchmark's result files instead "
                        "(vllm bench serve --save-result JSON; sglang.bench_serving --output-file JSONL); "
                        "--out is the engine profile YAML (docs/engines.md)")
    p.add_argument("--from-groundtruth", metavar="FILE", default=None,
                   help="fit vLLM's host time on a CPU from `specsight groundtruth --engine vllm`'s results file "
                        "(the smallest model's runs); --out is data/engine_host/vllm-<version>-cpu.yaml "
                        "(docs/engines.md)")
    p.add_argument("--engine", choices=("vllm", "sglang"), default=None,
                   help="with --from-bench: whose benchmark; with --from-groundtruth: vllm")
    p.add_argument("--scenario", metavar="YAML", default=None,
                   help="with --from-bench: the deployment the runs were made on (model, GPU, drafter, engine.version)")
    add_set(p)
    add_json(p)
    add_device_args(p)
    p.set_defaults(func=run)


def _fitted_text(params: dict[str, Any], stderr: dict[str, float] | None = None,
                 why_tied: dict[str, str] | None = None) -> str:
    """'efficiency.memory=0.7964 (+- 0.012), ...'; a rate held tied to memory (None) says why."""
    why = {"efficiency.memory_gemv": "no one-token passes", "efficiency.memory_attention": "one context only",
           **(why_tied or {})}
    se = stderr or {}
    return ", ".join((f"{k}={v:.4g}" + (f" (+- {se[k]:.2g})" if k in se else "")) if v is not None
                     else f"{k}=tied to efficiency.memory ({why.get(k, 'not fitted')})" for k, v in params.items())


def run(args: argparse.Namespace) -> int:
    if args.passes is not None and "=" in args.passes:
        raise SpecsightInputError("--grid", args.passes, f"a pass grid name, one of {', '.join(GRIDS)} (a "
                                  "scenario-override grid KEY=V1,V2 does not apply to calibrate)")
    check_out_file(args.out)                 # before any timing: a bad path costs one line, not the run
    if args.from_bench:
        return run_from_bench(args)
    if args.from_groundtruth:
        return run_from_groundtruth(args)
    out = Path(args.out)
    check_out_file(args.points or out.with_name(out.stem + ".points.jsonl"), "--points" if args.points else "--out")
    if args.from_vidur:
        return _calibrate_vidur(args)
    from calibrate.inputs import check_calibration
    from calibrate.pipeline import CalibrationConfig, calibrate_profile
    cfg = CalibrationConfig(out=args.out, model=args.model, draft=args.draft, layers=args.layers,
                            draft_layers=args.draft_layers, passes=args.passes, quick=args.quick,
                            repeats=args.repeats, warmup=args.warmup, sweeps=args.sweeps, evict=args.evict,
                            hardware=args.hardware, stat=args.stat, holdout=args.holdout, points=args.points,
                            attention=args.attention, engine_venv=args.engine_venv, machine=machine_config(args))
    check_calibration(cfg)
    res = calibrate_profile(cfg, progress=not (args.no_progress or args.json))
    r = res.summary
    if args.json:
        emit_json(r, indent=None)
        return 0
    host, ls, rounds = r["host_overhead"], r["layer_scaling"], r["speculation_rounds"]
    print(res.profile.describe())
    print(f"fitted (+- standard error): {_fitted_text(r['fitted'], r['fitted_stderr'])}, "
          f"iteration_us={r['iteration_us']:.1f}, sampling_row_us={host['sampling_row_us']:.2f}, verify_round_us="
          + ("not separable from the host points" if host["verify_round_us"] is None
             else f"{host['verify_round_us']:.1f}"))
    print(f"held-out APE: median {100 * r['heldout_ape_median']:.1f} %, max {100 * r['heldout_ape_max']:.1f} % "
          f"({r['heldout_n']} passes); train median {100 * r['train_ape_median']:.1f} %; "
          f"datasheet defaults median {100 * r['datasheet_ape_median']:.1f} %")
    if ls:
        print(f"layers {ls['layers']}: t({ls['layers'][1]})/t({ls['layers'][0]}) "
              f"median {ls['median_ratio_t2_t1']:.2f}; "
              f"per-layer slope error of the fit: median {100 * ls['slope_ape_median']:.1f} %")
    if rounds["n"]:
        w = rounds["worst"]
        print(f"speculative rounds the grid's passes compose (K > 0 round / K = 0 round, fitted model vs measured "
              f"passes): median |error| {100 * rounds['ratio_err_median_abs']:.1f} %, worst B={w['batch']} K={w['k']} "
              f"{100 * w['ratio_err']:+.1f} % (negative: the model predicts too high a speedup)")
    print(f"points: {r['points_file']} ({r['n_points']} passes); {r['elapsed_s']} s")
    return 0


def _calibrate_vidur(args: argparse.Namespace) -> int:
    from calibrate.pipeline import calibrate_from_vidur
    from calibrate.vidur import table_markdown
    res = calibrate_from_vidur(args.from_vidur, args.out, sku=args.sku, hardware=args.hardware)
    s, fit = res.summary, res.fit
    if args.json:
        emit_json(s, indent=None)
        return 0
    print(res.profile.describe())
    print(f"fitted: {_fitted_text(fit.params, why_tied={'efficiency.memory_attention': 'linear operators only'})}")
    print(f"held-out (leave-one-model-out) APE: median {100 * s['heldout_ape_median']:.1f} %, max "
          f"{100 * s['heldout_ape_max']:.1f} %; knee (64-512 tokens) median {100 * s['heldout_knee_ape_median']:.1f} %")
    if fit.allreduce:
        a = fit.allreduce
        print(f"all-reduce ({a['topology']}): {a['bandwidth_gb_s']:.1f} GB/s, {a['latency_us']:.1f} us per collective; "
              f"median APE {100 * a['ape_median']:.1f} % (datasheet {100 * a['datasheet_ape_median']:.1f} %)")
    print(table_markdown(fit.table))
    return 0


# ---- calibrate --from-bench ------------------------------------------------------------------
def run_from_groundtruth(args: argparse.Namespace) -> int:
    """Fit vLLM's host time per iteration and per draft step on a CPU from its own runs."""
    from calibrate.engine_groundtruth import CPU_PROFILE, load_results
    from calibrate.engine_host_fit import fit_host, runs_load, smallest_model, write_host_file
    if args.engine not in (None, "vllm"):
        raise SpecsightInputError("--engine", args.engine, "vllm (the engine `specsight groundtruth` runs)")
    header, runs = load_results(args.from_groundtruth, "--from-groundtruth")
    profile = args.hardware or str(CPU_PROFILE.relative_to(CPU_PROFILE.parents[1]))
    model = smallest_model(runs)
    fit = fit_host(runs, model, profile)
    command = (f"specsight calibrate --engine vllm --from-groundtruth {args.from_groundtruth} --hardware {profile} "
               f"--out {args.out}")
    out = write_host_file(fit, args.out, header=header, model=model, results=str(args.from_groundtruth),
                          profile=profile, command=command, load_of_runs=runs_load(runs, model))
    if args.json:
        emit_json({**fit, "file": str(out), "model": model}, indent=None)
        return 0
    it = fit["iteration"]
    h = it["heldout"]
    print(f"vLLM host time fitted on {model}'s runs ({len(it['points'])} plain):")
    print(f"  H(B) = {1e3 * it['a_s']:.3f} ms (+- {1e3 * it['stderr']['a_s']:.3f}) + {1e3 * it['b_s']:.4f} ms "
          f"(+- {1e3 * it['stderr']['b_s']:.4f}) x B; held out (leave one batch out): step error median "
          f"{100 * h.get('median_error', float('nan')):.1f} %, max {100 * h.get('max_error', float('nan')):.1f} %")
    for m, p in fit["proposer"].items():
        hp = p["heldout"]
        print(f"  {m}: {1e3 * p['round_s']:.3f} ms + {1e3 * p['round_per_seq_s']:.4f} ms x B + K x "
              f"({1e3 * p['step_s']:.3f} ms + {1e3 * p['step_per_seq_s']:.4f} ms x B) a round over {p['runs']} runs; "
              f"held out: round error median {100 * hp.get('median_error', float('nan')):.1f} %, "
              f"max {100 * hp.get('max_error', float('nan')):.1f} %")
    print(f"written: {out}")
    return 0


def run_from_bench(args: argparse.Namespace) -> int:
    """Fit an engine's host constants from its serving benchmark's files; write the engine profile."""
    import yaml

    from calibrate.bench_files import read_bench_files
    from calibrate.engine_fit import fit_engine, profile_dict
    from simulator.scenario.scenario import load_scenario
    if args.engine is None:
        raise SpecsightInputError("--engine", None, "vllm or sglang: whose benchmark wrote the --from-bench files")
    if args.scenario is None:
        raise SpecsightInputError("--scenario", None, "the deployment YAML the benchmark runs were made on")
    deployment = load_scenario(args.scenario, scenario_overrides(args))
    fit = fit_engine(deployment, read_bench_files(args.from_bench, args.engine), args.engine)
    command = " ".join(["specsight calibrate --engine", args.engine, "--from-bench", *args.from_bench, "--scenario",
                        args.scenario, *(f"--set {o}" for o in args.overrides), "--out", args.out])
    prof = profile_dict(fit, str(args.scenario), command)
    out = write_text(args.out, yaml.safe_dump(prof, sort_keys=False))
    if args.json:
        emit_json({**prof, "profile": str(out)}, indent=None)
        return 0
    fitted = ", ".join(f"{n}={v:.4g}" + (f" (+- {fit.stderr_ms[n]:.2g})" if fit.stderr_ms.get(n) is not None else "")
                       for n, v in fit.fitted_ms.items()) or "none"
    print(f"{fit.engine} {fit.version}: fitted (ms, +- standard error): {fitted}")
    for n, v in fit.kept_ms.items():
        print(f"  kept {n}={v:.4g} (built-in): {fit.why_kept[n]}")
    held = fit.heldout_median
    print(f"mean TPOT error: train median {100 * fit.train_median:.1f} % over {len(fit.train_error)} runs; held out "
          + ("(leave one file out) median " + f"{100 * held:.1f} %" if held is not None else "n/a (one file)"))
    print(f"engine profile: {out} (a scenario names it as engine.profile)")
    return 0
