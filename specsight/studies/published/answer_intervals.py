"""The 80 % intervals on the answers the studies print: each speedup, each capacity and each
break-even under a real engine.

A speedup's interval is `interval_for`'s (specsight.studies.published.intervals: the published
table's residuals of the run's engine and drafter family), widened by the spread the ranges of the
engine's constants give it (spread.py: `spread` [down, up], log half-widths, at the answer's
batch and K on the scenario's own step cost): the prediction times two factors. A capacity under speculation takes the
same two factors (the speedup's error carried to the capacity, plain decoding's capacity held
right, as `summary_intervals` holds the plain TPOT right); replicas follow from the capacity's
ends. A break-even's range is where the speedup's interval edges cross 1
(crossings.breakeven_range). `ideal` has none: it is the physics bound, not an engine the
table measures.

In a frame or a row an interval is one `<figure>_interval` value, [low, high] (None where there
is none); a CSV gets it as two numeric columns, `<figure>_low` and `<figure>_high` (csv_frame).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .intervals import LEVEL, family, interval_for, load_residuals
from .spread import priced_scenario

IDEAL_NOTE = "ideal: the physics bound, no interval"
SUFFIX = "_interval"


def scenario_group(source: Mapping[str, Any]) -> tuple[str, str | None]:
    """A scenario mapping's (engine.kind, drafter method): what picks its residuals."""
    kind = str((source.get("engine") or {}).get("kind") or "ideal")
    return kind, (source.get("drafter") or {}).get("method")


def has_interval(engine: str | None) -> bool:
    return engine not in (None, "ideal")


def speedup_interval(value: Any, engine: str, method: str | None, rows: Sequence[Mapping[str, Any]] | None = None,
                     spread: Sequence[float] | None = None) -> list[float] | None:
    """One speedup's [low, high] (None for ideal, a missing or non-positive value, or no residuals)."""
    if not has_interval(engine) or not _positive(value):
        return None
    return interval_for(float(value), engine, method, "speedup", rows, spread)


def speedup_intervals(values: Sequence[Any], engine: str, methods: str | None | Sequence[str | None],
                      spreads: Sequence[Sequence[float] | None] | None = None) -> list[list[float] | None]:
    """speedup_interval for each value; `methods`: one drafter method for all, or one per value;
    `spreads`: one [down, up] per value (None: none)."""
    rows = load_residuals() if has_interval(engine) else []
    per = list(methods) if isinstance(methods, (list, tuple)) else [methods] * len(values)
    sps = list(spreads) if spreads is not None else [None] * len(values)
    return [speedup_interval(v, engine, m, rows, sp) for v, m, sp in zip(values, per, sps)]


def scaled_interval(value: Any, engine: str, method: str | None, rows: Sequence[Mapping[str, Any]] | None = None,
                    spread: Sequence[float] | None = None) -> list[float] | None:
    """`value` (a capacity under speculation) times the speedup's two factors."""
    if not _positive(value):
        return None
    unit = speedup_interval(1.0, engine, method, rows, spread)
    return None if unit is None else [float(value) * unit[0], float(value) * unit[1]]


def replicas_interval(target_qps: float, capacity: list[float] | None) -> list[int] | None:
    """[fewest, most] replicas serving `target_qps` over a per-replica capacity interval."""
    if capacity is None or not capacity[0] > 0:
        return None
    return [math.ceil(target_qps / capacity[1]), math.ceil(target_qps / capacity[0])]


def group_note(engine: str, method: str | None, each: bool = False) -> str:
    """The line a text answer closes with: what [low-high] means (`each`: the rows' drafters
    differ), or IDEAL_NOTE."""
    if not has_interval(engine):
        return IDEAL_NOTE
    fam = "each row's drafter family" if each else f"the {family(method)} drafter family"
    return (f"[low-high]: the {100 * LEVEL:.0f} % interval, from the published table's residuals for engine "
            f"{engine} and {fam}, widened by the ranges of the engine's constants (docs/validation.md)")


