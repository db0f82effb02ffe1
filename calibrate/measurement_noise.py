"""How far the real-engine table's errors can fall: the noise of the measured speedups themselves.

A run's speedup is the median of its repeats' ratios (plain TPOT / speculative TPOT, each pair timed
back to back in one engine session, calibrate.vllm_runner). Their scatter about the run's own mean,
in log space and pooled over a model's runs,

    sd = sqrt( sum_runs sum_i (ln s_i - mean_run ln s)^2 / sum_runs (n_run - 1) ),

says how far a run's median lies from the engine's own speedup. An exact predictor, one that gives
each run the engine's true speedup, still shows the table's error |predicted - measured| / measured
= |1 - exp(-x)| with x the log noise of a median of the run's repeats drawn from N(0, sd). Its
median and max over the table's runs are drawn here (`draws` tables, seeded): what a prediction
free of error would be expected to show on these measurements. Runs the constants were fitted on
can show less (the fit follows part of their noise); held-out runs cannot be expected to.

For 3 repeats the median's distribution is closed (an order statistic: P(median <= t) = 3 F^2 - 2 F^3,
F the normal CDF of t / sd), which the tests hold the draws to.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

NOISE_SEED = 20261203      # the draws' seed (any fixed value: the figures are reproducible)
NOISE_DRAWS = 20000


def log_speedups(run: Mapping[str, Any]) -> list[float]:
    """ln of each repeat's speedup (the run's `speedups`, else its repeats against its baseline repeats)."""
    s = run.get("speedups")
    if not s:
        reps, base = run.get("repeats") or [], run.get("baseline_repeats") or []
        s = [float(b["tpot_ms"]) / float(r["tpot_ms"]) for r, b in zip(reps, base)]
    return [math.log(float(v)) for v in s if v and float(v) > 0]


def pooled_log_sd(runs: Sequence[Mapping[str, Any]]) -> tuple[float, int]:
    """The pooled within-run standard deviation of ln speedup, and its degrees of freedom."""
    ss, dof = 0.0, 0
    for r in runs:
        x = np.asarray(log_speedups(r))
        if len(x) > 1:
            ss += float(((x - x.mean()) ** 2).sum())
            dof += len(x) - 1
    return (math.sqrt(ss / dof) if dof else math.nan), dof


def exact_predictor_errors(groups: Sequence[tuple[float, int, int]], goals: tuple[float, float],
                           seed: int = NOISE_SEED, draws: int = NOISE_DRAWS) -> dict[str, Any]:
    """`groups`: (log sd, repeats a run, runs) per model. The table's median and max error of an
    exact predictor over all the runs, in `draws` tables: their medians, the max's 5-95 % range,
    and the share of tables that meet each goal (median, max)."""
    rng = np.random.default_rng(seed)
    cols = []
    for sd, repeats, n in groups:
        x = np.median(rng.normal(0.0, sd, (draws, n, repeats)), axis=2)
        cols.append(np.abs(1.0 - np.exp(-x)))
    err = np.concatenate(cols, axis=1)
    med, mx = np.median(err, axis=1), err.max(axis=1)
    return {"median_error": float(np.median(med)), "max_error": float(np.median(mx)),
            "max_error_range": [float(np.quantile(mx, 0.05)), float(np.quantile(mx, 0.95))],
            "p_median_goal": float((med <= goals[0]).mean()), "p_max_goal": float((mx <= goals[1]).mean()),
            "seed": seed, "draws": draws}


def noise_floor(runs: Sequence[Mapping[str, Any]], goals: tuple[float, float],
                seed: int = NOISE_SEED, draws: int = NOISE_DRAWS) -> dict[str, Any]:
    """Per model the repeats' pooled log sd; over the table the exact predictor's errors."""
    spec = [r for r in runs if r.get("method") != "plain" and int(r.get("k", 0) or 0) > 0]
    models: dict[str, dict[str, Any]] = {}
    groups = []
    for m in sorted({r["model"] for r in spec}):
        rs = [r for r in spec if r["model"] == m]
        sd, dof = pooled_log_sd(rs)
        repeats = int(np.median([len(log_speedups(r)) for r in rs]))
        models[m] = {"log_sd": sd, "dof": dof, "runs": len(rs), "repeats": repeats}
        if math.isfinite(sd):
            groups.append((sd, repeats, len(rs)))
            models[m]["exact"] = exact_predictor_errors([groups[-1]], goals, seed, draws)
    out: dict[str, Any] = {"models": models}
    if groups:
        out.update(exact_predictor_errors(groups, goals, seed, draws))
    return out


def noise_sentence(nf: Mapping[str, Any]) -> str:
    """One paragraph under the real-engine table."""
    ms = nf["models"]
    if "median_error" not in nf:
        return ""
    parts = ", ".join(f"{v['log_sd']:.3f} on {m} ({v['runs']} runs, {v['repeats']} repeats each)"
                      for m, v in ms.items())
    lo, hi = nf["max_error_range"]
    each = "; ".join(f"over {m}'s runs alone, median {100 * v['exact']['median_error']:.1f} % and max "
                     f"{100 * v['exact']['max_error']:.1f} % (max goal met in {100 * v['exact']['p_max_goal']:.0f} %)"
                     for m, v in ms.items() if "exact" in v)
    return (f"Measurement noise: a run's repeats scatter about their mean by a log standard deviation of {parts} "
            f"(calibrate/measurement_noise.py). An exact predictor, measured against these medians, would show a "
            f"median error of {100 * nf['median_error']:.1f} % and a max of {100 * nf['max_error']:.1f} % over all "
            f"the runs (5-95 %: {100 * lo:.1f}-{100 * hi:.1f} %; the median goal met in "
            f"{100 * nf['p_median_goal']:.0f} % and the max goal in {100 * nf['p_max_goal']:.0f} % of "
            f"{nf['draws']} seeded draws); {each}.")


__all__ = ["NOISE_SEED", "exact_predictor_errors", "log_speedups", "noise_floor", "noise_sentence", "pooled_log_sd"]
