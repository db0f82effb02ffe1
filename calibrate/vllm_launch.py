"""Run the vLLM ground-truth grid from specsight's venv: each session is one subprocess of
.venv-vllm's python (calibrate.vllm_runner), whose JSON lines become results-file records as they
arrive (calibrate.vllm_results), so an interrupted grid keeps every finished run.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from simulator.common.errors import SpecsightInputError

from . import vllm_results
from .vllm_grid import MODELS, SETTLE_S, Session, SpecRun, plan_sessions

REPO = Path(__file__).resolve().parent.parent
SETUP_HINT = "bash scripts/setup.sh --engine vllm"
LOG = REPO / "out" / "vllm-runner.log"      # the engines' own log lines (outside git)


def engine_python(venv: Path) -> Path:
    """.venv-vllm's python, or a one-line error naming the install command when it or vllm is missing."""
    py = venv / "bin" / "python"
    if not py.exists():
        raise SpecsightInputError("--engine-venv", str(venv), f"no such environment; install it with `{SETUP_HINT}`")
    has_vllm = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"
    probe = subprocess.run([str(py), "-c", has_vllm], capture_output=True)
    if probe.returncode != 0:
        raise SpecsightInputError("--engine-venv", str(venv), f"vllm is not installed there; run `{SETUP_HINT}`")
    return py


def engine_env(venv: Path) -> dict[str, str]:
    """The runner's environment: offline, vLLM's CPU settings, and Intel OpenMP preloaded when the
    venv has it (vLLM's CPU worker warns that speculative decoding without it loses much)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1",
               PYTHONPATH=str(REPO))
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env.setdefault("VLLM_CPU_OMP_THREADS_BIND", "auto")
    iomp = venv / "lib" / "libiomp5.so"
    if iomp.exists() and "LD_PRELOAD" not in env:
        env["LD_PRELOAD"] = str(iomp)
    return env


def run_session(py: Path, env: dict[str, str], session: Session, log: Path,
                on_record: Callable[[dict], None]) -> int:
    """One runner process; each JSON line on its stdout goes to on_record as it arrives."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(session.to_json(), f)
        spec = f.name
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as err:
        proc = subprocess.Popen([str(py), "-m", "calibrate.vllm_runner", spec], cwd=REPO, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        def pump() -> None:                   # stderr: the runner's progress lines shown, all logged
            for line in proc.stderr:          # type: ignore[union-attr]
                err.write(line)
                if line.startswith("vllm-runner:"):
                    print(line.rstrip(), file=sys.stderr, flush=True)
        t = threading.Thread(target=pump, daemon=True)
        t.start()
        try:
            for line in proc.stdout:          # type: ignore[union-attr]
                line = line.strip()
                if line.startswith("{"):
                    on_record(json.loads(line))
        finally:
            if proc.poll() is None:           # interrupted: stop the runner and its engines
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        rc = proc.wait()
        t.join(timeout=5)
    os.unlink(spec)
    return rc


def _relative(path: str | None) -> str | None:
    """A path inside the checkout as repo-relative (results files name no machine's folders)."""
    if path and Path(path).is_relative_to(REPO):
        return str(Path(path).relative_to(REPO))
    return path


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def run_grid(out: Path, grid: dict[str, tuple[SpecRun, ...]], batches: tuple[int, ...],
             repeats: int | Mapping[str, int], venv: Path, cache: Path, command: str, process: int = 0,
             settle_s: float = SETTLE_S, pin_host: bool = True, realtime: bool = False) -> list[dict]:
    """Every run of the grid not yet in `out`, one session per model; returns the records written
    (settle_s, pin_host, realtime: calibrate.vllm_grid.Session)."""
    py = engine_python(venv)
    env = engine_env(venv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop)      # a killed grid still stops its runner (finally below)
    done = vllm_results.done_names(out)
    sessions = plan_sessions(grid, batches, repeats, str(cache), done, process, settle_s, pin_host, realtime)
    written: list[dict] = []
    total = sum(len(s.plain_names) + sum(len(r["names"]) for r in s.runs) for s in sessions)
    if not total:
        print(f"groundtruth: every run of this grid is already in {out}", file=sys.stderr)
    t0 = time.perf_counter()
    for session in sessions:
        state: dict = {}

        def on_record(raw: dict, session: Session = session, state: dict = state) -> None:
            if raw["kind"] == "env":
                state["env"] = {**raw["env"], "ld_preload": _relative(env.get("LD_PRELOAD"))}
                vllm_results.start(out, command, state["env"])
                return
            rec = vllm_results.run_record(raw, session.model, state["env"], session.output_len, session.ngram_span)
            vllm_results.append(out, rec)
            written.append(rec)
            print(f"groundtruth: {len(written)}/{total} runs written ({rec['name']}, "
                  f"{time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        rc = run_session(py, env, session, LOG, on_record)
        if rc != 0:
            raise RuntimeError(f"vLLM runner for {session.model} exited with {rc}; see {LOG} "
                               f"(finished runs are kept in {out}; rerun to resume)")
    return written


__all__ = ["MODELS", "engine_python", "run_grid"]
