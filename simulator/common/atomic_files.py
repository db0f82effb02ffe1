"""Every file a command writes: whole-file writes that appear complete or not at all, and the
append-only records files, written only as regular files.

Each whole file is written to a temporary file in the same folder and renamed over the target with
os.replace (atomic on POSIX and Windows within one file system). A reader never sees half a
file; two runs writing the same file leave the whole file of whichever renamed last.
`out_folder` and `out_file` check (and create) where a command writes before it does any work,
so a bad --out costs one line, not a finished computation.

What is already at a target decides: nothing, or a regular file, is written (replaced); a device
(/dev/null), FIFO, socket, directory or symlink is refused by its kind, never replaced or
followed, so a run as root cannot turn /dev/null into a file, and a points.jsonl symlink in --out
cannot make a run cut or append to the file it points at. A name that is not valid text (bytes
of another encoding) is written as given and printed with its odd bytes escaped.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .errors import SpecsightInputError
from .input_files import file_kind

if TYPE_CHECKING:
    import pandas as pd


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path` (same suffix, so writers that go by it still do);
    on success rename it onto `path`, on failure remove it. An OSError (no such folder, a folder
    where the file belongs, a full disk) becomes one SpecsightInputError naming the file."""
    path = check_target(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}-{secrets.token_hex(4)}.tmp{path.suffix}")
    try:
        yield tmp
        check_target(path)                     # still nothing but a regular file there
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(e, OSError):
            raise SpecsightInputError("output file", str(path), f"a file this run can write "
                                      f"({type(e).__name__}: {e.strerror or e})") from None
        raise


def check_target(path: str | Path, field: str = "output file") -> Path:
    """`path` when nothing is there or a regular file (not a symlink); else one error naming what
    is there. Written files go only where this says yes."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path
    except OSError as e:
        raise SpecsightInputError(field, str(path), f"a file this run can write ({type(e).__name__}: "
                                  f"{e.strerror or e})") from None
    if stat.S_ISLNK(st.st_mode):
        raise SpecsightInputError(field, str(path), "is a symlink: outputs are written only as regular files "
                                                    "(remove the link or choose another --out)")
    if not stat.S_ISREG(st.st_mode):
        raise SpecsightInputError(field, str(path), f"is {file_kind(st.st_mode)}: outputs are written only as "
                                                    "regular files (choose another --out)")
    return path


def open_records(path: str | Path, mode: str) -> TextIO:
    """Open a records file (JSON lines) for "a" (append, created if absent) or "r+b"; refuses a
    symlink or anything but a regular file at `path` (O_NOFOLLOW: never through a link)."""
    path = check_target(path)
    flags = {"a": os.O_WRONLY | os.O_APPEND | os.O_CREAT, "r+b": os.O_RDWR}[mode]
    try:
        fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) |
                     getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as e:
        raise SpecsightInputError("output file", str(path), f"a file this run can write ({type(e).__name__}: "
                                  f"{e.strerror or e})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        check_target(path)
        raise SpecsightInputError("output file", str(path), "a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, mode if mode != "a" else "a", encoding=None if "b" in mode else "utf-8")


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
    path = encodable(path, flag)
    if not path.name or len(path.name.encode()) > 255:
        raise SpecsightInputError(flag, str(path), "a file name of 1 to 255 bytes")
    _make_folder(path.parent, flag, path)
    if path.is_dir():
        raise SpecsightInputError(flag, str(path), "a file to write, not a folder")
    return check_target(path, flag)


def encodable(path: str | Path, flag: str) -> Path:
    """`path` when its name is text every writer can encode (UTF-8); bytes of another encoding
    (which Python keeps as surrogates) are refused with their position."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise SpecsightInputError(flag, text.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
                                  f"a path of UTF-8 text (character {e.start + 1} is a byte of another "
                                  "encoding); rename it") from None
    return Path(path)


def _make_folder(folder: Path, flag: str, given: Path) -> Path:
    encodable(given, flag)
    try:
        if folder.is_symlink() and not folder.is_dir():
            raise SpecsightInputError(flag, str(given), "a folder; this is a dangling symlink")
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
        probe = folder / f".specsight-probe-{os.getpid()}-{secrets.token_hex(4)}"    # what access() cannot tell
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))       # (/proc as root, a read-only
        os.unlink(probe)                                                             # mount): a file can be made
    except OSError as e:
        what = "a folder" if folder == given else f"a file in a folder ({folder})"
        raise SpecsightInputError(flag, str(given), f"{what} this run can create and write "
                                  f"({type(e).__name__}: {e.strerror or e})") from None
    return folder
