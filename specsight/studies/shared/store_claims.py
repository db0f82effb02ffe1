"""Several runs sharing one point store: a claim per point, so no point is computed twice.

Two runs (two `specsight sweep` commands, or two notebooks) may name the same store at once.
They share it rather than one refusing the other: a study that resumes, a second machine on a
shared folder, or a plan re-run while the first is still searching all want the points the
other run has finished, and a refusal would only make the user wait and rerun. Sharing costs
two small files beside the store, `.points.jsonl.lock` and the folder `.points.jsonl.claims/`:

- the mutex: an exclusive `flock` on `.points.jsonl.lock`, held only while a run reads what the
  others appended, decides which points to claim, or appends one record. Every decision about
  a point is made under it, and every append is one whole line written under it, so lines never
  interleave. The kernel drops the lock when its process dies, so the mutex is never stale.
- the run: each run holds an exclusive `flock` on its own `run-HOST-PID-TOKEN.alive` file (its
  pid, host, start time and command inside) for as long as it uses the store; another run finds
  it alive exactly when that lock cannot be taken. A pid alone could be reused, and could not be
  checked from another machine; the lock answers both.
- the claim: the file `claims/KEY` names the run computing that point. A run claims a point only
  when the store has no record of it and no live run claims it, computes it, appends its record,
  then deletes the claim. A claim whose run is dead (killed, or its machine lost) is stale: the
  next run reports it on stderr, one line per dead run, and computes those points itself.
  Points claimed by a live run are waited for (their records appear in the store), never redone;
  the waiting run says once on stderr which run it waits for. A run claims only a window of
  points at a time (points.py: twice its executor's slots), so two runs split a study's work.
  A run that exits, or is interrupted, deletes its open claims and its .alive file.

Readers without the mutex (PointStore's first read, a user's `tail`) see whole lines and at most
a torn last line, which they skip. Locking needs POSIX `fcntl` and a file system with flock;
without them every claim looks stale, so runs sharing a store may compute a point twice (each
record is still whole, the last one wins) but never wait for each other.
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from simulator.common.errors import SpecsightInputError

try:
    import fcntl
except ImportError:                 # pragma: no cover - not POSIX: no sharing, one run per store
    fcntl = None  # type: ignore[assignment]


def unusable_store(path: Path, e: OSError) -> SpecsightInputError:
    """The error for a store path that cannot be read or written (a file where a folder belongs...)."""
    return SpecsightInputError("store", str(path), f"a points.jsonl in a folder this run can create, read "
                               f"and write ({type(e).__name__}: {e.strerror or e})")


def _lock(fd: int, blocking: bool) -> bool:
    """An exclusive flock on fd; False when not blocking and another holder has it."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False
    except OSError:                 # a file system without flock (ENOLCK): locks are no-ops there
        return True


