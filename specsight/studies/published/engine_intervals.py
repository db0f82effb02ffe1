"""80 % intervals on the real-engine table's predicted speedups (`specsight validate
--engine-groundtruth`), and their coverage.

A run's residual is log(measured / predicted speedup). A run's interval is built leaving out its
own (model, method) cell of the grid: the split-conformal interval of the residuals of every run
of the other cells (intervals.conformal_interval), widened by the spread the ranges of its
engine's constants give its speedup (spread.py; on the CPU build the measured host constants,
each +- its measurement's standard error: simulator/engines/sourced.measured_ranges). A run's
cell holds its repeats and neighbours (the same checkpoint and drafter at other batches and K),
so none of its own cell's residuals set its interval. Not left out: the other cells of its model,
whose predictions share the iteration fit made on that model's plain runs, and, for a run of the
fitted model, its spread's proposer term, the standard error of the proposer fit made on its own
cell's host times (measured_ranges). `coverage`: the share of runs whose measured speedup lies
inside its interval, over every run and (`coverage_groups`) apart for the runs of the model the
host constants were fitted on (`fitted_on`, role `fit`) and of the held-out models (`held_out`):
the fitted-on group's intervals are the less independent, and the two shares are not pooled into
one claim.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .intervals import LEVEL, conformal_interval, coverage, coverage_words
from .spread import scenario_spread


def cell(row: Mapping[str, Any]) -> tuple[str, str]:
    """A run's cell of the grid: (model, method)."""
    return str(row["model"]), str(row["method"])


def residual(row: Mapping[str, Any]) -> float:
    p, m = float(row["predicted_speedup"]), float(row["measured_speedup"])
    return math.log(m / p) if p > 0 and m > 0 and math.isfinite(p) and math.isfinite(m) else math.nan


def leave_cell_out(rows: Sequence[Mapping[str, Any]], spreads: Sequence[Sequence[float]] | None = None) -> list[
        list[float] | None]:
    """Each run's 80 % interval without its own (model, method) cell (module docstring)."""
    res = [residual(r) for r in rows]
    out = []
    for i, r in enumerate(rows):
        pool = [x for j, x in enumerate(res) if cell(rows[j]) != cell(r) and math.isfinite(x)]
        out.append(conformal_interval(float(r["predicted_speedup"]), pool, spreads[i] if spreads else None))
    return out


def run_spread(run: Mapping[str, Any], profile: str | Path) -> list[float]:
    """[down, up] of one run's predicted speedup from its engine's constants (spread.py)."""
    from calibrate.engine_groundtruth import scenario_for_run
    return scenario_spread(scenario_for_run(run, profile), "speedup", batch=float(run["batch"])).pair


def with_intervals(res: dict[str, Any], runs: Sequence[Mapping[str, Any]], profile: str | Path) -> dict[str, Any]:
    """`compare`'s result with each row's `spread` and `interval`, the table's `coverage`, its
    `coverage_groups` (fitted_on, held_out) and their sentence (`coverage_text`, which the table
    prints)."""
    by_name = {r["name"]: r for r in runs}
    rows = res["rows"]
    for r in rows:
        r["spread"] = run_spread(by_name[r["name"]], profile)
    ivs = leave_cell_out(rows, [r["spread"] for r in rows])
    for r, iv in zip(rows, ivs):
        r["interval"] = iv
    res["coverage"] = coverage([{"published": r["measured_speedup"]} for r in rows], ivs)
    res["coverage_groups"] = {
        key: coverage([{"published": r["measured_speedup"]} for r in rows if r["role"] == role],
                      [iv for r, iv in zip(rows, ivs) if r["role"] == role])
        for key, role in GROUPS}
    res["coverage_text"] = coverage_sentence(res["coverage"], res["coverage_groups"], res.get("fitted_model"))
    return res


GROUPS = (("fitted_on", "fit"), ("held_out", "held out"))      # coverage_groups' key, the row's role


def coverage_sentence(c: Mapping[str, Any], groups: Mapping[str, Mapping[str, Any]] | None = None,
                      fitted_model: str | None = None) -> str:
    out = ("80 % intervals (each run's built without its own (model, method) cell, widened by the measured host "
           f"constants' spread) hold the measured speedup on {coverage_words(c, 'runs')}.")
    if not groups:
        return out
    fit, held = groups["fitted_on"], groups["held_out"]
    model = f" ({fitted_model})" if fitted_model else ""
    out += (f" By group: the runs of the model the host constants were fitted on{model}, "
            f"{coverage_words(fit, 'runs')}; the held-out runs, {coverage_words(held, 'runs')}.")
    if fit["rows"] and fit["coverage"] < LEVEL and held["rows"]:
        out += (f" The fitted-on group misses the {100 * LEVEL:.0f} % goal: the overall figure is carried by "
                "the held-out runs, and does not show the intervals hold on the fitted-on model.")
    return out
