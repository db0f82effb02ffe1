"""Evaluate scenario points, storing every finished point at once (the resumable point store).

`run_points(scenario, points, store_path, executor=...)` evaluates each point (a mapping of
dotted key paths to values, see overrides.py) with `simulator.run.simulate` and appends one JSON
line per finished point to the store:

    {"key": "3f9a...", "overrides": {...}, "baseline": false, "summary": {...} | null,
     "error": null | "SpecsightInputError: ...", "elapsed_s": 1.9, "warnings": [...], "scenario": "name"}

The key hashes the scenario content, the overrides, the baseline flag and the simulator's own
source and data (simulator/*.py, hardware_profiles/, models/), so a rerun skips every point
already stored (resume after an interruption) and a changed model never reuses stale results.
A point that raises records its error and the study goes on; `retry_errors=True` recomputes them.

Executors (executors.py): None runs in this process; any `concurrent.futures.Executor` (a
process pool whose workers die with their parent, by default); or a `dask.distributed.Client`.
`open_executor(workers, dask_address)` makes one. Points are handed out a window at a time (twice
the executor's slots) so that another run sharing the store can take the rest (store_claims.py).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future
from concurrent.futures import wait as wait_futures
from pathlib import Path
from typing import Any

from simulator.common.paths import HARDWARE_DIR, MODELS_DIR, REPO_ROOT
from simulator.scenario.work_limits import ANNOUNCE_S, check_study_work

from .executors import default_workers, is_dask_client, open_executor, parallel_slots, study_executor  # noqa: F401
from .jsonable import json_safe
from .overrides import override_strings, scenario_source
from .point_store import PointStore
from .saturation import queue_stats
from .store_claims import StoreClaims

POLL_S = 0.2        # how often a run waiting on another run's points (or on its workers) looks again

_CODE_VERSION: str | None = None


# ---- keys ---------------------------------------------------------------------------------------
def code_version() -> str:
    """Hash of what a result depends on besides the scenario: the simulator's source and the
    hardware and model catalogs (computed once per process)."""
    global _CODE_VERSION
    if _CODE_VERSION is None:
        h = hashlib.sha256()
        for f in code_files():
            h.update(f.relative_to(REPO_ROOT).as_posix().encode())
            h.update(f.read_bytes())
        _CODE_VERSION = h.hexdigest()[:16]
    return _CODE_VERSION


def code_files() -> list[Path]:
    """The files code_version hashes: every simulator source (its sub-packages, the engines, too),
    the hardware profiles and the model configs."""
    return (sorted((REPO_ROOT / "simulator").rglob("*.py")) + sorted(HARDWARE_DIR.glob("*.yaml"))
            + sorted(MODELS_DIR.glob("*.json")))


def point_key(source: Mapping[str, Any], overrides: Mapping[str, Any], baseline: bool = False) -> str:
    """A stable hash of (scenario content, overrides, baseline flag, code version)."""
    blob = json.dumps({"scenario": source, "overrides": overrides, "baseline": bool(baseline),
                       "code": code_version()}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


# ---- one point ----------------------------------------------------------------------------------
def evaluate_point(source: Mapping[str, Any], overrides: Mapping[str, Any], baseline: bool = False) -> dict[str, Any]:
    """Simulate one point; returns the (JSON-safe) summary plus queue-growth statistics."""
    from simulator.run import simulate
    from simulator.scenario.scenario import load_scenario
    sc = load_scenario(source, override_strings(overrides))
    r = simulate(sc, baseline=baseline)
    summary = dict(r.summary)
    summary.update(queue_stats(r.requests))
    if sc.workload.schedule is not None:            # a day of traffic: the SLO per window (fleet_day/study.py)
        from .windows import window_stats
        summary.update(window_stats(r.requests, sc.workload.schedule))
    return json_safe(summary)


def _task(source: Mapping[str, Any], overrides: Mapping[str, Any], baseline: bool) -> dict[str, Any]:
    """Worker entry: never raises; an exception becomes the record's error, and the point's
    SpecsightWarnings its `warnings` (run_points says each once for the whole study)."""
    from simulator.common.errors import SpecsightWarning
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SpecsightWarning)
        try:
            summary, error = evaluate_point(source, overrides, baseline), None
        except Exception as e:   # noqa: BLE001 - a failing point is recorded and the sweep goes on
            summary, error = None, f"{type(e).__name__}: {e}"
    said = []
    for w in caught:
        if issubclass(w.category, SpecsightWarning):
            said.append(str(w.message))
        else:                    # any other warning as it would have been shown
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return {"overrides": json_safe(dict(overrides)), "baseline": bool(baseline), "summary": summary,
            "error": error, "elapsed_s": round(time.perf_counter() - t0, 3), "warnings": list(dict.fromkeys(said))}


def point_tokens(source: Mapping[str, Any], todo: Iterable[tuple[Mapping[str, Any], bool]]) -> list[float]:
    """Tokens each point simulates (its num_requests, else the scenario's, x the scenario's mean
    prompt + output length; twice with a baseline run): the work estimate. Empty when the
    scenario alone does not load (its points say why as they run)."""
    from simulator.scenario.scenario import load_scenario
    from simulator.scenario.work_limits import mean_tokens
    try:
        sc = load_scenario(dict(source))
    except (ValueError, TypeError):
        return []
    wl, trace = sc.workload, sc.workload._trace or {}
    n = int(wl.n_requests)
    per_request = mean_tokens(wl.prompt_len, trace.get("num_prefill_tokens")) + \
        mean_tokens(wl.output_len, trace.get("num_decode_tokens"))
    out = []
    for p, baseline in todo:
        m = p.get("workload.num_requests", (p.get("workload") or {}).get("num_requests", n)
                  if isinstance(p.get("workload"), Mapping) else n)
        m = m if isinstance(m, (int, float)) and not isinstance(m, bool) and m == m else n
        out.append(float(m) * per_request * (2 if baseline else 1))
    return out


def run_points(scenario: Any, points: Sequence[Mapping[str, Any]], store_path: str | Path | None = None,
               executor: Executor | Any | None = None, *, baseline: bool | Sequence[bool] = False,
               progress: bool = True, desc: str = "points", retry_errors: bool = False,
               store: PointStore | None = None,
               expected: Sequence[type[BaseException]] = ()) -> list[dict[str, Any]]:
    """Evaluate every point (a mapping of key paths to values) of `scenario`; return one record per
    point, in order. Points already in the store are not recomputed; each new one is appended to
    the store as soon as it finishes. Another run using the same store at once shares it: each
    point is computed by one of them (store_claims.py). `baseline` (one flag, or one per point)
    runs simulate(..., baseline=True) so the summary carries `speedup_*` keys. Each record has
    `key`, `overrides`, `summary` (None on error), `error`, `elapsed_s` and `cached` (True unless
    this call computed it). A point that fails prints a line on stderr, unless its exception is of
    an `expected` type (a refusal the caller reports itself, e.g. SpecsightInputError for a
    configuration that does not fit in a plan search); it is recorded either way. An error that
    repeats is printed for its first point only, with the count of the others once the points are
    done; a SpecsightWarning of any point (stored or computed) is warned once per call."""
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
    before = {k: store.get(k) for k in todo}     # a record written since then settles the point
    quiet = tuple(f"{e.__name__}: " for e in expected)     # how _task writes an error of each type
    computed: set[str] = set()
    failed: dict[str, int] = {}        # error text -> points that failed with it

    seconds = check_study_work(source, point_tokens(source, todo.values()), parallel_slots(executor)) if todo else 0
    long_run = seconds > ANNOUNCE_S              # progress printed even off a terminal, every 30 s
    with tqdm(total=len(todo), desc=desc, unit="pt", file=sys.stderr, dynamic_ncols=True,
              mininterval=30 if long_run and not sys.stderr.isatty() else 0.1,
              disable=True if not progress or not todo else (False if long_run else None)) as bar, \
            (StoreClaims(store.path) if store.path is not None and todo else contextlib.nullcontext()) as claims:

        def claim(pending: list[str], limit: int) -> tuple[list[str], list[str]]:
            if claims is None:
                return pending[:limit], []
            return claims.claim(pending, limit, store.refresh,
                                lambda k: store.get(k) is not None and store.get(k) is not before[k])

        def finish(k: str, rec: dict[str, Any]) -> None:
            rec = {"key": k, **rec, "scenario": name}
            if claims is None:
                store.put(rec)
            else:
                claims.append(k, lambda: store.put(rec))
            computed.add(k)
            bar.update(1)
            if rec["error"] and not rec["error"].startswith(quiet):
                failed[rec["error"]] = failed.get(rec["error"], 0) + 1
                if failed[rec["error"]] == 1:
                    bar.write(f"point {json.dumps(rec['overrides'])} failed: {rec['error']}", file=sys.stderr)

        _drive(source, todo, executor, claim, finish, settle=lambda k: bar.update(1))
    for n in failed.values():
        if n > 1:
            print(f"{n - 1} more point(s) failed with the same error", file=sys.stderr)
    records = [{**store.get(k), "cached": k not in computed} for k in keys]   # type: ignore[misc]
    warn_once(records)
    return records


def warn_once(records: Sequence[Mapping[str, Any]]) -> None:
    """Each distinct SpecsightWarning the points' simulations gave, once, in the order first met."""
    from simulator.common.errors import SpecsightWarning
    for message in dict.fromkeys(m for r in records for m in r.get("warnings") or ()):
        warnings.warn(message, SpecsightWarning, stacklevel=2)


