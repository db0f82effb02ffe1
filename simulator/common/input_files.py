"""Reading the files a user names (scenario YAML, hardware and engine profiles, model config.json,
CSV traces, benchmark results, ground-truth runs, points files): every way a file can be wrong is
one SpecsightInputError line naming the field, the path and the position of what is wrong, never
the file's contents. Nothing here raises OSError, UnicodeDecodeError or RecursionError, and
nothing blocks: the kind of file is checked before it is opened, and opened without waiting.

    missing, unreadable, a name too long, a symlink loop  "no such file" / the OS's reason
    a directory, FIFO, socket or device (/dev/zero)      refused by its kind before it is opened
    larger than its kind's limit (MAX_BYTES)             refused before reading; never read past it
    not UTF-8, empty                                     refused, with the line and column
    nested deeper than MAX_NESTING, an alias that        refused, with the key path
      contains itself, more than MAX_NODES values
    an integer of more than MAX_INT_DIGITS digits        refused, with the line and column
YAML is read with PyYAML's safe loader, stricter: a duplicate key is refused (YAML would keep
the last), a tag such as `!!python/object` is refused as unsupported (the safe loader never
constructs objects), and `5e-05` is a number as in YAML 1.2 (YAML 1.1 reads it as text).
The limits are constants here; docs/schema.md lists them (a bigger file: split it).
"""
from __future__ import annotations

import copy
import errno
import functools
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from .errors import SpecsightInputError

MiB = 2 ** 20
MAX_BYTES = {                  # the largest file of each kind read (a scenario is a few kB)
    "scenario": 1 * MiB,
    "profile": 1 * MiB,        # hardware and engine profiles
    "config": 16 * MiB,        # a model's config.json
    "csv": 256 * MiB,          # traces (the Azure traces are 1-2 MiB)
    "json": 64 * MiB,          # benchmark results, ground-truth runs (a few hundred kB)
    "records": 1024 * MiB,     # points files (JSON lines), a record per simulated point
}
MAX_NESTING = 64               # levels of lists and mappings (the deepest real file has 6)
MAX_NODES = 10 ** 7            # values in one file, aliases counted each time they are used
MAX_INT_DIGITS = 4300          # Python's own limit on converting text to an integer
_LONG_INT = re.compile(f"[0-9]{{{MAX_INT_DIGITS + 1}}}")


def usable_file(path: object) -> Path | None:
    """The path if it names an existing regular file, else None (an over-long or otherwise
    impossible name is None too, never an OSError)."""
    try:
        p = Path(path)            # type: ignore[arg-type]
        return p if p.is_file() else None
    except (OSError, ValueError, TypeError):      # ENAMETOOLONG, a NUL byte, a non-path
        return None


def file_kind(mode: int) -> str:
    """What a stat mode names, in words ("a regular file", "a directory", "a FIFO (named pipe)", ...)."""
    for test, words in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"),
                        (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return words
    return "not a regular file"


def os_reason(e: BaseException) -> str:
    """An OSError's reason in words (ENAMETOOLONG with the limit), or the exception's text."""
    if isinstance(e, FileNotFoundError):
        return "no such file"
    if isinstance(e, PermissionError):
        return "permission denied: the file is not readable"
    why = os.strerror(e.errno) if isinstance(e, OSError) and e.errno else str(e)
    if isinstance(e, OSError) and e.errno == errno.ENAMETOOLONG:
        why += " (at most 255 characters per path component)"
    if isinstance(e, OSError) and e.errno == errno.ELOOP:
        why += " (a symlink loop)"
    return why


def read_bytes(path: object, field: str, kind: str) -> bytes:
    """The file's bytes, at most MAX_BYTES[kind], from a regular file only (anything else is
    refused by its kind before it is opened, so a FIFO or /dev/zero never blocks or streams)."""
    limit = MAX_BYTES[kind]
    shown = str(path)
    try:
        p = Path(path)            # type: ignore[arg-type]
        st = p.stat()
        if not stat.S_ISREG(st.st_mode):
            raise SpecsightInputError(field, shown, f"is {file_kind(st.st_mode)}; expected a {kind} file "
                                                    "(a regular file)")
        if st.st_size > limit:
            raise SpecsightInputError(field, shown, f"file of {st.st_size:,} bytes; a {kind} file may hold at "
                                                    f"most {limit:,} bytes")
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())                # the file opened is the file checked
            if not stat.S_ISREG(st.st_mode):
                raise SpecsightInputError(field, shown, f"is {file_kind(st.st_mode)}; expected a {kind} file")
            data = fh.read(limit + 1)
    except SpecsightInputError:
        raise
    except (OSError, ValueError, TypeError) as e:     # ENAMETOOLONG, ENOTDIR, ELOOP, a NUL byte in the name
        why = os_reason(e)
        raise SpecsightInputError(field, shown, why if why == "no such file" or why.startswith("permission")
                                  else f"cannot be read: {why}") from None
    if len(data) > limit:
        raise SpecsightInputError(field, shown, f"a {kind} file may hold at most {limit:,} bytes")
    return data


