"""vLLM's host time measured from its own runs on a CPU (simulator/engines/measured_host.py's
constants), fitted on one model's runs only: the smallest, whose passes cost little, so a step is
mostly the engine's own work. The other models' runs are the held-out validation
(calibrate/engine_groundtruth.py).

Per plain run (K = 0) of that model the engine's host time per iteration is what the measured step
holds beyond the predicted pass (the CPU profile's cost model, every pass eager, no host time):
    H_meas(B) = TPOT_meas - pass(B)          (one token a step: TPOT is the step)
and H(B) = a_s + b_s B is its least-squares line. Per speculative run of method m, the round's host
time beyond H(B) is
    P_meas = round_meas - passes(B, K) - H(B),    round_meas = tokens a round x step(B) / speedup_meas
(tokens a round: the run's emitted tokens over its request-rounds, engine_groundtruth.request_rounds;
step(B) = pass(B) + H(B), the fitted plain step). The round is taken from the speedup, the ratio
measured inside one engine process, rather than from its absolute TPOT: separate engine processes
of one configuration ran up to 1.7x apart on this machine (../shared/reference/vllm-cpu.md), and
the speedup is what the validation predicts.
and P_m(B, K) = round_s + round_per_seq_s B + K (step_s + step_per_seq_s B) its non-negative least
squares fit (scipy.optimize.nnls). The passes are priced at the mean context over the decode
(prompt + output / 2: attention is linear in the context). Held-out error: leave one batch size out,
refit on the rest, and compare the held-out runs' predicted step (or round) with the measured one.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simulator.common.errors import SpecsightInputError

from .engine_groundtruth import CPU_PROFILE, ROOT, request_rounds, scenario_for_run

PROPOSER_COLUMNS = ("round_s", "round_per_seq_s", "step_s", "step_per_seq_s")


def _zero_host(methods: Sequence[str]):
    from simulator.engines.measured_host import MeasuredHost, ProposerHost
    return MeasuredHost(0.0, 0.0, {m: ProposerHost() for m in methods}, "zero (fit)")


def passes_s(run: Mapping[str, Any], profile: str | Path = CPU_PROFILE, root: Path = ROOT) -> float:
    """Predicted seconds of one step (plain) or round (speculative) with no host time, at the
    decode's mean context."""
    from simulator.scenario.engine_deployment import engine_deployment
    sc = scenario_for_run(run, profile, root)
    method = sc.get("drafter", {}).get("method")
    dep = engine_deployment(sc, _zero_host([method] if method else []))
    B, k = int(run["batch"]), int(run["k"])
    ctx = int(run["prompt_len"]) + int(run["output_len"]) / 2
    cost = dep.step_cost
    if not method:
        return float(cost.round_time_s(B, 0, ctx, 1))
    if method == "ngram":      # the rounds with a match verify K + 1 tokens, the others 1: price the mean
        p = float(sc["drafter"]["match_probability"])
        return float(p * cost.round_time_s(B, k, ctx, k + 1) + (1 - p) * cost.round_time_s(B, 0, ctx, 1))
    return float(cost.round_time_s(B, k, ctx, k + 1))


def tokens_per_round(run: Mapping[str, Any]) -> float:
    """Tokens a request emits a round: (output - 1) per repeat over its request-rounds."""
    reps = len(run.get("repeats") or [None])
    return reps * run["batch"] * (run["output_len"] - 1) / request_rounds(run)


def line_fit(B: np.ndarray, y: np.ndarray) -> tuple[float, float, tuple[float, float]]:
    """Non-negative least squares y = a + b B: (a, b, (stderr a, stderr b)); a host time does not
    fall with the batch, so a negative slope is noise (the fit then keeps b = 0)."""
    from scipy.optimize import nnls
    X = np.column_stack([np.ones_like(B), B]).astype(float)
    coef, _ = nnls(X, np.asarray(y, float))
    dof = max(len(y) - 2, 1)
    s2 = float(np.sum((y - X @ coef) ** 2)) / dof
    cov = s2 * np.linalg.pinv(X.T @ X)
    return float(coef[0]), float(coef[1]), (float(np.sqrt(cov[0, 0])), float(np.sqrt(cov[1, 1])))


