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
    add_hardware(v, help="profile the rounds are costed with (default: the datasheet profile of the run's GPU)")
    v.add_argument("--dtype", default=None, choices=["fp32", "fp16", "bf16", "fp8"],
                   help="cost the rounds at this dtype (default: the run's own)")
    v.add_argument("--out", default=None, help="also write the Markdown report here")
    add_json(v)
    v.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
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


