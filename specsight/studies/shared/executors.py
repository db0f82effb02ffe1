"""Where the points of a study run: this process, a local process pool, or a dask cluster.

`open_executor(workers, dask_address)` checks both inputs (SpecsightInputError naming the flag)
before it starts anything: `workers` an integer in [1, MAX_WORKERS]; `dask_address` a scheduler
address `tcp://HOST:PORT` (or tls, ucx, ws, wss, inproc) that answers within
DASK_CONNECT_TIMEOUT_S.

A local pool's workers never outlive the process that made them: each starts a daemon thread
that watches its parent pid and exits the worker when the parent is gone (killed, even with
SIGKILL, which leaves no chance to clean up): a worker forked by this process watches its own
parent pid change, one started by a fork server watches this pid disappear. Polling works on
every POSIX system and whichever thread made the pool; Linux's PR_SET_PDEATHSIG would fire
when the *thread* that forked the worker ends, which can be long before the process does.
"""
from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from simulator.common.cpus import usable_cpus
from simulator.common.errors import SpecsightInputError

MAX_WORKERS = 1024                  # local processes: more than any machine's cores
DASK_CONNECT_TIMEOUT_S = 10.0       # an unreachable scheduler is reported after this long
DASK_WORKER_WAIT_S = 60.0          # a scheduler with no worker would hold the points forever: wait this long
PARENT_POLL_S = 0.5                 # how often a pool worker checks that its parent lives
DASK_SCHEMES = ("tcp", "tls", "ucx", "ws", "wss", "inproc")
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


def check_workers(value: Any, field: str = "--workers") -> int:
    """An integer in [1, MAX_WORKERS] from an int or its decimal text (the command line's)."""
    allowed = f"an integer number of local processes in [1, {MAX_WORKERS}]"
    if isinstance(value, bool):
        raise SpecsightInputError(field, value, allowed)
    if isinstance(value, str):
        text = value.strip()
        if not re.fullmatch(r"[+-]?\d{1,30}", text):
            raise SpecsightInputError(field, value, allowed)
        value = int(text)
    elif isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or not 1 <= value <= MAX_WORKERS:
        raise SpecsightInputError(field, value, allowed)
    return value


def check_dask_address(address: Any, field: str = "--dask") -> str:
    """A dask scheduler address: SCHEME://HOST:PORT (SCHEME one of DASK_SCHEMES) or HOST:PORT;
    inproc:// addresses are taken as they are."""
    allowed = ("a dask scheduler address, e.g. tcp://10.0.0.5:8786 (tcp, tls, ucx, ws or wss, "
               "then HOST:PORT with PORT in [1, 65535])")
    if not isinstance(address, str) or not address.strip() or len(address) > 300:
        raise SpecsightInputError(field, address, allowed)
    text = address.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text
    if scheme not in DASK_SCHEMES:
        raise SpecsightInputError(field, address, allowed)
    if scheme == "inproc":
        return text
    m = _HOST_PORT.match(rest)
    if m is None or not 1 <= int(m.group(2)) <= 65535:
        raise SpecsightInputError(field, address, allowed)
    return text


def default_workers(n_points: int) -> int:
    """Processes for a local sweep: the usable CPUs, but no more than the points to run."""
    return max(1, min(usable_cpus(), n_points))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _watch_parent(parent_pid: int) -> None:
    """Pool-worker initializer: exit this worker as soon as process `parent_pid` is gone. A worker
    forked by it watches its own parent pid (exact); one started by a fork server (whose parent
    is the server) watches that `parent_pid` still exists."""
    forked = os.getppid() == parent_pid
    def parent_lives() -> bool:
        return os.getppid() == parent_pid if forked else _pid_alive(parent_pid)

    def watch() -> None:
        while parent_lives():
            time.sleep(PARENT_POLL_S)
        os._exit(1)                       # no cleanup: the parent that would collect the results is gone
    if not parent_lives():                # the parent died before this worker started
        os._exit(1)
    threading.Thread(target=watch, name="specsight-parent-watch", daemon=True).start()


def process_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of `workers` processes that exit when this process dies."""
    return ProcessPoolExecutor(max_workers=workers, initializer=_watch_parent, initargs=(os.getpid(),))


@contextlib.contextmanager
def _dask_client(address: str) -> Iterator[Any]:
    try:
        from distributed import Client
    except ImportError:   # pragma: no cover - dask[distributed] is a dependency
        raise SpecsightInputError("--dask", address,
                                  "needs dask.distributed (pip install 'dask[distributed]')") from None
    try:
        client = Client(address, timeout=f"{DASK_CONNECT_TIMEOUT_S}s")
    except (OSError, ValueError, TypeError) as e:      # (TimeoutError is an OSError)
        raise SpecsightInputError("--dask", address, f"a reachable dask scheduler; none answered within "
                                  f"{DASK_CONNECT_TIMEOUT_S:g} s ({e})") from None
    try:
        try:
            client.wait_for_workers(1, timeout=DASK_WORKER_WAIT_S)
        except (OSError, TimeoutError) as e:       # (dask raises TimeoutError)
            raise SpecsightInputError("--dask", address, f"a scheduler with workers; none joined within "
                                      f"{DASK_WORKER_WAIT_S:g} s ({type(e).__name__}): start one with "
                                      f"`dask worker {address}`") from None
        yield client
    finally:
        client.close()


@contextlib.contextmanager
def open_executor(workers: int | str | None = None, dask_address: str | None = None) -> Iterator[Any]:
    """A dask.distributed Client on `dask_address`, else a process pool of `workers` processes
    (default: the CPU count), else (workers == 1) None: run in this process."""
    if dask_address is not None:
        address = check_dask_address(dask_address)
        if workers is not None:
            raise SpecsightInputError("--workers", workers, "sets local processes; with --dask the "
                                      "cluster's workers run the points (leave --workers out)")
        with _dask_client(address) as client:
            yield client
        return
    n = usable_cpus() if workers is None else check_workers(workers)
    if n <= 1:
        yield None
        return
    with process_pool(n) as pool:
        yield pool


@contextlib.contextmanager
def study_executor(executor: Any, workers: int | str | None, dask_address: str | None, n_points: int) -> Iterator[Any]:
    """`executor` itself when given; else open_executor(workers, dask_address): `workers`
    defaults to default_workers(n_points) and is capped there (more processes than points idle)."""
    if executor is not None:
        yield executor
        return
    if dask_address is not None:
        with open_executor(workers, dask_address) as ex:
            yield ex
        return
    n = default_workers(n_points) if workers is None else min(check_workers(workers), max(1, n_points))
    with open_executor(n) as ex:
        yield ex


def parallel_slots(executor: Any) -> int:
    """How many points `executor` runs at once (a dask cluster: its threads; at least 1)."""
    if executor is None:
        return 1
    if is_dask_client(executor):
        try:
            return max(1, sum(executor.nthreads().values()))
        except Exception:   # noqa: BLE001 - a scheduler that does not answer: guess
            return 32
    return max(1, int(getattr(executor, "_max_workers", usable_cpus())))


def is_dask_client(ex: Any) -> bool:
    return type(ex).__module__.startswith("distributed") and hasattr(ex, "gather")
