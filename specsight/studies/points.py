"""Evaluate scenario points, storing every finished point at once (the resumable point store).

`run_points(scenario, points, store_path, executor=...)` evaluates each point (a mapping of
dotted key paths to values, see overrides.py) with `simulator.run.simulate` and appends one JSON
line per finished point to the store:

    {"key": "3f9a...", "overrides": {...}, "baseline": false, "summary": {...} | null,
     "error": null | "SpecsightInputError: ...", "elapsed_s": 1.9, "scenario": "name"}

The key hashes the scenario content, the overrides, the baseline flag and the simulator's own
source and data (simulator/*.py, hardware_profiles/, models/), so a rerun skips every point
already stored (resume after an interruption) and a changed model never reuses stale results.
A point that raises records its error and the study goes on; `retry_errors=True` recomputes them.

Executors: None runs in this process; any `concurrent.futures.Executor` (a ProcessPoolExecutor
by default); or a `dask.distributed.Client`. `open_executor(workers, dask_address)` makes one.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sys
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from simulator.cpus import usable_cpus
from simulator.errors import SpecsightInputError, require_int
from simulator.jsonl import open_append, read_records, write_record
from simulator.paths import HARDWARE_DIR, MODELS_DIR, REPO_ROOT

from .jsonable import json_safe
from .overrides import override_strings, scenario_source

_CODE_VERSION: str | None = None


# ---- keys ---------------------------------------------------------------------------------------
def code_version() -> str:
    """Hash of what a result depends on besides the scenario: the simulator's source and the
    hardware and model catalogs (computed once per process)."""
    global _CODE_VERSION
    if _CODE_VERSION is None:
        h = hashlib.sha256()
        files = sorted((REPO_ROOT / "simulator").glob("*.py")) + sorted(HARDWARE_DIR.glob("*.yaml")) \
            + sorted(MODELS_DIR.glob("*.json"))
        for f in files:
            h.update(f.name.encode())
            h.update(f.read_bytes())
        _CODE_VERSION = h.hexdigest()[:16]
    return _CODE_VERSION


def point_key(source: Mapping[str, Any], overrides: Mapping[str, Any], baseline: bool = False) -> str:
    """A stable hash of (scenario content, overrides, baseline flag, code version)."""
    blob = json.dumps({"scenario": source, "overrides": overrides, "baseline": bool(baseline),
                       "code": code_version()}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


# ---- one point ----------------------------------------------------------------------------------
def queue_stats(requests) -> dict[str, float]:
    """Is the queue growing? Mean TTFT (s) of the first and last quarter of requests by arrival
    time: under a stable load they are alike; past capacity the last quarter waits far longer."""
    import numpy as np
    r = requests.sort_values("arrival_s", kind="stable")
    ttft = (r["first_token_s"] - r["arrival_s"]).to_numpy()
    n = len(ttft)
    q = max(1, n // 4)
    return {"ttft_first_quarter_s": float(np.nanmean(ttft[:q])) if n else math.nan,
            "ttft_last_quarter_s": float(np.nanmean(ttft[-q:])) if n else math.nan}


def evaluate_point(source: Mapping[str, Any], overrides: Mapping[str, Any], baseline: bool = False) -> dict[str, Any]:
    """Simulate one point; returns the (JSON-safe) summary plus queue-growth statistics."""
    from simulator.run import simulate
    from simulator.scenario import load_scenario
    sc = load_scenario(source, override_strings(overrides))
    r = simulate(sc, baseline=baseline)
    summary = dict(r.summary)
    summary.update(queue_stats(r.requests))
    return json_safe(summary)


def _task(source: Mapping[str, Any], overrides: Mapping[str, Any], baseline: bool) -> dict[str, Any]:
    """Worker entry: never raises; an exception becomes the record's error."""
    t0 = time.perf_counter()
    try:
        summary, error = evaluate_point(source, overrides, baseline), None
    except Exception as e:   # noqa: BLE001 - a failing point is recorded and the sweep goes on
        summary, error = None, f"{type(e).__name__}: {e}"
    return {"overrides": json_safe(dict(overrides)), "baseline": bool(baseline), "summary": summary,
            "error": error, "elapsed_s": round(time.perf_counter() - t0, 3)}


# ---- the store ----------------------------------------------------------------------------------
class PointStore:
    """An append-only JSON-lines file of finished points, indexed by key (last record wins).
    A truncated last line (an interrupted write) is ignored."""

    def __init__(self, path: str | Path | None):
        self.path = None if path is None else Path(path)
        self.records: dict[str, dict[str, Any]] = {}
        self._tail_checked = False     # a torn tail can only predate this store: cut once
        if self.path is not None:
            for rec in read_records(self.path):
                if "key" in rec:
                    self.records[rec["key"]] = rec

    def __contains__(self, key: str) -> bool:
        return key in self.records

    def __len__(self) -> int:
        return len(self.records)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.records.get(key)

    def put(self, record: dict[str, Any]) -> None:
        self.records[record["key"]] = record
        if self.path is not None:
            with (self.path.open("a") if self._tail_checked else open_append(self.path)) as f:
                write_record(f, record)
            self._tail_checked = True


