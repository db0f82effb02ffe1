"""Fit an engine's host constants from its own serving benchmark (`specsight calibrate --engine E
--from-bench FILE...`): simulate every benchmark run on the stated deployment with candidate
constants and least-squares the log TPOT error; report each file's error with that file left out
of the fit; write an engine profile YAML a scenario names as `engine.profile`.

The constants (simulator/engines/host.py, in ms): base_ms and per_seq_ms, the scheduler's host
time per iteration H(B) = base + per_seq B, and sync_ms, what one host sync inside a round costs.
A constant is fitted only where the runs can tell it apart: its column of the Jacobian (d log TPOT
/ d ms at the built-in constants) must be non-zero (an overlapped host hides H(B) behind the GPU)
and not a combination of the constants before it (base, per_seq, sync order: a round that pays
base and its syncs together cannot split them). The rest keep their built-in values and the
report says why.

Each run is simulated with its own load (concurrency or rate), its mean lengths, and, for a
speculative run, i.i.d. acceptance whose chain accept length is the one the benchmark reports;
a run without speculation runs without the drafter. A speculative run's simulated TPOT is scaled
by its simulated accept length over the measured one (the few simulated requests sample acceptance
with noise; TPOT goes as 1 / tokens per round). Requests per simulation are capped (a few
dozen), so a fit evaluates in well under a second per run.
"""
from __future__ import annotations

import copy
import math
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from simulator.common.errors import SpecsightInputError, SpecsightWarning
from simulator.engines import engine_for
from simulator.engines.host import MS, PROFILE_CONSTANTS_MS, check_profile_engine
from simulator.run import simulate
from simulator.scenario.scenario import Scenario, load_scenario

from .bench_files import BenchRun

MIN_SIM_REQUESTS = 16
MAX_SIM_REQUESTS = 64
UPPER_MS = 100.0
PROBE_MS = {"base_ms": 0.25, "per_seq_ms": 0.01, "sync_ms": 0.25}   # Jacobian steps at the built-in values
MIN_COLUMN = 1e-4       # d log TPOT per ms below this: the runs do not see the constant
MIN_INDEPENDENT = 0.05  # a column's part outside the earlier fitted columns, relative to its norm
MAX_EVALS = 40


@dataclass(frozen=True)
class EngineFit:
    """The fitted constants (ms), their standard errors, what was kept and why, and the errors."""
    engine: str
    version: str
    fitted_ms: dict[str, float]
    stderr_ms: dict[str, float | None]
    kept_ms: dict[str, float]              # built-in values the runs could not fit
    why_kept: dict[str, str]
    builtin_ms: dict[str, float]
    train_error: dict[str, float]          # run label -> predicted / measured TPOT - 1
    heldout_error: dict[str, float]        # run label -> the same, its file left out of the fit
    files: tuple[str, ...]

    @property
    def heldout_median(self) -> float | None:
        v = [abs(e) for e in self.heldout_error.values()]
        return float(np.median(v)) if v else None

    @property
    def train_median(self) -> float:
        return float(np.median([abs(e) for e in self.train_error.values()]))


def accept_alpha(accept_length: float, k: int) -> float:
    """The i.i.d. alpha whose chain of k drafts emits accept_length tokens a round: 1 + a + ... + a^k."""
    target = min(max(float(accept_length), 1.0), k + 1 - 1e-6)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if sum(mid ** j for j in range(k + 1)) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def run_scenario(deployment: Scenario, run: BenchRun, engine: str, profile_path: str | None) -> Scenario:
    """The deployment under `engine` with the run's load, lengths and acceptance."""
    raw = copy.deepcopy(dict(deployment.source))
    eng = dict(raw.get("engine") or {})
    eng["kind"] = engine
    eng.pop("profile", None)
    if profile_path is not None:
        eng["profile"] = profile_path
    raw["engine"] = eng
    if run.speculative:
        if deployment.drafter is None:
            raise SpecsightInputError(run.label, "speculative run",
                                      "a deployment with a drafter (the scenario has none)")
        k = int(deployment.k_max)
        if run.accept_length > k + 1:         # a round emits at most K drafts and the bonus token
            raise SpecsightInputError(f"{run.label}: accept length", run.accept_length,
                                      f"at most K + 1 = {k + 1} tokens a round (the deployment's drafter proposes "
                                      f"K = {k}): a benchmark of another deployment, or set --scenario's K")
        raw["acceptance"] = {"model": "iid", "alpha": accept_alpha(run.accept_length, k)}
    else:
        for key in ("drafter", "acceptance", "policy"):
            raw.pop(key, None)
    if math.isinf(run.request_rate):
        users = run.max_concurrency or run.completed
        n = min(run.completed, max(MIN_SIM_REQUESTS, 2 * users), MAX_SIM_REQUESTS)
        arrival = {"process": "closed_loop", "concurrency": min(users, n)}
    else:
        n = min(run.completed, MAX_SIM_REQUESTS)
        arrival = {"process": "poisson", "qps": run.request_rate}
    raw["workload"] = {"arrival": arrival, "num_requests": n, "prompt_len": run.prompt_len,
                       "output_len": run.output_len}
    raw.pop("slo", None)
    return load_scenario(raw)


