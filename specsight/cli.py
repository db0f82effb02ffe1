"""The `specsight` command line: a thin layer over the library; defaults live in the dataclasses.

Every subcommand with --json prints one JSON object on stdout. Bad input prints one line
`specsight: error: <field>=<value>: <what is allowed>` and exits with code 2.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from simulator.errors import SpecsightInputError

from . import foundation_cmds

# Subcommand modules that register themselves with add_parser(subparsers); each imports torch
# (if at all) only inside its run function, so `specsight --help` stays fast.
OPTIONAL_COMMANDS = ("simulate_cmd", "calibrate_cmd", "plan_cmd", "sweep_cmd")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specsight", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    foundation_cmds.add_parsers(sub)
    p = sub.add_parser("breakeven", help="where speculation turns net-negative: sweep an axis, find speedup = 1")
    p.add_argument("scenario", nargs="?", help="scenario YAML (omit with --analytic)")
    p.add_argument("--k", default="1,2,3,4", help="comma-separated K values")
    p.add_argument("--out", default="out/breakeven", help="output folder for CSV and PNG")
    p.add_argument("--json", action="store_true")
    foundation_cmds.add_breakeven_analytic_args(p)
    try:
        scen = importlib.import_module("specsight.breakeven_cmd")
        scen.add_scenario_args(p)
    except ModuleNotFoundError as e:
        if e.name != "specsight.breakeven_cmd":
            raise
        scen = None
    p.set_defaults(func=lambda a: foundation_cmds.cmd_breakeven_analytic(a) if a.analytic or scen is None else scen.run(a))
    for name in OPTIONAL_COMMANDS:
        try:
            mod = importlib.import_module(f"specsight.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"specsight.{name}":
                raise
            continue
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except SpecsightInputError as e:
        print(f"specsight: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specsight: interrupted (finished results were kept)", file=sys.stderr)
        return 130
    except BrokenPipeError:         # the reader left (`specsight ... | head`): stop quietly, as cat does
        devnull = os.open(os.devnull, os.O_WRONLY)        # stdout -> /dev/null, so the exit's flush cannot fail again
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141


if __name__ == "__main__":
    sys.exit(main())
