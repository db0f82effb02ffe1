"""Append-only JSON-lines files that survive interruption: finished records are never lost.

A run killed mid-write leaves a torn last line. Reading skips it; opening for append first cuts
the file back to its last complete line, so the next record starts on a line of its own. Reading
goes through input_files (a regular file, its size bounded); writing through atomic_files (never
through a symlink, never into a device).
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from .atomic_files import check_target, open_records
from .input_files import read_bytes


def read_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """Every complete JSON-object line of `path`, in file order (none if it does not exist)."""
    path = Path(path)
    if not os.path.lexists(path):
        return
    check_target(path, "points file")           # a symlink or a device is refused, not read
    for line in read_bytes(path, "points file", "records").splitlines():
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, ValueError):
            continue
        if isinstance(rec, dict):
            yield rec


def _cut_torn_tail(path: Path) -> None:
    """Truncate `path` after its last newline (drops a partial last line, if any)."""
    with open_records(path, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        f.seek(0)
        data = f.read()
        f.truncate(data.rfind(b"\n") + 1)


def open_append(path: str | Path) -> TextIO:
    """Open `path` for appending records (creating its folder), torn tail removed first."""
    path = check_target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        _cut_torn_tail(path)
    return open_records(path, "a")


def write_record(f: TextIO, record: dict[str, Any]) -> None:
    """One record as one line, flushed, so an interruption loses at most the line being written."""
    f.write(json.dumps(record, allow_nan=False) + "\n")
    f.flush()