def line_col(data: bytes | str, offset: int) -> str:
    """'line L column C' (1-based) of a byte or character offset."""
    nl = b"\n" if isinstance(data, bytes) else "\n"
    line = data.count(nl, 0, offset) + 1              # type: ignore[arg-type]
    return f"line {line} column {offset - (data.rfind(nl, 0, offset) + 1) + 1}"  # type: ignore[arg-type]


def read_text(path: object, field: str, kind: str) -> str:
    """The file's text (UTF-8), or one SpecsightInputError saying what is wrong with it and where."""
    data = read_bytes(path, field, kind)
    shown = str(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecsightInputError(field, shown, f"is not UTF-8 text (at {line_col(data, e.start)}, byte "
                                                f"{e.start:,}); expected a {kind} file") from None
    if not text.strip():
        raise SpecsightInputError(field, shown, f"is empty; expected a {kind} file")
    if (m := _LONG_INT.search(text)):
        raise SpecsightInputError(field, shown, f"holds a number of more than {MAX_INT_DIGITS:,} digits at "
                                                f"{line_col(text, m.start())} (far beyond every limit: "
                                                "docs/schema.md)")
    return text.removeprefix("\ufeff")


def check_nesting(value: Any, field: str, shown: str) -> Any:
    """`value` itself when its lists and mappings nest at most MAX_NESTING deep, hold at most
    MAX_NODES values, and none contains itself (a YAML alias such as `&a [*a]`); else one error
    naming where (the key path)."""
    stack: list[tuple[Any, int, str, frozenset]] = [(value, 0, "", frozenset())]
    nodes = 0
    while stack:
        v, depth, where, above = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise SpecsightInputError(field, shown, f"holds more than {MAX_NODES:,} values (YAML aliases "
                                                    "count each time they are used)")
        if not isinstance(v, (dict, list)):
            continue
        at = where or "the top level"
        if id(v) in above:
            raise SpecsightInputError(field, shown, f"contains itself at {at} (a YAML alias inside its own "
                                                    "anchor): write the value out")
        if depth >= MAX_NESTING:
            raise SpecsightInputError(field, shown, f"nested more than {MAX_NESTING} levels deep at "
                                                    f"{where[:80]}...")
        inner = above | {id(v)}
        items = v.items() if isinstance(v, dict) else enumerate(v)
        for k, x in items:
            if isinstance(x, (dict, list)):
                step = f"[{k}]" if isinstance(v, list) else (f".{k}" if where else str(k))
                stack.append((x, depth + 1, where + step, inner))
            else:
                nodes += 1
    return value


class _StrictLoader(yaml.SafeLoader):
    """The safe loader, refusing duplicate keys, reading `5e-05` and `1e3` as numbers (YAML 1.2)."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:   # type: ignore[override]
        if isinstance(node, yaml.MappingNode):
            seen: set = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    dup = key in seen
                except TypeError:          # unhashable: the base class reports it
                    continue
                if dup:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}: each key may appear once", key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


_StrictLoader.add_implicit_resolver(          # YAML 1.2 floats without a dot: 5e-05, 1E3, -2e+10
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9]+[eE][-+]?[0-9]+$"), list("-+0123456789"))


def parse_yaml(text: str, field: str, shown: str) -> Any:
    """YAML text -> Python values; every failure is one SpecsightInputError(field, shown, ...)."""
    if (m := _LONG_INT.search(text)):
        raise SpecsightInputError(field, shown, f"holds a number of more than {MAX_INT_DIGITS:,} digits at "
                                                f"{line_col(text, m.start())}")
    try:
        if len(text) > MAX_KEPT_CHARS:
            return _parse_checked(text, field, shown)
        return copy.deepcopy(_kept_parse(text, field, shown))      # a copy: the caller may change what it gets
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = str(getattr(e, "problem", "") or "")
        if "could not determine a constructor for the tag" in problem:
            tag = problem.split("tag", 1)[1].strip(" '")
            raise SpecsightInputError(field, shown, f"unsupported YAML tag {tag}{at}: only plain YAML is read "
                                                    "(mappings, lists, strings, numbers, booleans, null); "
                                                    "nothing is executed") \
                from None
        if problem.startswith("duplicate key"):
            raise SpecsightInputError(field, shown, f"{problem}{at}") from None
        raise SpecsightInputError(field, shown, f"malformed YAML{at}: {problem or e}; fix the YAML syntax") from None
    except RecursionError:
        raise SpecsightInputError(field, shown, f"YAML nested too deeply to parse (at most {MAX_NESTING} "
                                                "levels)") from None


def _parse_checked(text: str, field: str, shown: str) -> Any:
    return check_nesting(yaml.load(text, Loader=_StrictLoader), field, shown)   # noqa: S506 (a SafeLoader)


# The checked parses of the last KEPT_PARSES texts of at most MAX_KEPT_CHARS, kept by their content
# and the field and name an error would give (so an edited file is parsed again): a profile or
# scenario that every simulation of a study reads is parsed once (PyYAML's Python loader: 3.4 ms
# median for hardware_profiles/h100-sxm.yaml, 5.9 kB, a kept parse's deep copy 0.03 ms, at load
# 1.1). A failure is raised every time, never kept.
KEPT_PARSES, MAX_KEPT_CHARS = 256, 64 * 1024
_kept_parse = functools.lru_cache(maxsize=KEPT_PARSES)(_parse_checked)


def read_yaml(path: object, field: str, kind: str) -> Any:
    """A YAML file of `kind` (see MAX_BYTES), parsed strictly."""
    return parse_yaml(read_text(path, field, kind), field, str(path))


def parse_json(text: str, field: str, shown: str) -> Any:
    """JSON text -> Python values (NaN and Infinity parse: the reader of each key refuses them by
    name); every failure is one SpecsightInputError with the line and column."""
    try:
        return check_nesting(json.loads(text), field, shown)
    except json.JSONDecodeError as e:
        raise SpecsightInputError(field, shown, f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") \
            from None
    except RecursionError:
        raise SpecsightInputError(field, shown, f"JSON nested too deeply to parse (at most {MAX_NESTING} "
                                                "levels)") from None


def read_json(path: object, field: str, kind: str = "config") -> Any:
    """A JSON file of `kind` (see MAX_BYTES)."""
    return parse_json(read_text(path, field, kind), field, str(path))


def read_json_lines(path: object, field: str, kind: str = "json") -> list[tuple[int, Any]]:
    """(line number, value) of every non-blank line of a JSON-lines file."""
    text = read_text(path, field, kind)
    return [(i, parse_json(ln, f"{path}:{i}", field)) for i, ln in enumerate(text.splitlines(), 1)
            if ln.strip()]


def read_csv_frame(path: object, field: str) -> Any:
    """A headed CSV file as a pandas DataFrame (for calibrate/, which has pandas), read through
    read_text: its kind, size and encoding checked; a malformed table is one error naming the file."""
    import io

    import pandas as pd
    text = read_text(path, field, "csv")
    try:
        return pd.read_csv(io.StringIO(text))
    except (ValueError, pd.errors.ParserError) as e:   # (EmptyDataError is a ValueError)
        raise SpecsightInputError(field, str(path), f"a CSV table with a header row ({type(e).__name__} at "
                                                    f"{str(e).split(':')[0][:80]})") from None