# ---- executors ----------------------------------------------------------------------------------
def _is_dask_client(ex: Any) -> bool:
    return type(ex).__module__.startswith("distributed") and hasattr(ex, "gather")


@contextlib.contextmanager
def open_executor(workers: int | None = None, dask_address: str | None = None) -> Iterator[Any]:
    """A dask.distributed Client on `dask_address`, else a ProcessPoolExecutor of `workers`
    processes (default: the CPU count), else (workers <= 1) None: run in this process."""
    if dask_address:
        try:
            from distributed import Client
        except ImportError:   # pragma: no cover - dask[distributed] is a dependency
            raise SpecsightInputError("--dask", dask_address, "needs dask.distributed (pip install 'dask[distributed]')") from None
        try:
            client = Client(dask_address, timeout="20s")
        except OSError as e:
            raise SpecsightInputError("--dask", dask_address, f"no dask scheduler reachable there ({e})") from None
        try:
            yield client
        finally:
            client.close()
        return
    n = usable_cpus() if workers is None else require_int("--workers", workers, lo=1)
    if n <= 1:
        yield None
        return
    with ProcessPoolExecutor(max_workers=n) as pool:
        yield pool


def default_workers(n_points: int) -> int:
    """Processes for a local sweep: the usable CPUs, but no more than the points to run."""
    return max(1, min(usable_cpus(), n_points))


def run_points(scenario: Any, points: Sequence[Mapping[str, Any]], store_path: str | Path | None = None,
               executor: Executor | Any | None = None, *, baseline: bool | Sequence[bool] = False,
               progress: bool = True, desc: str = "points", retry_errors: bool = False,
               store: PointStore | None = None) -> list[dict[str, Any]]:
    """Evaluate every point (a mapping of key paths to values) of `scenario`; return one record per
    point, in order. Points already in the store are not recomputed; each new one is appended to
    the store as soon as it finishes. `baseline` (one flag, or one per point) runs simulate(...,
    baseline=True) so the summary carries `speedup_*` keys. Each record has `key`, `overrides`,
    `summary` (None on error), `error`, `elapsed_s` and `cached` (True when it came from the store)."""
    from tqdm import tqdm

    source = scenario_source(scenario) if not isinstance(scenario, Mapping) else dict(scenario)
    name = str(source.get("name", "scenario"))
    flags = [bool(baseline)] * len(points) if isinstance(baseline, bool) else [bool(b) for b in baseline]
    if len(flags) != len(points):
        raise ValueError(f"baseline flags ({len(flags)}) must match the points ({len(points)})")
    store = store if store is not None else PointStore(store_path)
    keys = [point_key(source, dict(p), b) for p, b in zip(points, flags)]
    todo: dict[str, tuple[Mapping[str, Any], bool]] = {}
    for k, p, b in zip(keys, points, flags):
        rec = store.get(k)
        if (rec is None or (retry_errors and rec.get("error"))) and k not in todo:
            todo[k] = (dict(p), b)

    def finish(k: str, rec: dict[str, Any]) -> None:
        rec = {"key": k, **rec, "scenario": name}
        store.put(rec)
        bar.update(1)
        if rec["error"]:
            bar.write(f"point {json.dumps(rec['overrides'])} failed: {rec['error']}", file=sys.stderr)

    with tqdm(total=len(todo), desc=desc, unit="pt", file=sys.stderr, dynamic_ncols=True,
              disable=True if not progress or not todo else None) as bar:     # None: only on a terminal
        if executor is None:
            for k, (p, b) in todo.items():
                finish(k, _task(source, p, b))
        elif _is_dask_client(executor):
            from distributed import as_completed as dask_as_completed
            futs = {executor.submit(_task, source, p, b, pure=False): k for k, (p, b) in todo.items()}
            for fut in dask_as_completed(list(futs)):
                k = futs[fut]
                try:
                    rec = fut.result()
                except Exception as e:   # noqa: BLE001 - a lost worker: record and go on
                    rec = {"overrides": json_safe(dict(todo[k][0])), "baseline": todo[k][1], "summary": None,
                           "error": f"{type(e).__name__}: {e}", "elapsed_s": None}
                finish(k, rec)
        else:
            from concurrent.futures import as_completed
            futs = {executor.submit(_task, source, p, b): k for k, (p, b) in todo.items()}
            for fut in as_completed(futs):
                k = futs[fut]
                try:
                    rec = fut.result()
                except Exception as e:   # noqa: BLE001 - e.g. a worker process died
                    rec = {"overrides": json_safe(dict(todo[k][0])), "baseline": todo[k][1], "summary": None,
                           "error": f"{type(e).__name__}: {e}", "elapsed_s": None}
                finish(k, rec)
    done = set(todo)
    return [{**store.get(k), "cached": k not in done} for k in keys]   # type: ignore[misc]


@contextlib.contextmanager
def study_executor(executor: Any, workers: int | None, dask_address: str | None, n_points: int) -> Iterator[Any]:
    """`executor` itself when given; else open_executor(workers, dask_address), with workers
    defaulting to default_workers(n_points)."""
    if executor is not None:
        yield executor
        return
    with open_executor(workers if workers is not None else default_workers(n_points), dask_address) as ex:
        yield ex
