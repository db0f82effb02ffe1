"""`specsight cost --model M --hardware H --batch B --new-tokens N --context C`: one forward pass's
time per op class, and what the batch holds in memory."""
from __future__ import annotations

import argparse
import sys

from .args import add_hardware, add_json
from .emit import emit_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cost", help="time of one forward pass, per op class")
    p.add_argument("--model", required=True, help="catalog name or path to a config.json")
    add_hardware(p, required=True)
    p.add_argument("--tp", type=int, default=1, help="GPUs of the replica (hardware.tp)")
    p.add_argument("--ep", type=int, default=1,
                   help="expert-parallel groups of the routed experts (hardware.ep; a divisor of --tp, MoE only)")
    p.add_argument("--dp-attention", action="store_true",
                   help="data-parallel attention over the --tp GPUs (hardware.dp_attention; MoE: --ep equal to --tp)")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--batch", type=float, required=True)
    p.add_argument("--new-tokens", type=float, required=True, help="new tokens per sequence (verify width)")
    p.add_argument("--context", type=float, required=True, help="cached tokens per sequence")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from simulator.common.errors import require_int
    from simulator.common.limits import MAX_SEQS, MAX_TOKENS, MAX_TP
    from simulator.costs.cost_model import CostModel, PassShape
    from simulator.hardware.hardware import load_profile
    from simulator.models.catalog import load_model

    batch = require_int("--batch", args.batch, lo=1, hi=MAX_SEQS)
    new = require_int("--new-tokens", args.new_tokens, lo=1, hi=MAX_TOKENS)
    ctx = require_int("--context", args.context, lo=0, hi=MAX_TOKENS)
    require_int("--tp", args.tp, lo=1, hi=MAX_TP)
    require_int("--ep", args.ep, lo=1, hi=MAX_TP)
    hw = load_profile(args.hardware)
    cm = CostModel(load_model(args.model), hw, tp=args.tp, dtype=args.dtype, ep=args.ep,
                   dp_attention=args.dp_attention)
    shape = PassShape.uniform(batch, new, ctx)
    cost = cm.breakdown(shape)
    out = cost.to_dict()
    # what the batch holds per GPU once this pass has run, against the GPU's whole memory (a serving
    # engine keeps part of it back: `simulate` sizes its KV cache with simulator.costs.kv_cache.kv_budget)
    kv_bytes = float(cm.kv_bytes_held(batch, ctx + new))     # by layer type: window, constant state
    held_bytes = cm.weight_bytes_per_gpu + kv_bytes
    fits = held_bytes <= hw.memory_bytes
    window = cm.model.max_position_embeddings
    within = ctx + new <= window if window else None
    out.update(model=args.model, gpu=hw.name, hardware_profile=hw.describe(), tp=cm.tp, ep=cm.layout.ep,
               dp_attention=cm.layout.dp_attention, dtype=cm.dtype,
               batch=batch, new_tokens=new, context=ctx, iteration_overhead_s=cm.iteration_overhead_s,
               weight_bytes_per_gpu=cm.weight_bytes_per_gpu, kv_bytes_per_gpu=kv_bytes, fits_in_hbm=fits,
               context_window_tokens=window or None, within_context_window=within)
    if args.json:
        emit_json(out)
        return 0
    print(f"# {hw.describe()}", file=sys.stderr)
    layout = (f", ep {cm.layout.ep}" if cm.layout.ep > 1 else "") + (", DP attention" if cm.layout.dp_attention else "")
    print(f"{args.model} on {hw.name} x{cm.tp}{layout} ({cm.dtype}): batch {batch} x {new} new tokens, context {ctx}")
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
