"""One run at a time on an output: an exclusive `flock` on a lock file beside it.

A calibration times passes on this machine and appends them to its points file. A second run on
the same output would time every pass again, and both would time them while competing for the
same cores (or GPU), so neither's points would be what the machine does alone: sharing the points,
as simulation studies do (specsight/studies/shared/store_claims.py), would keep distorted
measurements. So the second run is refused at once, in one line naming the output and the run
that holds it. The lock is the kernel's, on the file `.NAME.lock`, dropped when its process ends
however it ends, so a killed run never leaves a stale lock (only the empty-of-meaning file, which
the next run reuses). A run that finishes removes the file before it lets go of the lock; a run
that locked a file just removed (its inode no longer at the path) tries again, so two runs never
hold two different files. Without POSIX `fcntl`, or on a file system without flock, nothing is
locked.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from .errors import SpecsightInputError

try:
    import fcntl
except ImportError:                 # pragma: no cover - not POSIX: no lock
    fcntl = None  # type: ignore[assignment]


def lock_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def exclusive_run(path: str | Path, flag: str, what: str) -> Iterator[None]:
    """Hold the lock of output `path` (named by `flag`) for the block; if another process holds
    it, one SpecsightInputError naming the path and that process's pid."""
    if fcntl is None:
        yield
        return
    lock = lock_path(path)
    fd = _take(lock, flag, path, what)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()           # (still holding the lock: whoever opened this file retries)
        os.close(fd)                # (closing drops the lock)


def _take(lock: Path, flag: str, path: str | Path, what: str) -> int:
    """An open descriptor of `lock`, exclusively locked, still the file at that path."""
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0),
                         0o666)
        except OSError as e:
            raise SpecsightInputError(flag, str(path), f"an output whose lock file {lock.name} can be created beside "
                                      f"it ({e.strerror or e})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            raise SpecsightInputError(flag, str(path), f"another {what} run (pid {holder or 'unknown'}) holds it "
                                      f"({lock.name}): wait for it to finish or choose another {flag}") from None
        except OSError:             # a file system without flock (ENOLCK): no lock
            return fd
        try:
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)                # the holder removed it as we locked it: take the new one