def write_candidate(path: Path, engine: str, version: str, values_ms: Mapping[str, float]) -> None:
    import yaml
    path.write_text(yaml.safe_dump({"engine": engine, "version": version,
                                    "constants": {k: {"value": float(v)} for k, v in values_ms.items()}}))


class _Model:
    """Simulated mean TPOT of every run for given constants (cached)."""

    def __init__(self, deployment: Scenario, runs: Sequence[BenchRun], engine: str, version: str, tmp: Path):
        self.engine, self.version = engine, version
        self.path = tmp / "candidate.yaml"
        self.runs = list(runs)
        self.scenarios = [run_scenario(deployment, r, engine, str(self.path)) for r in self.runs]
        self._cache: dict[tuple, np.ndarray] = {}

    def tpot_ms(self, values_ms: Mapping[str, float], idx: Sequence[int] | None = None) -> np.ndarray:
        idx = tuple(range(len(self.runs))) if idx is None else tuple(idx)
        key = (tuple(sorted(values_ms.items())), idx)
        if key not in self._cache:
            write_candidate(self.path, self.engine, self.version, values_ms)
            self._cache[key] = np.array([self._tpot_ms(i) for i in idx])
        return self._cache[key]

    def _tpot_ms(self, i: int) -> float:
        """Run i's simulated mean TPOT; a speculative run's scaled by its simulated accept length
        over the measured one (TPOT goes as 1 / tokens per round), which removes the few
        simulated requests' sampling noise in acceptance."""
        s = simulate(self.scenarios[i]).summary
        run = self.runs[i]
        scale = float(s["mean_accept_length"]) / run.accept_length if run.speculative else 1.0
        return float(s["tpot_ms_mean"]) * scale

    def residuals(self, values_ms: Mapping[str, float], idx: Sequence[int]) -> np.ndarray:
        meas = np.array([self.runs[i].tpot_ms for i in idx])
        return np.log(self.tpot_ms(values_ms, idx)) - np.log(meas)


def builtin_ms(engine: str, version: str) -> dict[str, float]:
    h = engine_for(engine, version).host(None)
    return {name: getattr(h, field) / MS for name, field in PROFILE_CONSTANTS_MS.items()}


def identifiable(model: _Model, start: Mapping[str, float], idx: Sequence[int]) -> tuple[list[str], dict[str, str]]:
    """The constants the runs can fit (see the module doc), and why each other one cannot be."""
    r0 = model.residuals(start, idx)
    chosen: list[str] = []
    cols: list[np.ndarray] = []
    why: dict[str, str] = {}
    for name in PROFILE_CONSTANTS_MS:
        col = (model.residuals({**start, name: start[name] + PROBE_MS[name]}, idx) - r0) / PROBE_MS[name]
        norm = float(np.linalg.norm(col))
        if norm < MIN_COLUMN:
            why[name] = "no run's TPOT depends on it (hidden behind the GPU, or never paid)"
            continue
        if cols:
            a = np.column_stack(cols)
            rest = col - a @ np.linalg.lstsq(a, col, rcond=None)[0]
            if np.linalg.norm(rest) < MIN_INDEPENDENT * norm:
                why[name] = f"the runs cannot tell it apart from {', '.join(chosen)}"
                continue
        chosen.append(name)
        cols.append(col)
    return chosen, why


