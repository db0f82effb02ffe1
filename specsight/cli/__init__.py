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
import ast
import contextlib
import os
import re
import sys
import warnings
from collections.abc import Callable
from typing import NoReturn, TextIO

from simulator.common.errors import SpecsightInputError, SpecsightWarning, closest_names

from .. import kernel_source  # noqa: F401  (acceptance model kernel: calibrate's kernel, for the simulator)
from . import (
    analytic,
    breakeven,
    calibrate,
    cost,
    explore,
    groundtruth,
    models,
    plan,
    profiles,
    simulate,
    sweep,
    validate,
)

COMMANDS = (profiles, models, cost, analytic, breakeven, simulate, calibrate, groundtruth, validate, plan, sweep,
            explore)


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors in the form of every other input error: one line
    `specsight: error: --flag=value: what is allowed`, exit code 2 (subparsers inherit the class)."""

    def error(self, message: str) -> NoReturn:
        print(f"specsight: error: {argparse_error(self, message)}", file=sys.stderr)
        self.exit(2)


def _literal(text: str) -> object:
    """The value argparse quoted in its message ('x' -> x), or the text itself."""
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return text.strip()


def _action(parser: argparse.ArgumentParser, name: str) -> argparse.Action | None:
    """The action an argparse message names ("--axis", "--out/-o", a positional's dest or metavar)."""
    for a in parser._actions:
        if name in ("/".join(a.option_strings), a.dest, a.metavar):
            return a
    return None


_TYPE_WORDS = {"int": "must be an integer", "float": "must be a number"}


def argparse_error(parser: argparse.ArgumentParser, message: str) -> SpecsightInputError:
    """argparse's error message as a SpecsightInputError (field, value, what is allowed)."""
    m = re.match(r"argument (?P<arg>[^:]+): (?P<rest>.*)", message, re.S)
    if m:
        arg, rest = m["arg"], m["rest"]
        field = arg.split("/")[0]
        action = _action(parser, arg)
        if (c := re.match(r"invalid choice: (?P<v>.*?) \(choose from", rest, re.S)):
            value = _literal(c["v"])
            choices = [str(x) for x in (action.choices if action is not None and action.choices else [])]
            return SpecsightInputError(field, value, closest_names(str(value), choices) if choices else rest)
        if (t := re.match(r"invalid (?P<t>\w+) value: (?P<v>.*)", rest, re.S)):
            return SpecsightInputError(field, _literal(t["v"]), _TYPE_WORDS.get(t["t"], f"must be a valid {t['t']}"))
        if re.fullmatch(r"expected (one|at least one|at most one|\d+) arguments?", rest):
            return SpecsightInputError(field, None, f"needs a value ({rest})")
        got = re.search(r",? got (?P<v>'.*')$", rest)             # a type function's own message
        return SpecsightInputError(field, _literal(got["v"]) if got else None, rest[:got.start()] if got else rest)
    if (r := re.match(r"the following arguments are required: (?P<names>.*)", message)):
        names = [n.strip() for n in r["names"].split(",")]
        action = _action(parser, names[0])
        choices = f"; one of {', '.join(action.choices)}" if action is not None and action.choices else ""
        also = f" (also missing: {', '.join(names[1:])})" if len(names) > 1 else ""
        return SpecsightInputError(names[0], None, f"required{choices}{also}; `{parser.prog} -h` lists the arguments")
    if (u := re.match(r"unrecognized arguments: (?P<args>.*)", message)):
        first = u["args"].split()[0]
        options = [o for o in parser._option_string_actions if o.startswith("--")]
        hint = closest_names(first.split("=")[0], options) if first.startswith("-") else \
            f"`{parser.prog}` takes no more positional arguments"
        return SpecsightInputError("argument", first, f"unknown; {hint}")
    return SpecsightInputError(parser.prog, None, message)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="specsight", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """parse_args, with arguments no command knows reported by that command's parser (its options
    are the ones a "did you mean" should offer). A value that starts with a minus sign (`--values
    -3,5`) is the flag's value, so the command's own check says what is allowed."""
    argv = negative_values(sys.argv[1:] if argv is None else list(argv))
    args, extra = parser.parse_known_args(argv)
    if extra:
        subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        subs.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def negative_values(argv: list[str]) -> list[str]:
    """`--flag -3,5` -> `--flag=-3,5` (argparse would take `-3,5` for an option and say only
    "expected one argument")."""
    out: list[str] = []
    for a in argv:
        if out and re.match(r"^-\d", a) and out[-1].startswith("--") and "=" not in out[-1]:
            out[-1] = f"{out[-1]}={a}"
        else:
            out.append(a)
    return out


_SHOWN: set[str] = set()          # the SpecsightWarning texts this command has printed


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None,
                  _default: Callable[..., None] = warnings.showwarning) -> None:
    """SpecsightWarning as one line on stderr, each text once per command (Python's own once-only
    registry is reset whenever a study's points change the filters); any other warning as Python
    prints it."""
    if issubclass(category, SpecsightWarning):
        text = " ".join(str(message).split())
        if text not in _SHOWN:
            _SHOWN.add(text)
            print(f"specsight: warning: {text}", file=sys.stderr)
    else:
        _default(message, category, filename, lineno, file, line)


def main(argv: list[str] | None = None) -> int:
    _printable_streams()
    parser = build_parser()
    args = parse_args(parser, argv)
    real = sys.stdout
    sys.stdout = _GuardedStdout(real)        # type: ignore[assignment]
    _SHOWN.clear()
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            warnings.simplefilter("default", SpecsightWarning)     # each shown once, whatever filters the caller set
            rc = _run(args)
        sys.stdout.flush()
    except StdoutFailed as e:              # stdout on a full disk or /dev/full: say so, once
        return _stdout_failed(e.error)
    finally:
        sys.stdout = real
    return rc


class StdoutFailed(Exception):
    """Writing to stdout failed (not a closed pipe: that is BrokenPipeError, handled as cat does)."""

    def __init__(self, error: OSError):
        super().__init__(str(error))
        self.error = error


class _GuardedStdout:
    """sys.stdout, its write errors (ENOSPC on /dev/full, EIO) raised as StdoutFailed, so they are
    told apart from every other OSError."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise StdoutFailed(e) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise StdoutFailed(e) from None

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def _printable_streams() -> None:
    """stdout and stderr print any text: a character their encoding lacks (PYTHONIOENCODING=ascii
    and a scenario named café; a file name of non-UTF-8 bytes) as a backslash escape, never a
    UnicodeEncodeError that would lose a finished run."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")       # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):           # not a TextIOWrapper, or closed
            pass


def _stdout_failed(e: OSError) -> int:
    """One line for a stdout that cannot be written; stdout -> /dev/null so the exit's flush is quiet."""
    print(f"specsight: error: stdout: cannot be written ({e.strerror or e}); files written under --out "
          "were kept", file=sys.stderr)
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return 2


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
