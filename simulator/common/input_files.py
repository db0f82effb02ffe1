"""Reading the files a user names (scenario YAML, hardware profile YAML, model config.json, CSV
traces): every way a file can be wrong is one SpecsightInputError line naming the field, the
path and what is expected. Nothing here raises OSError, UnicodeDecodeError or RecursionError.

    missing, a directory, unreadable, a name too long   "no such file" / "is a directory" / the OS's reason
    larger than its kind's limit (MAX_BYTES)           refused before reading
    not UTF-8, empty                                   refused, with the byte offset
YAML is read with PyYAML's safe loader, stricter: a duplicate key is refused (YAML would keep
the last), a tag such as `!!python/object` is refused as unsupported (the safe loader never
constructs objects), and nesting deeper than Python can parse is refused.
"""
from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from .errors import SpecsightInputError

MiB = 2 ** 20
TOO_MANY_DIGITS = "holds an integer of more than 4,300 digits (far beyond every limit: docs/schema.md)"
MAX_BYTES = {                  # the largest file of each kind read (a scenario is a few kB)
    "scenario": 1 * MiB,
    "profile": 1 * MiB,
    "config": 16 * MiB,
    "csv": 256 * MiB,
}


def usable_file(path: object) -> Path | None:
    """The path if it names an existing regular file, else None (an over-long or otherwise
    impossible name is None too, never an OSError)."""
    try:
        p = Path(path)            # type: ignore[arg-type]
        return p if p.is_file() else None
    except (OSError, ValueError, TypeError):      # ENAMETOOLONG, a NUL byte, a non-path
        return None


def read_text(path: object, field: str, kind: str) -> str:
    """The file's text (UTF-8), or one SpecsightInputError saying what is wrong with it."""
    limit = MAX_BYTES[kind]
    shown = str(path)
    try:
        p = Path(path)            # type: ignore[arg-type]
        st = p.stat()
        if stat.S_ISDIR(st.st_mode):
            raise SpecsightInputError(field, shown, f"is a directory; expected a {kind} file")
        if not stat.S_ISREG(st.st_mode):
            raise SpecsightInputError(field, shown, f"is not a regular file (a device, pipe or socket); expected a "
                                                    f"{kind} file")
        size = st.st_size
        if size > limit:
            raise SpecsightInputError(field, shown, f"file of {size:,} bytes; a {kind} file may hold at most "
                                                    f"{limit:,} bytes")
        with p.open("rb") as fh:
            data = fh.read(limit + 1)
    except SpecsightInputError:
        raise
    except FileNotFoundError:
        raise SpecsightInputError(field, shown, "no such file") from None
    except PermissionError:
        raise SpecsightInputError(field, shown, "permission denied: the file is not readable") from None
    except (OSError, ValueError, TypeError) as e:     # ENAMETOOLONG, ENOTDIR, ELOOP, a NUL byte in the name, not a path
        why = os.strerror(e.errno) if isinstance(e, OSError) and e.errno else str(e)
        if isinstance(e, OSError) and e.errno == errno.ENAMETOOLONG:
            why += " (at most 255 characters per path component)"
        raise SpecsightInputError(field, shown, f"cannot be read: {why}") from None
    if len(data) > limit:
        raise SpecsightInputError(field, shown, f"a {kind} file may hold at most {limit:,} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecsightInputError(field, shown, f"is not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r})") \
            from None
    if not text.strip():
        raise SpecsightInputError(field, shown, f"is empty; expected a {kind} file")
    return text.removeprefix("\ufeff")


class _StrictLoader(yaml.SafeLoader):
    """The safe loader, refusing duplicate keys."""

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


def parse_yaml(text: str, field: str, shown: str) -> Any:
    """YAML text -> Python values; every failure is one SpecsightInputError(field, shown, ...)."""
    try:
        return yaml.load(text, Loader=_StrictLoader)        # noqa: S506 (a SafeLoader subclass)
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
        raise SpecsightInputError(field, shown, "YAML nested too deeply to parse") from None
    except ValueError:                 # Python refuses to convert an integer of more than 4,300 digits
        raise SpecsightInputError(field, shown, TOO_MANY_DIGITS) from None


def read_yaml(path: object, field: str, kind: str) -> Any:
    """A YAML file of `kind` (see MAX_BYTES), parsed strictly."""
    return parse_yaml(read_text(path, field, kind), field, str(path))


def read_json(path: object, field: str, kind: str = "config") -> Any:
    """A JSON file; NaN and Infinity parse (the reader of each key refuses them by name)."""
    text = read_text(path, field, kind)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecsightInputError(field, str(path), f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") \
            from None
    except RecursionError:
        raise SpecsightInputError(field, str(path), "JSON nested too deeply to parse") from None
    except ValueError:                 # Python refuses to convert an integer of more than 4,300 digits
        raise SpecsightInputError(field, str(path), TOO_MANY_DIGITS) from None