def _fit(model: _Model, start: Mapping[str, float], names: Sequence[str],
         idx: Sequence[int]) -> tuple[dict[str, float], dict[str, float | None]]:
    from scipy.optimize import least_squares
    if not names:
        return dict(start), {}

    def fun(x: np.ndarray) -> np.ndarray:
        return model.residuals({**start, **dict(zip(names, (float(v) for v in x)))}, idx)

    x0 = np.array([start[n] for n in names])
    res = least_squares(fun, x0, bounds=(0.0, UPPER_MS), diff_step=0.02, x_scale=[PROBE_MS[n] for n in names],
                        max_nfev=MAX_EVALS)
    values = {**start, **dict(zip(names, (float(v) for v in res.x)))}
    dof = len(idx) - len(names)
    se: dict[str, float | None] = {n: None for n in names}
    if dof > 0:
        s2 = float(res.fun @ res.fun) / dof
        cov = s2 * np.linalg.pinv(res.jac.T @ res.jac)
        se = {n: float(math.sqrt(max(cov[i, i], 0.0))) for i, n in enumerate(names)}
    return values, se


def fit_engine(deployment: Scenario, files: Sequence[Sequence[BenchRun]], engine: str) -> EngineFit:
    """Fit `engine`'s host constants (at the deployment's engine version) to the runs of `files`."""
    version = deployment.engine.version or engine_for(engine, None).version
    check_profile_engine(engine, version)
    runs = [r for f in files for r in f]
    owner = [i for i, f in enumerate(files) for _ in f]
    builtin = builtin_ms(engine, version)
    with tempfile.TemporaryDirectory(prefix="specsight-fit-") as tmp:
        model = _Model(deployment, runs, engine, version, Path(tmp))
        every = list(range(len(runs)))
        names, why = identifiable(model, builtin, every)
        values, se = _fit(model, builtin, names, every)
        pred = model.tpot_ms(values, every)
        train = {r.label: float(p / r.tpot_ms - 1) for r, p in zip(runs, pred)}
        held: dict[str, float] = {}
        if len(files) > 1:
            for f in range(len(files)):
                inside = [i for i in every if owner[i] != f]
                out = [i for i in every if owner[i] == f]
                v, _ = _fit(model, values, names, inside)
                for i, p in zip(out, model.tpot_ms(v, out)):
                    held[runs[i].label] = float(p / runs[i].tpot_ms - 1)
    warn_loose_fit({n: values[n] for n in names}, se)
    return EngineFit(engine, version, {n: values[n] for n in names}, se,
                     {n: builtin[n] for n in builtin if n not in names}, why, builtin, train, held,
                     tuple(str(Path(f[0].file)) for f in files if f))


def warn_loose_fit(values_ms: Mapping[str, float], se_ms: Mapping[str, float | None]) -> None:
    """A SpecsightWarning for each fitted constant the runs do not pin down: its standard error
    larger than its value (e.g. sync_ms = 100 +- 220), or stopped at the fit's bound UPPER_MS."""
    for n, v in values_ms.items():
        e = se_ms.get(n)
        if v >= UPPER_MS * (1 - 1e-6):
            warnings.warn(f"{n} = {v:.3g} ms stopped at the fit's bound ({UPPER_MS:g} ms): the runs do not "
                          "determine it; check the deployment (--scenario) matches the benchmark", SpecsightWarning,
                          stacklevel=2)
        elif e is not None and e > abs(v):
            warnings.warn(f"{n} = {v:.3g} +- {e:.2g} ms: the runs do not pin it down (the error exceeds the value); "
                          "add runs at other loads", SpecsightWarning, stacklevel=2)


def profile_dict(fit: EngineFit, deployment: str, command: str = "") -> dict[str, Any]:
    """The engine profile YAML's content (simulator/engines/host.py reads `engine`, `version`, `constants`)."""
    return {
        "engine": fit.engine, "version": fit.version,
        "constants": {n: {"value": round(v, 6), "stderr": None if fit.stderr_ms.get(n) is None
                          else round(float(fit.stderr_ms[n]), 6), "builtin": round(fit.builtin_ms[n], 6)}
                      for n, v in fit.fitted_ms.items()},
        "kept": {n: {"value": round(v, 6), "why": fit.why_kept[n]} for n, v in fit.kept_ms.items()},
        "error": {"train_median": round(fit.train_median, 4),
                  "heldout_median": None if fit.heldout_median is None else round(fit.heldout_median, 4),
                  "heldout": {k: round(v, 4) for k, v in fit.heldout_error.items()}},
        "provenance": {"files": list(fit.files), "deployment": deployment,
                       "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "command": command, "units": "ms; error: predicted / measured mean TPOT - 1"},
    }


def with_profile(deployment: Scenario, engine: str, path: str | None) -> Scenario:
    """The deployment under `engine` with (or without) an engine profile (tests, reports)."""
    raw = copy.deepcopy(dict(deployment.source))
    raw["engine"] = {**dict(raw.get("engine") or {}), "kind": engine, "profile": path}
    return load_scenario(raw)
