"""Sweep: simulate the cartesian product of grids of scenario overrides, resumably.

`sweep(scenario, {"acceptance.alpha": [0.5, 0.7]})` evaluates every point through the point
store (points.py), on this process, a local process pool or a dask.distributed cluster, and
returns a `SweepResult`: one DataFrame row per point (the overrides, the summary's headline
columns, error, elapsed_s, cached, key) and the raw records.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .shared.overrides import check_points, grid_points, scenario_source
from .shared.points import run_points, study_executor

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ("output_tokens_per_s", "speedup_output_tokens_per_s", "tpot_ms_p50", "tpot_ms_p99", "ttft_ms_p99",
           "goodput_requests_per_s", "slo_attainment", "mean_tokens_per_round", "mean_batch")


@dataclass(frozen=True)
class SweepResult:
    """One sweep: `frame` has a row per point; `records` are the point store's records, in order."""
    scenario: str | None
    points: list[dict[str, Any]]
    records: list[dict[str, Any]]
    frame: Any                              # pandas.DataFrame
    store_path: Path | None

    @property
    def computed(self) -> int:
        """Points simulated by this call (the rest came from the store)."""
        return int((~self.frame["cached"]).sum())

    @property
    def errors(self) -> int:
        return int((self.frame["error"] != "").sum())

    def to_dict(self) -> dict[str, Any]:
        """The points and the counts (what `specsight sweep --json` prints, less timing and files)."""
        return {"scenario": self.scenario, "points": [
            {"key": r["key"], "overrides": r["overrides"], "summary": r["summary"], "error": r["error"],
             "cached": r["cached"]} for r in self.records],
            "computed": self.computed, "from_store": len(self.records) - self.computed, "errors": self.errors}


def records_frame(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per record: its overrides (dicts and lists as JSON), COLUMNS of its summary,
    error, elapsed_s, cached, key."""
    import pandas as pd
    rows = []
    for r in records:
        row: dict[str, Any] = {k: (json.dumps(v) if isinstance(v, (dict, list)) else v)
                               for k, v in r["overrides"].items()}
        s = r["summary"] or {}
        for c in COLUMNS:
            row[c] = s.get(c, math.nan) if s.get(c) is not None else math.nan
        row.update(error=r["error"] or "", elapsed_s=r["elapsed_s"], cached=r["cached"], key=r["key"])
        rows.append(row)
    return pd.DataFrame(rows)


def sweep(scenario: Any, grid: Sequence[str] | Mapping[str, Sequence[Any]], *, overrides: Iterable[str] = (),
          baseline: bool = False, store: str | Path | None = None, workers: int | None = None,
          dask: str | None = None, executor: Any = None, retry_errors: bool = False,
          progress: bool = True) -> SweepResult:
    """Simulate every point of the grid's cartesian product.

    scenario: a YAML path, a mapping or a Scenario; grid: {key.path: [values]} or `key=v1,v2`
    strings; overrides: `key.path=value` strings applied first; baseline: also run each point
    with speculation off (speedup_* columns); store: the JSON-lines point store (None: in memory
    only); workers (default: CPU count, 1 = this process), dask (a scheduler address) or an
    executor of your own."""
    source = scenario_source(scenario, overrides)
    points = grid_points(grid)
    check_points(source, points)                 # a misspelt key or a refused value: one error, before any run
    store_path = None if store is None else Path(store)
    with study_executor(executor, workers, dask, len(points)) as ex:
        recs = run_points(source, points, store_path, ex, baseline=baseline, progress=progress,
                          desc="sweep", retry_errors=retry_errors)
    return SweepResult(source.get("name"), points, recs, records_frame(recs), store_path)
