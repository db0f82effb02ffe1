"""The `specsight` command line: a thin layer over the library; defaults live in the dataclasses.

One module per command, each parsing its flags and calling the library (specsight.studies,
simulator).

Every subcommand with --json prints one JSON object on stdout (cli/emit.py). Bad input prints one
line `specsight: error: <field>=<value>: <what is allowed>` and exits with code 2; a SpecsightWarning
(valid but doubtful input; results unchanged) prints one line `specsight: warning: <message>`. Flags shared by
the commands have one spelling each (cli/args.py). Each command imports the simulator (and torch,
if at all) inside its run function, so `specsight --help` stays fast.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable
from typing import TextIO

from simulator.errors import SpecsightInputError, SpecsightWarning

from . import analytic, breakeven, calibrate, cost, groundtruth, models, plan, profiles, simulate, sweep, validate

COMMANDS = (profiles, models, cost, analytic, breakeven, simulate, calibrate, groundtruth, validate, plan, sweep)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specsight", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None,
                  _default: Callable[..., None] = warnings.showwarning) -> None:
    """SpecsightWarning as one line on stderr; any other warning as Python prints it."""
    if issubclass(category, SpecsightWarning):
        text = " ".join(str(message).split())
        print(f"specsight: warning: {text}", file=sys.stderr)
    else:
        _default(message, category, filename, lineno, file, line)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        return _run(args)


def _run(args: argparse.Namespace) -> int:
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
