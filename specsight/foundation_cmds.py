"""Subcommands over the catalogs and the cost model: profiles, models, cost, analytic, breakeven --analytic."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import yaml

from simulator import spec_math
from simulator.analytic import breakeven_batch, max_batch_in_memory, speedup
from simulator.cost_model import CostModel, PassShape
from simulator.drafters import Drafter
from simulator.errors import SpecsightInputError, require_int, require_range
from simulator.hardware import available_profiles, load_profile
from simulator.model_spec import available_models, load_model

from .drafter_arg import resolve_drafter


def emit_json(obj) -> None:
    print(json.dumps(obj, indent=2, default=_json_default))


def _json_default(o):
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


def parse_int_list(field: str, text: str, lo: int = 0) -> list[int]:
    try:
        vals = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise SpecsightInputError(field, text, "a comma-separated list of integers, e.g. 1,2,3,4") from None
    if not vals:
        raise SpecsightInputError(field, text, "at least one value")
    return [require_int(field, v, lo=lo) for v in vals]


# ---- profiles / models ---------------------------------------------------------------------
def cmd_profiles(args) -> int:
    if args.action == "show":
        if not args.name:
            raise SpecsightInputError("profiles show NAME", None, "name a profile: " + ", ".join(available_profiles()))
        prof = load_profile(args.name)
        print(f"# {prof.describe()}", file=sys.stderr)
        if args.json:
            emit_json(prof.to_dict())
        else:
            print(yaml.safe_dump(prof.to_dict(), sort_keys=False, width=200), end="")
        return 0
    if args.name:
        raise SpecsightInputError("profiles list", args.name, "takes no name (profiles show NAME shows one)")
    rows = [load_profile(n) for n in available_profiles()]
    if args.json:
        emit_json([{"name": p.name, "memory_capacity_gb": p.memory_capacity_gb, "memory_bandwidth_tb_s": p.memory_bandwidth_tb_s,
                    "peak_tflops": dict(p.peak_tflops), "calibrated": p.is_calibrated} for p in rows])
        return 0
    print(f"{'name':<28}{'memory GB':>10}{'HBM TB/s':>10}{'bf16 TFLOP/s':>14}{'fp8 TFLOP/s':>13}  interconnect")
    for p in rows:
        fp8 = p.peak_tflops.get("fp8")
        print(f"{p.name:<28}{p.memory_capacity_gb:>10g}{p.memory_bandwidth_tb_s:>10g}{p.peak_tflops.get('bf16', float('nan')):>14g}"
              f"{(f'{fp8:g}' if fp8 else '-'):>13}  {p.interconnect.kind} {p.interconnect.bandwidth_gb_s:g} GB/s"
              + ("  [calibrated]" if p.is_calibrated else ""))
    return 0


def cmd_models(args) -> int:
    if args.action == "show":
        if not args.name:
            raise SpecsightInputError("models show M", None, "name a model: " + ", ".join(available_models()))
        spec = load_model(args.name)
        d = spec.to_dict()
        if args.json:
            emit_json(d)
        else:
            for k, v in d.items():
                if v not in (0, None, False) or k in ("params_total", "params_active"):
                    print(f"{k:<28}{v}")
        return 0
    if args.name:
        raise SpecsightInputError("models list", args.name, "takes no name (models show M shows one)")
    rows = [load_model(n) for n in available_models()]
    if args.json:
        emit_json([{"name": m.name, "params_total": m.params_total, "params_active": m.params_active,
                    "head_kind": m.head_kind} for m in rows])
        return 0
    print(f"{'name':<26}{'total B':>10}{'active B':>10}{'layers':>8}{'hidden':>8}{'heads/kv':>10}  kind")
    for m in rows:
        kind = m.head_kind and f"{m.head_kind} head for {m.target}" or ("MoE" if m.is_moe else "dense") + (" MLA" if m.is_mla else "")
        print(f"{m.name:<26}{m.params_total/1e9:>10.3f}{m.params_active/1e9:>10.3f}{m.num_layers:>8}{m.hidden_size:>8}"
              f"{f'{m.num_heads}/{m.num_kv_heads}':>10}  {kind}")
    return 0


# ---- cost ----------------------------------------------------------------------------------
def cmd_cost(args) -> int:
    batch = require_int("--batch", args.batch, lo=1)
    new = require_int("--new-tokens", args.new_tokens, lo=1)
    ctx = require_int("--context", args.context, lo=0)
    hw = load_profile(args.gpu)
    cm = CostModel(load_model(args.model), hw, tp=args.tp, dtype=args.dtype)
    shape = PassShape.uniform(batch, new, ctx)
    cost = cm.breakdown(shape)
    out = cost.to_dict()
    # what the batch holds per GPU once this pass has run, against the GPU's whole memory (a serving
    # engine keeps part of it back: `simulate` sizes its KV cache with simulator.kv_cache.kv_budget)
    kv_bytes = batch * (ctx + new) * float(cm.kv_bytes_per_token)
    held_bytes = cm.weight_bytes_per_gpu + kv_bytes
    fits = held_bytes <= hw.memory_bytes
    window = cm.model.max_position_embeddings
    within = ctx + new <= window if window else None
    out.update(model=args.model, gpu=hw.name, hardware_profile=hw.describe(), tp=cm.tp, dtype=cm.dtype,
               batch=batch, new_tokens=new, context=ctx, iteration_overhead_s=cm.iteration_overhead_s,
               weight_bytes_per_gpu=cm.weight_bytes_per_gpu, kv_bytes_per_gpu=kv_bytes, fits_in_hbm=fits,
               context_window_tokens=window or None, within_context_window=within)
    if args.json:
        emit_json(out)
        return 0
    print(f"# {hw.describe()}", file=sys.stderr)
    print(f"{args.model} on {hw.name} x{cm.tp} ({cm.dtype}): batch {batch} x {new} new tokens, context {ctx}")
    print(f"{'op class':<14}{'GFLOP':>14}{'MB':>14}{'time ms':>12}  bound")
    for k, o in cost.ops.items():
        print(f"{k:<14}{o.flops/1e9:>14.2f}{o.bytes/1e6:>14.2f}{o.time_s*1e3:>12.4f}  {o.bound}")
    print(f"{'total':<14}{cost.flops/1e9:>14.2f}{cost.bytes/1e6:>14.2f}{cost.time_s*1e3:>12.4f}  {cost.bound}")
    print(f"(+ {cm.iteration_overhead_s*1e3:.3f} ms host overhead per engine iteration)")
    print(f"memory per GPU: weights {cm.weight_bytes_per_gpu / 1e9:.2f} GB + KV {kv_bytes / 1e9:.2f} GB = "
          f"{held_bytes / 1e9:.2f} GB of {hw.memory_capacity_gb:g} GB HBM"
          + ("" if fits else ": does not fit (no engine holds this batch; the times are the roofline's alone)"))
    if within is False:
        print(f"context {ctx} + {new} tokens exceeds {args.model}'s context window of {window} tokens "
              f"(max_position_embeddings): an engine refuses such a sequence")
    return 0


# ---- analytic ------------------------------------------------------------------------------
def cmd_analytic(args) -> int:
    alpha = spec_math.check_alpha(args.alpha)
    k = spec_math.check_k(args.k)
    out = {"alpha": alpha, "k": k, "expected_tokens_per_round": spec_math.expected_tokens_per_round(alpha, k)}
    if args.c is not None:
        c = require_range("c", args.c, 0.0)
        out.update(c=c, speedup=float(spec_math.speedup_batch1(alpha, k, c)),
                   optimal_k=spec_math.optimal_k(alpha, c), compute_increase=float(spec_math.compute_increase(alpha, k, c)))
    if args.json:
        emit_json(out)
    else:
        for key, v in out.items():
            print(f"{key:<28}{v:.4f}" if isinstance(v, float) else f"{key:<28}{v}")
    return 0


# ---- breakeven --analytic ------------------------------------------------------------------
BATCH_GRID = np.unique(np.round(np.geomspace(1, 1024, 61)))


def cmd_breakeven_analytic(args) -> int:
    for f in ("model", "gpu", "drafter", "alpha"):
        if getattr(args, f) is None:
            raise SpecsightInputError(f"--{f}", None, "required with --analytic")
    alpha = spec_math.check_alpha(args.alpha)
    ks = parse_int_list("k", args.k, lo=1)
    ctx = require_int("context", args.context, lo=0)
    hw = load_profile(args.gpu)
    target = load_model(args.model)
    cm = CostModel(target, hw, tp=args.tp, dtype=args.dtype)
    rows, result, mem_limit = [], {}, {}
    for k in ks:
        drafter = Drafter(resolve_drafter(args.drafter, args.model, k), target, cm)
        mem_limit[str(k)] = max_batch_in_memory(cm, drafter, ctx, k)
        s = speedup(cm, drafter, BATCH_GRID, ctx, k, alpha)
        be = breakeven_batch(cm, drafter, ctx, k, alpha, max_batch=float(BATCH_GRID[-1]))
        result[str(k)] = be
        rows += [{"k": k, "batch": int(b), "speedup": float(v)} for b, v in zip(BATCH_GRID, s)]
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    import pandas as pd
    df = pd.DataFrame(rows)
    csv = out_dir / "breakeven_analytic.csv"
    df.to_csv(csv, index=False)
    png = out_dir / "breakeven_analytic.png"
    from .plots import plot_speedup_curves
    title = (f"{args.model} on {hw.name} x{cm.tp}, drafter {args.drafter}, alpha={alpha:g}, context {ctx}\n"
             f"analytic speedup vs batch (break-even where the curve crosses 1)")
    plot_speedup_curves(df, x="batch", curve="k", y="speedup",
                        breakeven={f"K={k}": be.breakeven_batch for k, be in ((int(k), v) for k, v in result.items())},
                        title=title, xlabel="batch size (sequences decoding together)", path=png, logx=True,
                        vlines={"KV memory limit": min(mem_limit.values())})
    best = df.loc[df.groupby("batch")["speedup"].idxmax()]
    summary = {
        "model": args.model, "gpu": hw.name, "hardware_profile": hw.describe(), "tp": cm.tp, "drafter": args.drafter,
        "alpha": alpha, "context": ctx,
        "breakeven_batch": {k: be.breakeven_batch for k, be in result.items()},
        "speedup_at_batch1": {k: be.speedup_at_batch1 for k, be in result.items()},
        "never_pays": {k: be.never_pays for k, be in result.items()},
        "max_batch_in_memory": mem_limit,
        "breakeven_within_memory": {k: (be.breakeven_batch is not None and be.breakeven_batch <= mem_limit[k])
                                    for k, be in result.items()},
        "best_k": {int(b): (int(kk) if sp > 1.0 else 0) for b, kk, sp in zip(best["batch"], best["k"], best["speedup"])},
        "csv": str(csv), "png": str(png),
    }
    if args.json:
        emit_json(summary)
    else:
        print(f"{summary['hardware_profile']}")
        print(f"{'K':>3}{'speedup@B=1':>14}{'break-even batch':>19}{'max batch in KV memory':>24}")
        for k, be in result.items():
            b = "never pays" if be.never_pays else ("beyond range" if be.breakeven_batch is None else f"{be.breakeven_batch:.1f}")
            print(f"{k:>3}{be.speedup_at_batch1:>14.3f}{b:>19}{mem_limit[k]:>24.0f}")
        print(f"wrote {csv} and {png}")
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("profiles", help="list hardware profiles, or show one")
    p.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    p.add_argument("name", nargs="?")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_profiles)

    p = sub.add_parser("models", help="list the model catalog, or show one model's shapes and parameter counts")
    p.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    p.add_argument("name", nargs="?")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_models)

    p = sub.add_parser("cost", help="time of one forward pass, per op class")
    p.add_argument("--model", required=True, help="catalog name or path to a config.json")
    p.add_argument("--gpu", required=True, help="hardware profile name or YAML path")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--batch", type=float, required=True)
    p.add_argument("--new-tokens", type=float, required=True, help="new tokens per sequence (verify width)")
    p.add_argument("--context", type=float, required=True, help="cached tokens per sequence")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_cost)

    p = sub.add_parser("analytic", help="closed-form speculation math (Leviathan et al. 2022)")
    p.add_argument("--alpha", type=float, required=True, help="per-token acceptance rate in [0, 1)")
    p.add_argument("--k", type=float, required=True, help="draft tokens per round")
    p.add_argument("--c", type=float, default=None, help="draft step time / target step time")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_analytic)


def add_breakeven_analytic_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--analytic", action="store_true", help="closed-form cost-model sweep over batch size (no simulation)")
    p.add_argument("--model")
    p.add_argument("--gpu")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--drafter", help="method (eagle3), method:model (draft_model:llama-3.2-1b) or a catalog name")
    p.add_argument("--alpha", type=float)
    p.add_argument("--context", type=float, default=1024)
