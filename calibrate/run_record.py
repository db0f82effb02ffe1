"""A ground-truth run record (what `specsight groundtruth` writes) checked before `validate` costs
it: every key it reads, its type and range, so a damaged or hand-edited RUN.json is one
SpecsightInputError naming the file and key path (RUN.json: runs[2].rounds[5].wall_s), the value and what is
allowed, never an AssertionError, a ZeroDivisionError or a table of NaN.

    runs[i].batch       an integer in [1, MAX_SEQS]          (sequences decoded together)
    runs[i].k           an integer in [0, MAX_K]             (drafts per round)
    runs[i].rounds[j]   wall_s finite > 0; draft_s finite >= 0; committed_before: `batch` integers
                        in [1, MAX_TOKENS]; accepted: `batch` integers in [0, k]; warmup a boolean
    draft               a mapping with name and config when any run has k > 0
    provenance.dtype    a string; target: a mapping with name and config
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from simulator.common.errors import SpecsightInputError
from simulator.common.limits import MAX_K, MAX_SEQS, MAX_TOKENS

MAX_ROUNDS = 10 ** 6            # rounds in one (batch, K) run (a real run records tens)


def _int(field: str, v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise SpecsightInputError(field, v, f"an integer in [{lo}, {hi}]")
    return v


def _seconds(field: str, v: Any, lo_open: bool) -> float:
    number = not isinstance(v, bool) and isinstance(v, (int, float))
    if not number or not math.isfinite(v) or v < 0 or (lo_open and v == 0) or v > 1e7:
        raise SpecsightInputError(field, v, f"a finite number of seconds in {'(' if lo_open else '['}0, 1e7]")
    return float(v)


def _ints(field: str, v: Any, n: int, lo: int, hi: int) -> None:
    if not isinstance(v, list) or len(v) != n:
        raise SpecsightInputError(field, v if not isinstance(v, list) else f"{len(v)} values",
                                  f"a list of {n} integers (one per sequence of the batch)")
    for i, x in enumerate(v):
        _int(f"{field}[{i}]", x, lo, hi)


def _model(run: Mapping[str, Any], key: str, where: str) -> None:
    part = run.get(key)
    if not isinstance(part, Mapping) or not isinstance(part.get("name"), str) or \
            not isinstance(part.get("config"), Mapping):
        raise SpecsightInputError(f"{where}: {key}", None if part is None else type(part).__name__,
                                  "a mapping with the model's name and config, as `specsight groundtruth` writes")


def check_run_record(run: Any, where: str = "run") -> Mapping[str, Any]:
    """`run` itself when it holds everything validate reads, in range; else one error naming the
    file (`where`) and the key."""
    if not isinstance(run, Mapping):
        raise SpecsightInputError(where, type(run).__name__, "a JSON object, as `specsight groundtruth` writes")
    prov = run.get("provenance")
    if not isinstance(prov, Mapping) or not isinstance(prov.get("dtype"), str):
        raise SpecsightInputError(f"{where}: provenance.dtype", None, "a string (the dtype the run was measured in)")
    _model(run, "target", where)
    runs = run.get("runs")
    if not isinstance(runs, list) or not runs:
        raise SpecsightInputError(f"{where}: runs", None if runs is None else type(runs).__name__,
                                  "a non-empty list of (batch, K) runs")
    for i, rec in enumerate(runs):
        at_run = f"{where}: runs[{i}]"
        if not isinstance(rec, Mapping):
            raise SpecsightInputError(at_run, type(rec).__name__, "a mapping with batch, k and rounds")
        batch = _int(f"{at_run}.batch", rec.get("batch"), 1, MAX_SEQS)
        k = _int(f"{at_run}.k", rec.get("k"), 0, MAX_K)
        rounds = rec.get("rounds")
        if not isinstance(rounds, list) or not 1 <= len(rounds) <= MAX_ROUNDS:
            raise SpecsightInputError(f"{at_run}.rounds", None if rounds is None else type(rounds).__name__,
                                      f"a list of 1 to {MAX_ROUNDS:,} rounds")
        for j, r in enumerate(rounds):
            at = f"{at_run}.rounds[{j}]"
            if not isinstance(r, Mapping):
                raise SpecsightInputError(at, type(r).__name__, "a mapping (one recorded round)")
            _seconds(f"{at}.wall_s", r.get("wall_s"), lo_open=True)
            _seconds(f"{at}.draft_s", r.get("draft_s", 0.0), lo_open=False)
            _ints(f"{at}.committed_before", r.get("committed_before"), batch, 1, MAX_TOKENS)
            _ints(f"{at}.accepted", r.get("accepted"), batch, 0, k)
            if not isinstance(r.get("warmup", False), bool):
                raise SpecsightInputError(f"{at}.warmup", r.get("warmup"), "true or false")
    if any(rec["k"] > 0 for rec in runs):
        _model(run, "draft", where)
    return run
