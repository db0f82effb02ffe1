"""The simulated break-even on demand: `studies.breakeven.breakeven` along the batch axis for the
explorer's scenario and K, in a child process (so Cancel can stop it at once), through the point
store: every finished point is kept, a cancelled study resumes where it stopped, and a setting
whose points are all stored is shown without simulating again.

Progress is read from the store: the study's point keys are computed here as the study computes
them (curves.py: each batch's axis overrides, its speculative point and its baseline), and a key
counts as done once its record is in the store.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.common.errors import SpecsightInputError

from ..studies.breakeven.axes import REQUESTS_PER_USER
from ..studies.shared.point_store import PointStore

SHOWN_COLUMNS = ("batch", "speedup", "analytic_speedup", "saturated", "base_saturated", "kv_limited",
                 "base_kv_limited", "mean_batch", "spec_tpot_ms_p99", "base_tpot_ms_p99", "error")
MAX_REQUESTS_PER_USER = 10_000
JOIN_S = 5.0                 # how long a cancelled child may take to exit before it is killed


@dataclass(frozen=True)
class SimRequest:
    """One simulated study: the scenario (a checked mapping), the batch values and the K."""
    source: Mapping[str, Any]
    batches: tuple[int, ...]
    k: int
    requests_per_user: int = REQUESTS_PER_USER

    @property
    def key(self) -> str:
        blob = json.dumps([self.source, self.batches, self.k, self.requests_per_user], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:20]


@dataclass
class SimState:
    """Where a request stands: none, running, done, error or cancelled."""
    state: str = "none"
    done: int = 0
    total: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)
    verdict: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    elapsed_s: float = 0.0


def study_keys(req: SimRequest) -> list[str]:
    """The point-store keys the study will read or write (speculative points, then baselines)."""
    from ..studies.breakeven.axes import axis_overrides
    from ..studies.breakeven.curves import baseline_overrides, curve_point, study_curves
    from ..studies.shared.points import point_key

    curves, _, _ = study_curves(req.source, "batch", [req.k], ["static"])
    spec, base = [], {}
    for b in req.batches:
        ov = axis_overrides("batch", b, req.source, req.requests_per_user)
        spec += [curve_point("batch", ov, c) for c in curves]
        bo = baseline_overrides(ov)
        base[json.dumps(bo, sort_keys=True, default=str)] = bo
    return [point_key(req.source, p, False) for p in spec + list(base.values())]


def shown_rows(frame: Any) -> list[dict[str, Any]]:
    """The study frame's rows as the page draws them: SHOWN_COLUMNS and every interval column
    (`speedup_interval`: [low, high], as a list, tuple or array; its band is drawn where every
    point carries one), JSON-safe (NaN and inf as None)."""
    from ..studies.shared.jsonable import json_safe
    cols = [c for c in frame.columns if c in SHOWN_COLUMNS or "interval" in c]
    return json_safe(frame[cols].to_dict("records"))


def run_study(req: SimRequest, store: Path, workers: int | None) -> dict[str, Any]:
    """The study's rows (shown_rows) and verdict, JSON-safe."""
    from ..studies.breakeven.study import breakeven
    from ..studies.shared.jsonable import json_safe
    res = breakeven(req.source, "batch", list(req.batches), [req.k], store=store, workers=workers, progress=False,
                    requests_per_user=req.requests_per_user)
    return {"rows": shown_rows(res.frame), "verdict": json_safe(res.verdict.to_dict())}


def _child(req: SimRequest, store: str, workers: int | None, out: Any) -> None:
    """The child process: the study, its answer (or its one-line error) put on `out`."""
    from .. import kernel_source  # noqa: F401  (the kernel acceptance model, as every entry point)
    try:
        out.put(("done", run_study(req, Path(store), workers)))
    except SpecsightInputError as e:
        out.put(("error", str(e)))
    except Exception as e:   # noqa: BLE001 - the page shows it; the server goes on
        out.put(("error", f"{type(e).__name__}: {e}"))


