"""Whole-file writes: a study's CSV, PNG and Markdown appear complete or not at all.

Each is written to a temporary file in the same folder and renamed over the target with
os.replace (atomic on POSIX and Windows within one file system). A reader never sees half a
file; two runs writing the same file leave the whole file of whichever renamed last.
`out_folder` and `out_file` check (and create) where a command writes before it does any work,
so a bad --out costs one line, not a finished computation.
"""
from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.common.errors import SpecsightInputError

if TYPE_CHECKING:
    import pandas as pd


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path` (same suffix, so writers that go by it still do);
    on success rename it onto `path`, on failure remove it. An OSError (no such folder, a folder
    where the file belongs, a full disk) becomes one SpecsightInputError naming the file."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}-{secrets.token_hex(4)}.tmp{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(e, OSError):
            raise SpecsightInputError("output file", str(path), f"a file this run can write "
                                      f"({type(e).__name__}: {e.strerror or e})") from None
        raise


def write_text(path: str | Path, text: str) -> Path:
    """`path.write_text(text)`, whole or not at all."""
    with replacing(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def write_csv(frame: pd.DataFrame, path: str | Path) -> Path:
    """`frame.to_csv(path, index=False)`, whole or not at all."""
    with replacing(path) as tmp:
        frame.to_csv(tmp, index=False)
    return Path(path)


def out_folder(path: str | Path, flag: str = "--out") -> Path:
    """Create the output folder `path` (and its parents) now; anything in the way (a file on the
    path, no permission, a name too long) is one SpecsightInputError naming `flag`."""
    return _make_folder(Path(path), flag, Path(path))


def out_file(path: str | Path, flag: str = "--out") -> Path:
    """Check that the file `path` can be written (its folder is created now, the file itself is
    not): a folder at `path` or anything in the way of its folder is one SpecsightInputError."""
    path = Path(path)
    if not path.name or len(path.name.encode()) > 255:
        raise SpecsightInputError(flag, str(path), "a file name of 1 to 255 bytes")
    _make_folder(path.parent, flag, path)
    if path.is_dir():
        raise SpecsightInputError(flag, str(path), "a file to write, not a folder")
    return path


def _make_folder(folder: Path, flag: str, given: Path) -> Path:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as e:
        what = "a folder" if folder == given else f"a file in a folder ({folder})"
        raise SpecsightInputError(flag, str(given), f"{what} this run can create and write "
                                  f"({type(e).__name__}: {e.strerror or e})") from None
    return folder