def _drive(source: Mapping[str, Any], todo: Mapping[str, tuple[Mapping[str, Any], bool]], executor: Any,
           claim: Callable[[list[str], int], tuple[list[str], list[str]]],
           finish: Callable[[str, dict[str, Any]], None], settle: Callable[[str], object]) -> None:
    """Run the `todo` points on `executor`, a window of them at a time: `claim(pending, n)` gives
    up to n keys to compute and those another run finished; `finish(key, record)` stores one."""
    pending = dict(todo)
    inflight: dict[Any, str] = {}
    window = 1 if executor is None else 2 * parallel_slots(executor)
    while pending or inflight:
        if pending and len(inflight) < window:
            mine, others = claim(list(pending), window - len(inflight))
            for k in others:
                del pending[k]
                settle(k)
            for k in mine:
                p, b = pending.pop(k)
                inflight[_submit(executor, source, p, b)] = k
        if inflight:
            for fut in _wait_some(executor, list(inflight), POLL_S if pending else None):
                k = inflight.pop(fut)
                finish(k, _outcome(fut, *todo[k]))
        elif pending:
            time.sleep(POLL_S)            # every pending point is another live run's: wait for its records


def _submit(executor: Any, source: Mapping[str, Any], p: Mapping[str, Any], b: bool) -> Any:
    if executor is None:
        fut: Future = Future()
        fut.set_result(_task(source, p, b))
        return fut
    if is_dask_client(executor):
        return executor.submit(_task, source, p, b, pure=False)
    return executor.submit(_task, source, p, b)


def _wait_some(executor: Any, futs: list[Any], timeout_s: float | None) -> list[Any]:
    """The futures of `futs` that are done, waiting up to `timeout_s` (None: for the first)."""
    if is_dask_client(executor):
        from distributed import wait
        try:
            wait(futs, timeout=timeout_s, return_when="FIRST_COMPLETED")
        except TimeoutError:
            pass
        return [f for f in futs if f.done()]
    done, _ = wait_futures(futs, timeout=timeout_s, return_when=FIRST_COMPLETED)
    return list(done)


def _outcome(fut: Any, p: Mapping[str, Any], b: bool) -> dict[str, Any]:
    """The worker's record, or an error record when the worker itself failed (e.g. it died)."""
    try:
        return fut.result()
    except Exception as e:   # noqa: BLE001 - a lost worker: record and go on
        return {"overrides": json_safe(dict(p)), "baseline": b, "summary": None,
                "error": f"{type(e).__name__}: {e}", "elapsed_s": None}
