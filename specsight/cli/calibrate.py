"""`specsight calibrate`, `specsight groundtruth`, `specsight validate`: parse, call calibrate.pipeline, print.

    calibrate    time real forward passes on this machine (or read Vidur's tables), fit the cost
                 model's efficiencies and overheads, report held-out error, write a profile YAML
    groundtruth  run real speculative decoding in torch (target + draft, KV caches, exact kernel)
                 and record every round's time and accept lengths
    validate     simulate a ground-truth run with a profile and compare, per (batch, K)

Flags follow the names every command uses (specsight/cli/args.py): --hardware NAME|YAML (aliases
--gpu, --profile), --k as a comma list of ints, --out, --json (specsight/cli/emit.py writes it).
calibrate's pass grid is --passes NAME; --grid NAME is its alias (a scenario-override grid,
--grid KEY=V1,V2, does not apply to calibrate).
torch is imported only inside the run functions, so `specsight --help` stays fast.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from calibrate.grids import GRIDS
from calibrate.machine import CPU_DRAFT_LAYERS, CPU_LAYERS, CPU_SCALE, CPU_THREADS, GPU_LAYERS, MachineConfig
from simulator.errors import SpecsightInputError

from .args import add_hardware, add_json, add_set, scenario_overrides
from .emit import emit_json


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


def _machine(args: argparse.Namespace) -> MachineConfig:
    return MachineConfig(device=args.device, dtype=args.dtype, scale=args.scale, threads=args.threads,
                         seed=args.seed, graphs=args.graphs)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
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
    p.add_argument("--from-vidur", metavar="DIR", default=None, help="fit from Vidur profiling data instead of timing")
    p.add_argument("--sku", default="a100", help="with --from-vidur: compute/<sku> folder")
    p.add_argument("--out", required=True, help="profile YAML to write (its name is the file stem)")
    p.add_argument("--from-bench", nargs="+", metavar="FILE", default=None,
                   help="fit an engine's host constants from its serving benchmark's result files instead "
                        "(vllm bench serve --save-result JSON; sglang.bench_serving --output-file JSONL); "
                        "--out is the engine profile YAML (docs/engines.md)")
    p.add_argument("--engine", choices=("vllm", "sglang"), default=None, help="with --from-bench: whose benchmark")
    p.add_argument("--scenario", metavar="YAML", default=None,
                   help="with --from-bench: the deployment the runs were made on (model, GPU, drafter, engine.version)")
    add_set(p)
    add_json(p)
    _device_args(p)
    p.set_defaults(func=run_calibrate)

    g = subparsers.add_parser("groundtruth", help="real speculative decoding in torch, timed per round")
    g.add_argument("--model", default="llama-3.1-8b")
    g.add_argument("--draft", default="llama-3.2-1b", help="independent draft model (same vocabulary)")
    g.add_argument("--layers", type=int, default=None,
                   help=f"target layers (default {GPU_LAYERS} on cuda, {CPU_LAYERS} on cpu)")
    g.add_argument("--draft-layers", type=int, default=CPU_DRAFT_LAYERS,
                   help=f"draft layers (default {CPU_DRAFT_LAYERS})")
    g.add_argument("--batch", type=_ints, default=(1, 8, 32), help="comma-separated batch sizes")
    g.add_argument("--k", type=_ints, default=(0, 2, 4), metavar="K[,K...]",
                   help="draft tokens per round (comma-separated integers; 0 = plain decoding)")
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
    add_json(g)
    _device_args(g)
    g.set_defaults(func=run_groundtruth)

    v = subparsers.add_parser("validate", help="simulate a ground-truth run and compare with what was measured; "
                                               "--published: the table of published engine results")
    v.add_argument("run", nargs="?", default=None, help="groundtruth RUN.json or its folder (not with --published)")
    v.add_argument("--published", action="store_true",
                   help="compare with published engine results (data/published/engine_results.yaml) instead")
    add_hardware(v, help="profile the rounds are costed with (default: the datasheet profile of the run's GPU)")
    v.add_argument("--dtype", default=None, choices=["fp32", "fp16", "bf16", "fp8"],
                   help="cost the rounds at this dtype (default: the run's own)")
    v.add_argument("--out", default=None, help="also write the Markdown report here")
    add_json(v)
    v.set_defaults(func=run_validate)


def run(args: argparse.Namespace) -> int:
    return int(args.func(args) or 0)


def _fitted_text(params: dict[str, Any], stderr: dict[str, float] | None = None,
                 why_tied: dict[str, str] | None = None) -> str:
    """'efficiency.memory=0.7964 (+- 0.012), ...'; a rate held tied to memory (None) says why."""
    why = {"efficiency.memory_gemv": "no one-token passes", "efficiency.memory_attention": "one context only",
           **(why_tied or {})}
    se = stderr or {}
    return ", ".join((f"{k}={v:.4g}" + (f" (+- {se[k]:.2g})" if k in se else "")) if v is not None
                     else f"{k}=tied to efficiency.memory ({why.get(k, 'not fitted')})" for k, v in params.items())


# ---- calibrate ------------------------------------------------------------------------------
def run_calibrate(args: argparse.Namespace) -> int:
    if args.passes is not None and "=" in args.passes:
        raise SpecsightInputError("--grid", args.passes, f"a pass grid name, one of {', '.join(GRIDS)} (a "
                                  "scenario-override grid KEY=V1,V2 does not apply to calibrate)")
    if args.from_bench:
        return run_from_bench(args)
    if args.from_vidur:
        return _calibrate_vidur(args)
    from calibrate.pipeline import CalibrationConfig, calibrate_profile
    cfg = CalibrationConfig(out=args.out, model=args.model, draft=args.draft, layers=args.layers,
                            draft_layers=args.draft_layers, passes=args.passes, quick=args.quick,
                            repeats=args.repeats, warmup=args.warmup, sweeps=args.sweeps, evict=args.evict,
                            hardware=args.hardware, stat=args.stat, holdout=args.holdout, points=args.points,
                            machine=_machine(args))
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


# ---- groundtruth ----------------------------------------------------------------------------
def run_groundtruth(args: argparse.Namespace) -> int:
    from calibrate.pipeline import GroundTruthConfig, record_groundtruth
    arguments = {k: v for k, v in vars(args).items() if k not in ("func",) and not callable(v)}
    cfg = GroundTruthConfig(model=args.model, draft=args.draft, layers=args.layers, draft_layers=args.draft_layers,
                            batches=args.batch, ks=args.k, steps=args.steps, warmup=args.warmup,
                            prompt_len=args.prompt_len, temperature=args.temperature, interleave=args.interleave,
                            out=args.out, machine=_machine(args), arguments=arguments)
    res = record_groundtruth(cfg, progress=not (args.no_progress or args.json))
    rows = res.configs.to_dict("records")
    if args.json:
        emit_json({"run": str(res.path), "device_name": res.run["provenance"]["device_name"], "configs": rows},
                  indent=None)
    else:
        print(f"wrote {res.path}")
        for r in rows:
            print(f"  B={r['batch']:>4} K={r['k']}: median round {r['median_round_ms']:.2f} ms, "
                  f"mean accepted {r['mean_accepted']:.2f} over {r['rounds']} rounds")
    return 0


# ---- validate -------------------------------------------------------------------------------
def run_validate(args: argparse.Namespace) -> int:
    if args.published:
        return _validate_published(args)
    if args.run is None:
        raise SpecsightInputError("run", None, "a groundtruth RUN.json or its folder (or --published)")
    from calibrate.pipeline import validate_run
    res = validate_run(args.run, hardware=args.hardware, dtype=args.dtype)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(res.markdown)
    if args.json:
        emit_json({**res.summary, "rows": json.loads(res.table.to_json(orient="records"))}, indent=None)
    else:
        print(res.markdown)
    return 0


def _validate_published(args: argparse.Namespace) -> int:
    """`validate --published`: the published-results table (--out writes docs/validation.md's page)."""
    for flag, value in (("run", args.run), ("--hardware", args.hardware), ("--dtype", args.dtype)):
        if value is not None:
            raise SpecsightInputError(flag, value, "not with --published: each row states its own setup")
    from specsight.studies.published import validate_published
    from specsight.studies.published_report import report_json, report_text, validation_markdown
    table = validate_published()
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(validation_markdown(table))
    if args.json:
        emit_json(report_json(table), indent=None)
    else:
        print(report_text(table))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """A `specsight` parser with these three commands only."""
    parser = argparse.ArgumentParser(prog="specsight")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (python -m specsight.cli.calibrate ...), the same commands as `specsight`."""
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except SpecsightInputError as e:
        print(f"specsight: error: {e}", file=sys.stderr)
        return 2


# ---- calibrate --from-bench ------------------------------------------------------------------
def run_from_bench(args: argparse.Namespace) -> int:
    """Fit an engine's host constants from its serving benchmark's files; write the engine profile."""
    import yaml

    from calibrate.bench_files import read_bench_files
    from calibrate.engine_fit import fit_engine, profile_dict
    from simulator.scenario import load_scenario
    if args.engine is None:
        raise SpecsightInputError("--engine", None, "vllm or sglang: whose benchmark wrote the --from-bench files")
    if args.scenario is None:
        raise SpecsightInputError("--scenario", None, "the deployment YAML the benchmark runs were made on")
    deployment = load_scenario(args.scenario, scenario_overrides(args))
    fit = fit_engine(deployment, read_bench_files(args.from_bench, args.engine), args.engine)
    command = " ".join(["specsight calibrate --engine", args.engine, "--from-bench", *args.from_bench, "--scenario",
                        args.scenario, *(f"--set {o}" for o in args.overrides), "--out", args.out])
    prof = profile_dict(fit, str(args.scenario), command)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(prof, sort_keys=False))
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


if __name__ == "__main__":
    sys.exit(main())