def proposer_fit(B: np.ndarray, K: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares of y = round_s + round_per_seq_s B + K (step_s + step_per_seq_s B)."""
    from scipy.optimize import nnls
    X = _proposer_design(B, K)
    scale = np.maximum(np.abs(X).max(axis=0), 1e-12)
    coef, _ = nnls(X / scale, y)
    return coef / scale


def _proposer_design(B: np.ndarray, K: np.ndarray) -> np.ndarray:
    return np.column_stack([np.ones_like(B), B, K, K * B]).astype(float)


def fit_host(runs: Sequence[Mapping[str, Any]], model: str, profile: str | Path = CPU_PROFILE,
             root: Path = ROOT) -> dict[str, Any]:
    """The constants, their held-out errors and the points they were fitted on (module docstring)."""
    mine = [r for r in runs if r["model"] == model]
    plain = [r for r in mine if r["method"] == "plain" or int(r["k"]) == 0]
    if len({int(r["batch"]) for r in plain}) < 2:
        raise SpecsightInputError("runs", model, "plain runs at two batch sizes or more of the fitted model")
    Bp = np.array([float(r["batch"]) for r in plain])
    step = np.array([float(r["tpot_ms"]) * 1e-3 for r in plain])
    pas = np.array([passes_s(r, profile, root) for r in plain])
    Hm = step - pas
    a, b, se = line_fit(Bp, Hm)
    held = []
    for bb in sorted(set(Bp)):
        tr = Bp != bb
        if len(set(Bp[tr])) < 2:
            continue
        a_, b_, _ = line_fit(Bp[tr], Hm[tr])
        for i in np.flatnonzero(~tr):
            held.append({"name": plain[i]["name"], "batch": int(Bp[i]), "measured_step_ms": 1e3 * step[i],
                         "predicted_step_ms": 1e3 * (pas[i] + a_ + b_ * Bp[i]),
                         "error": abs(pas[i] + a_ + b_ * Bp[i] - step[i]) / step[i]})
    out: dict[str, Any] = {
        "iteration": {"a_s": a, "b_s": b, "stderr": {"a_s": se[0], "b_s": se[1]},
                      "points": [{"name": r["name"], "batch": int(B_), "measured_step_ms": round(1e3 * s_, 4),
                                  "predicted_pass_ms": round(1e3 * p_, 4), "host_ms": round(1e3 * h_, 4)}
                                 for r, B_, s_, p_, h_ in zip(plain, Bp, step, pas, Hm)],
                      "heldout": _summary(held)},
        "proposer": {}}
    H = out["iteration"]

    def h_of(B: np.ndarray) -> np.ndarray:
        return H["a_s"] + H["b_s"] * B

    for m in sorted({r["method"] for r in mine} - {"plain"}):
        rs = [r for r in mine if r["method"] == m and int(r["k"]) > 0]
        Bs = np.array([float(r["batch"]) for r in rs])
        Ks = np.array([float(r["k"]) for r in rs])
        pas = np.array([passes_s(r, profile, root) for r in rs])
        plain_pred = np.array([passes_s({**r, "method": "plain", "k": 0}, profile, root) for r in rs]) + h_of(Bs)
        rnd = np.array([tokens_per_round(r) / float(r["speedup"]) for r in rs]) * plain_pred
        y = rnd - pas - h_of(Bs)
        coef = proposer_fit(Bs, Ks, y)
        held = []
        for bb in sorted(set(Bs)):
            tr = Bs != bb
            if not tr.any():
                continue
            c_ = proposer_fit(Bs[tr], Ks[tr], y[tr])
            pred = pas[~tr] + h_of(Bs[~tr]) + _proposer_design(Bs[~tr], Ks[~tr]) @ c_
            for j, i in enumerate(np.flatnonzero(~tr)):
                held.append({"name": rs[i]["name"], "batch": int(Bs[i]), "k": int(Ks[i]),
                             "measured_round_ms": 1e3 * rnd[i], "predicted_round_ms": 1e3 * pred[j],
                             "error": abs(pred[j] - rnd[i]) / rnd[i]})
        out["proposer"][m] = {**{c: float(v) for c, v in zip(PROPOSER_COLUMNS, coef)},
                              "runs": len(rs), "heldout": _summary(held),
                              "points": [{"name": r["name"], "batch": int(B_), "k": int(K_),
                                          "measured_round_ms": round(1e3 * q, 4),
                                          "predicted_passes_ms": round(1e3 * p_, 4), "host_ms": round(1e3 * y_, 4)}
                                         for r, B_, K_, q, p_, y_ in zip(rs, Bs, Ks, rnd, pas, y)]}
    return out


def _summary(held: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    if not held:
        return {"rule": "leave one batch size out", "n": 0}
    e = [h["error"] for h in held]
    return {"rule": "leave one batch size out: refit on the other batch sizes, predict the held-out runs' step "
                    "(or round) time, |predicted - measured| / measured",
            "n": len(e), "median_error": float(np.median(e)), "max_error": float(max(e)),
            "runs": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in h.items()} for h in held]}


def smallest_model(runs: Sequence[Mapping[str, Any]], root: Path = ROOT) -> str:
    """The model whose target has the fewest parameters (the fit's: its step is mostly host work)."""
    from simulator.models.model_config import spec_from_config
    sizes = {}
    for r in runs:
        if r["model"] not in sizes:
            cfg = json.loads((root / r["target_config"]).read_text())
            sizes[r["model"]] = spec_from_config(cfg, r["model"], r["target_config"]).params_total
    return min(sizes, key=sizes.get)


def runs_load(runs: Sequence[Mapping[str, Any]], model: str) -> list[float] | None:
    """[min, max] of the 1-minute load at the start of every repeat of `model`'s runs (None if unrecorded)."""
    loads = [float(rep["load_1m"]) for r in runs if r["model"] == model
             for rep in r.get("repeats") or () if rep.get("load_1m") is not None]
    return [round(min(loads), 2), round(max(loads), 2)] if loads else None


def write_host_file(fit: Mapping[str, Any], out: str | Path, *, header: Mapping[str, Any], model: str,
                    results: str, profile: str, command: str, load_of_runs: list[float] | None = None) -> Path:
    """data/engine_host/vllm-<version>-cpu.yaml (simulator/engines/measured_host.py reads it)."""
    import yaml
    env = header.get("env") or {}
    it = fit["iteration"]
    doc = {
        "engine": "vllm", "vllm_version": env.get("vllm"), "engine_version": "v1-0.32", "device": "cpu",
        "iteration": {"a_s": float(it["a_s"]), "b_s": float(it["b_s"]), "stderr": it["stderr"],
                      "heldout": _brief(it["heldout"]), "points": it["points"]},
        "proposer": {m: {**{c: float(p[c]) for c in PROPOSER_COLUMNS}, "runs": p["runs"],
                         "heldout": _brief(p["heldout"]), "points": p["points"]}
                     for m, p in fit["proposer"].items()},
        "provenance": {"vllm": env.get("vllm"), "torch": env.get("torch"), "python": env.get("python"),
                       "cpu_model": env.get("cpu_model"), "omp_threads": env.get("omp_threads"),
                       "fitted_on_model": model, "results_file": results, "profile": profile,
                       "command": command, "groundtruth_command": header.get("command"),
                       "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "fit_machine": platform.node(), "load_1m_at_fit": round(os.getloadavg()[0], 2),
                       "load_1m_of_runs": load_of_runs},
    }
    doc = json.loads(json.dumps(doc, default=lambda o: o.item()))      # numpy scalars as plain numbers
    p = Path(out)
    p.parent.mkdir(parents=True, exist_ok=True)
    text = ("# vLLM's host time on a CPU, measured from its own runs (calibrate/engine_host_fit.py).\n"
            f"# Made by: {command}\n" + yaml.safe_dump(doc, sort_keys=False, width=120))
    from simulator.common.atomic_files import write_text
    write_text(p, text)
    return p


def _brief(h: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in h.items()}
