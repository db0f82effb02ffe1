"""`specsight simulate SCENARIO.yaml [--set key.path=value ...] [--baseline] [--out DIR] [--json]`

Runs a scenario through the SimPy serving simulator (simulator.run.simulate). stdout gets the
summary (a table, or one JSON object on one line with --json) with `engine` (the engine the run
is priced under: `ideal` or e.g. `vllm v1`), under a real engine with --baseline each speedup's
and TPOT's 80 % interval (`<key>_interval`: [low, high]; the table prints it beside the figure;
ideal has none and says so), `saturated` (the queue grows
through the run), `kv_limited` (the KV cache ran out) and `achieved_mean_batch` added
(specsight.studies.shared.saturation); stderr gets which hardware profile the numbers come from. --out
DIR writes requests.parquet, iterations.parquet (CSV when pyarrow is missing), summary.json and
the resolved scenario.yaml (with --baseline, the baseline's tables go to DIR/baseline/). Bad input
prints one line `specsight: error: ...` and exits with code 2.
"""
from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.common.atomic_files import replacing, write_text
from simulator.common.errors import SpecsightInputError

from ..studies.published.answer_intervals import SUFFIX, format_interval, group_note
from ..studies.simulate import with_intervals
from .args import SCENARIO_HARDWARE_HELP, add_hardware, add_json, add_set, check_out_dir, scenario_overrides
from .emit import dumps, emit_json

if TYPE_CHECKING:
    import pandas as pd

    from simulator.run.result import SimResult

HELP = "simulate a deployment (continuous batching + speculative decoding) from a scenario YAML"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("simulate", help=HELP, description=HELP)
    p.add_argument("scenario", help="scenario YAML file (see docs/simulator.md)")
    add_set(p)
    add_hardware(p, help=SCENARIO_HARDWARE_HELP)
    p.add_argument("--baseline", action="store_true",
                   help="also run with speculation off on the same requests and report speedup_* keys")
    p.add_argument("--out", metavar="DIR", help="write requests/iterations tables and summary.json here")
    p.add_argument("--no-iterations", action="store_true",
                   help="keep no per-iteration log (its figures are folded into the summary as the run goes; "
                        "--out then writes no iterations table): for runs of millions of requests")
    add_json(p, "print the summary as one JSON object")
    p.set_defaults(func=run)
    return p


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        a = abs(v)
        return f"{v:.4g}" if (a >= 1e-3 or a == 0) and a < 1e6 else f"{v:.3e}"
    return str(v)


TABLE_GROUPS = (
    ("run", ("scenario", "engine", "hardware_profile", "policy", "k_max", "replicas", "num_requests", "num_iterations",
             "duration_s", "output_tokens")),
    ("throughput", ("output_tokens_per_s", "requests_per_s", "goodput_requests_per_s", "slo_attainment")),
    ("latency (ms)", tuple(f"{m}_ms_{s}" for m in ("ttft", "tpot", "itl", "e2e")
                           for s in ("mean", "p50", "p90", "p99"))),
    ("speculation", ("mean_k", "mean_tokens_per_round", "mean_accept_length", "acceptance_rate")),
    ("GPU time", ("draft_time_frac", "verify_time_frac", "prefill_time_frac", "overhead_time_frac", "busy_frac")),
    ("memory", ("kv_capacity_blocks", "kv_util_mean", "kv_util_max", "preemptions", "preempted_requests",
                "mean_batch")),
    ("load", ("saturated", "kv_limited", "achieved_mean_batch")),
)


def format_table(summary: Mapping[str, Any], note: str = "") -> str:
    """The summary by group, each figure with its `<key>_interval` where the summary has one; `note`
    closes it (what the intervals are, or that ideal has none)."""
    lines: list[str] = []
    shown: set[str] = set()
    for title, keys in TABLE_GROUPS:
        keys = tuple(k for k in keys if k in summary)
        if title == "speculation":
            keys += tuple(k for k in summary if k.startswith("acceptance_rate_pos"))
        if not keys:
            continue
        lines.append(f"[{title}]")
        for k in keys:
            lines.append(_line(summary, k))
            shown.add(k)
    rest = [k for k in summary if k.startswith(("speedup_", "baseline_")) and k not in shown
            and not k.endswith(SUFFIX)]
    if rest:
        lines.append("[against K = 0 baseline]")
        for k in rest:
            lines.append(_line(summary, k))
    if note:
        lines.append(note)
    return "\n".join(lines)


def _line(summary: Mapping[str, Any], k: str) -> str:
    """One key and its value, with its 80 % interval where the summary carries one."""
    band = format_interval(summary.get(k + SUFFIX), ".4g")
    return f"  {k:<34} {_fmt(summary[k])}" + (f" {band}" if band else "")


def _write_table(df: pd.DataFrame, path_stem: Path) -> Path:
    try:
        import pyarrow  # noqa: F401
        p = path_stem.with_suffix(".parquet")
        with replacing(p) as tmp:
            df.to_parquet(tmp, index=False)
    except ImportError:
        p = path_stem.with_suffix(".csv")
        with replacing(p) as tmp:
            df.to_csv(tmp, index=False)
    return p


def write_outputs(result: SimResult, out_dir: Path, summary: Mapping[str, Any] | None = None) -> list[Path]:
    """requests/iterations tables, summary.json (`summary`, default the run's) and scenario.yaml
    under out_dir."""
    import yaml
    check_out_dir(out_dir)
    written = [_write_table(result.requests, out_dir / "requests"),
               *([] if result.iterations is None else [_write_table(result.iterations, out_dir / "iterations")]),
               write_text(out_dir / "summary.json", dumps(result.summary if summary is None else summary) + "\n"),
               write_text(out_dir / "scenario.yaml", yaml.safe_dump(result.scenario.to_dict(), sort_keys=False))]
    if result.baseline is not None:
        b = out_dir / "baseline"
        check_out_dir(b)
        written += [_write_table(result.baseline.requests, b / "requests"),
                    *([] if result.baseline.iterations is None
                      else [_write_table(result.baseline.iterations, b / "iterations")]),
                    write_text(b / "summary.json", dumps(result.baseline.summary) + "\n")]
    return written


def run(args: argparse.Namespace) -> int:
    from simulator.run import simulate
    from simulator.run.result import pool_keys
    from simulator.scenario.scenario import load_scenario

    from ..studies.shared.saturation import result_flags
    try:
        sc = load_scenario(args.scenario, scenario_overrides(args))
        if args.out:
            check_out_dir(Path(args.out))           # before the run: a bad folder costs no simulation
        if not sc.hardware.is_fixed:
            from simulator.hardware.hardware import load_profile
            print(load_profile(sc.hardware.profile or sc.hardware.gpu).describe(), file=sys.stderr)
        result = simulate(sc, baseline=args.baseline, iterations="none" if args.no_iterations else "memory")
        summary = {"engine": result.engine, **result.summary, **pool_keys(result), **result_flags(result)}
        method = sc.drafter.method if sc.drafter is not None else None
        summary.update(with_intervals(result).intervals)      # (none under ideal: the physics bound)
        note = group_note(sc.engine.kind, method) if args.baseline else ""
        if args.out:
            for p in write_outputs(result, Path(args.out), summary):
                print(f"wrote {p}", file=sys.stderr)
    except SpecsightInputError as e:
        print(f"specsight: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        emit_json(summary, indent=None)
    else:
        print(format_table(summary, note))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (`python -m specsight.cli.simulate simulate ...`); the CLI wires add_parser/run."""
    parser = argparse.ArgumentParser(prog="specsight")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