class SimJobs:
    """One simulated study at a time (a new one cancels the running one); finished answers kept
    by request key, the points in the store at `store_path`."""

    def __init__(self, store_path: str | Path, workers: int | None = 1):
        self.store_path = Path(store_path)
        self.workers = workers
        self._lock = threading.Lock()
        self._answers: dict[str, SimState] = {}
        self._job: tuple[SimRequest, Any, Any, list[str], float] | None = None   # req, process, queue, keys, t0
        self._ctx = multiprocessing.get_context("spawn")

    def state(self, req: SimRequest) -> SimState:
        """The request's answer, its progress while it runs, or state none."""
        with self._lock:
            self._collect()
            if req.key in self._answers:
                return self._answers[req.key]
            if self._job is not None and self._job[0].key == req.key:
                r, _, _, keys, t0 = self._job
                store = PointStore(self.store_path)
                return SimState("running", sum(k in store for k in keys), len(keys), elapsed_s=time.monotonic() - t0)
            return SimState()

    def cached(self, req: SimRequest) -> SimState:
        """The answer at once when every point of the request is stored (the study then reads
        them all and simulates nothing); else its state()."""
        st = self.state(req)
        if st.state != "none":
            return st
        keys = study_keys(req)
        if all(k in PointStore(self.store_path) for k in keys):
            t0 = time.monotonic()
            ans = run_study(req, self.store_path, 1)
            with self._lock:
                self._answers[req.key] = SimState("done", len(keys), len(keys), ans["rows"], ans["verdict"],
                                                  elapsed_s=time.monotonic() - t0)
            return self._answers[req.key]
        return st

    def start(self, req: SimRequest) -> SimState:
        """Start the study (checked first: a bad request is its one-line error, nothing started)."""
        keys = study_keys(req)           # raises SpecsightInputError for a scenario the study refuses
        st = self.cached(req)
        if st.state in ("done", "running"):
            return st
        self.cancel()
        self.store_path.parent.mkdir(parents=True, exist_ok=True)
        q = self._ctx.Queue()
        proc = self._ctx.Process(target=_child, args=(req, str(self.store_path), self.workers, q), daemon=True,
                                 name="specsight-explore-study")
        proc.start()
        with self._lock:
            self._answers.pop(req.key, None)
            self._job = (req, proc, q, keys, time.monotonic())
        return self.state(req)

    def cancel(self) -> bool:
        """Stop the running study (its finished points stay in the store); False if none ran."""
        with self._lock:
            job, self._job = self._job, None
        if job is None:
            return False
        req, proc, q, keys, t0 = job
        if proc.is_alive():
            proc.terminate()
            proc.join(JOIN_S)
            if proc.is_alive():
                proc.kill()
                proc.join()
        store = PointStore(self.store_path)
        with self._lock:
            if req.key not in self._answers:
                self._answers[req.key] = SimState("cancelled", sum(k in store for k in keys), len(keys),
                                                  message="cancelled; the finished points are kept",
                                                  elapsed_s=time.monotonic() - t0)
        q.close()
        return True

    def _collect(self) -> None:
        """Take the running child's answer once it has put one (called under the lock)."""
        if self._job is None:
            return
        req, proc, q, keys, t0 = self._job
        try:
            kind, payload = q.get_nowait()
        except Exception:   # noqa: BLE001 - queue.Empty: still running
            if proc.is_alive():
                return
            kind, payload = "error", f"the study's process ended (exit code {proc.exitcode}) without an answer"
        proc.join(JOIN_S)
        self._job = None
        elapsed = time.monotonic() - t0
        if kind == "done":
            self._answers[req.key] = SimState("done", len(keys), len(keys), payload["rows"], payload["verdict"],
                                              elapsed_s=elapsed)
        else:
            self._answers[req.key] = SimState("error", 0, len(keys), message=str(payload), elapsed_s=elapsed)

    def forget(self, req: SimRequest) -> None:
        """Drop a cancelled or failed answer so the request can start again."""
        with self._lock:
            st = self._answers.get(req.key)
            if st is not None and st.state in ("cancelled", "error"):
                del self._answers[req.key]

    def close(self) -> None:
        self.cancel()


def parse_batches(text: str, field_name: str = "simulate.batches") -> tuple[int, ...]:
    """Comma-separated batch sizes for the simulated study (the command line's --values rule)."""
    from ..studies.breakeven.axes import parse_values
    vals = parse_values(field_name, text, "batch")
    return tuple(int(v) for v in vals)


def check_requests_per_user(text: Any, field_name: str = "simulate.requests_per_user") -> int:
    """Requests per closed-loop user at each batch (the command line's --requests-per-user)."""
    try:
        value = int(str(text).strip())
    except ValueError:
        raise SpecsightInputError(field_name, text, "an integer >= 1") from None
    if not 1 <= value <= MAX_REQUESTS_PER_USER:
        raise SpecsightInputError(field_name, value, f"an integer in [1, {MAX_REQUESTS_PER_USER}]")
    return value