def format_interval(iv: Any, fmt: str = ".2f") -> str:
    """'[1.05-1.41]', or '' when there is none."""
    if not isinstance(iv, (list, tuple)) or len(iv) != 2 or not all(_finite(v) for v in iv):
        return ""
    return f"[{format(iv[0], fmt)}-{format(iv[1], fmt)}]"


def csv_frame(df: Any) -> Any:
    """The frame with each `<figure>_interval` column as `<figure>_low` and `<figure>_high` in its
    place (numbers; NaN where there is no interval)."""
    cols = [c for c in df.columns if str(c).endswith(SUFFIX)]
    if not cols:
        return df
    out = df.copy()
    for c in cols:
        stem = str(c)[:-len(SUFFIX)]
        at = list(out.columns).index(c)
        ends = [v if isinstance(v, (list, tuple)) and len(v) == 2 else (math.nan, math.nan) for v in out[c]]
        out = out.drop(columns=c)
        out.insert(at, f"{stem}_high", [float(e[1]) if e[1] is not None else math.nan for e in ends])
        out.insert(at, f"{stem}_low", [float(e[0]) if e[0] is not None else math.nan for e in ends])
    return out


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _positive(v: Any) -> bool:
    try:
        return v is not None and math.isfinite(float(v)) and float(v) > 0
    except (TypeError, ValueError):
        return False


def row_spreads(df: Any, source: Mapping[str, Any]) -> list[list[float]]:
    """Each row's [down, up] on the scenario's step cost at the row's plain mean batch
    (`base_mean_batch`, else `mean_batch`) and K (`k`), where the frame has them."""
    p = priced_scenario(source) if has_interval(scenario_group(source)[0]) else None
    if p is None:
        return [[0.0, 0.0]] * len(df)
    col = next((c for c in ("base_mean_batch", "mean_batch") if c in df.columns), None)
    out = []
    for _, r in df.iterrows():
        b = r[col] if col is not None and _positive(r[col]) else None
        k = int(r["k"]) if "k" in df.columns and _positive(r["k"]) else None
        s = p.spread("speedup", b, k)
        out.append([s.down, s.up])
    return out


def with_speedup_interval(df: Any, source: Mapping[str, Any],
                          methods: Sequence[str | None] | None = None) -> Any:
    """A study frame with `speedup_interval` after `speedup` under a real engine (the frame as it
    is under ideal); `methods`: one drafter method per row where the rows' drafters differ; each
    row's interval widened by its spread (row_spreads)."""
    engine, method = scenario_group(source)
    if not has_interval(engine) or "speedup" not in df.columns or not len(df):
        return df
    out = df.copy()
    out.insert(list(out.columns).index("speedup") + 1, "speedup_interval",
               speedup_intervals(out["speedup"].tolist(), engine, list(methods) if methods is not None else method,
                                 row_spreads(out, source)))
    return out


def capacity_intervals(row: Mapping[str, Any], target_qps: float, engine: str, method: str | None,
                       speculates: bool, spread: Sequence[float] | None = None) -> dict[str, Any]:
    """A capacity plan row's intervals under a real engine ({} under ideal): `capacity_vs_off_interval`
    (the speedup's), `max_qps_per_replica_interval` (the capacity times the speedup's two
    factors) and `replicas_interval` (the replicas serving `target_qps` at its ends); None for a
    configuration that does not speculate (plain decoding: the reference the speedups are
    relative to); `spread`: the speedup's [down, up] (spread.scenario_spread(...).pair)."""
    if not has_interval(engine):
        return {}
    rows = load_residuals()
    cap = scaled_interval(row.get("max_qps_per_replica"), engine, method, rows, spread) if speculates else None
    vs = speedup_interval(row.get("capacity_vs_off"), engine, method, rows, spread) if speculates else None
    return {"max_qps_per_replica_interval": cap, "capacity_vs_off_interval": vs,
            "replicas_interval": replicas_interval(target_qps, cap)}