class StoreClaims:
    """One run's hold on the store at `path`: use as a context manager around the run. `claim`
    picks points to compute; `append` writes a finished point's record and drops its claim."""

    def __init__(self, path: Path, report: Callable[[str], None] | None = None):
        self.path = Path(path)
        self.lock_path = self.path.with_name(f".{self.path.name}.lock")
        self.claims_dir = self.path.with_name(f".{self.path.name}.claims")
        self.report = report or (lambda line: print(line, file=sys.stderr))
        self.me = f"run-{socket.gethostname()[:40]}-{os.getpid()}-{secrets.token_hex(4)}.alive"
        self._mine: set[str] = set()          # keys claimed and not yet appended
        self._alive_fd: int | None = None
        self._mutex_fd: int | None = None
        self._reported: set[tuple[str, str]] = set()

    # ---- the run's lifetime ----
    def __enter__(self) -> StoreClaims:
        try:
            self.claims_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.claims_dir / self.me, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o666)
            self._mutex_fd = os.open(self.lock_path, os.O_CREAT | os.O_RDWR, 0o666)
        except OSError as e:
            raise unusable_store(self.path, e) from None
        _lock(fd, blocking=True)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                 "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                                 "command": " ".join(sys.argv)[:500]}).encode())
        self._alive_fd = fd
        return self

    def __exit__(self, *exc) -> None:
        with self.mutex():                # nobody may judge our claims while we drop them
            for key in self._mine:
                self._unlink(self.claims_dir / key)
            self._mine.clear()
            self._unlink(self.claims_dir / self.me)
        os.close(self._alive_fd)          # (closing releases the run's lock)
        os.close(self._mutex_fd)

    # ---- the mutex ----
    @contextlib.contextmanager
    def mutex(self) -> Iterator[None]:
        """The store's exclusive lock, for a short critical section."""
        _lock(self._mutex_fd, blocking=True)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(self._mutex_fd, fcntl.LOCK_UN)

    # ---- claims ----
    def claim(self, keys: Iterable[str], limit: int, refresh: Callable[[], None],
              settled: Callable[[str], bool]) -> tuple[list[str], list[str]]:
        """Under the mutex: `refresh()` the store from disk, then walk `keys` in order and return
        (claimed, settled): up to `limit` points now ours to compute, and those another run has
        finished meanwhile (`settled(key)` true). Points a live run holds are in neither."""
        claimed: list[str] = []
        done: list[str] = []
        alive: dict[str, bool] = {}
        with self.mutex():
            refresh()
            for key in keys:
                if len(claimed) >= limit:
                    break
                if settled(key):
                    done.append(key)
                    continue
                owner = self._owner(key)
                if owner and owner != self.me:
                    if owner not in alive:
                        alive[owner] = self._alive(owner)
                    if alive[owner]:
                        self._report_waiting(owner)
                        continue
                    self._report_stale(owner)
                (self.claims_dir / key).write_text(self.me)
                self._mine.add(key)
                claimed.append(key)
        return claimed, done

    def append(self, key: str, write: Callable[[], None]) -> None:
        """Under the mutex: `write()` the point's record, then drop its claim."""
        with self.mutex():
            write()
            self._unlink(self.claims_dir / key)
            self._mine.discard(key)

    # ---- helpers ----
    def _owner(self, key: str) -> str | None:
        try:
            return (self.claims_dir / key).read_text().strip() or None
        except (FileNotFoundError, UnicodeDecodeError):
            return None

    def _alive(self, owner: str) -> bool:
        """Whether the run named `owner` still holds its lock (its .alive file)."""
        if fcntl is None:                    # no locks: nothing can be judged alive, nothing waits forever
            return False
        try:
            fd = os.open(self.claims_dir / owner, os.O_RDWR)
        except OSError:
            return False
        try:
            return not _lock(fd, blocking=False)
        finally:
            os.close(fd)                     # (closing releases the lock just taken on a dead run's file)

    def _describe(self, owner: str) -> str:
        try:
            info = json.loads((self.claims_dir / owner).read_text())
            return f"run pid {info['pid']} on {info['host']} (started {info['started']})"
        except (OSError, ValueError, KeyError, TypeError):
            return f"run {owner.removesuffix('.alive')}"

    def _report_waiting(self, owner: str) -> None:
        """One stderr line per live run whose claimed points this run waits for."""
        if ("live", owner) not in self._reported:
            self._reported.add(("live", owner))
            self.report(f"specsight: {self.path}: waiting for the points that {self._describe(owner)} "
                        "is computing (it shares this store)")

    def _report_stale(self, owner: str) -> None:
        """One stderr line per dead run whose claims are taken over; its .alive file is removed."""
        if ("dead", owner) in self._reported:
            return
        self._reported.add(("dead", owner))
        self.report(f"specsight: {self.path}: {self._describe(owner)} stopped without finishing its claimed "
                    "points; its stale claims are taken over and computed here")
        self._unlink(self.claims_dir / owner)

    @staticmethod
    def _unlink(p: Path) -> None:
        try:
            p.unlink()
        except FileNotFoundError:
            pass
