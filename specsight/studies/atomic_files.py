"""Whole-file writes: a study's CSV, PNG and Markdown appear complete or not at all.

Each is written to a temporary file in the same folder and renamed over the target with
os.replace (atomic on POSIX and Windows within one file system). A reader never sees half a
file; two runs writing the same file leave the whole file of whichever renamed last.
"""
from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.errors import SpecsightInputError

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
