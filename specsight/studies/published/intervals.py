"""80 % intervals on predictions, from the published table's residuals, leave-one-source-out,
widened by the spread the ranges of the engine's constants give the prediction (spread.py).

A row's residual is log(published / predicted). A row's interval is its prediction times
exp(the 10 % and 90 % split-conformal order statistics, `conformal_interval`) of the residuals of
the other rows of its group, widened in quadrature by its `spread` [down, up], leaving out
every row that shares a publication with it (`publication_ids`: the PR / issue numbers and arXiv
ids its source names; a source naming none is its own publication): a row's interval is built
without its own publication. Group: the row's published engine and its drafter family (plain
decoding, EAGLE-like heads (eagle, eagle3, mtp), lookup (ngram, suffix), draft models); a group
left with fewer than MIN_POOL rows widens to the family over every engine, then to every row.
The spread leaves out the constants of the row's own publication too (spread.py, `leave_out`); a
row whose prediction is priced with such a constant (SpecDecode-Bench's row, priced with v1-0.9's
host constants, that publication's fit) is not held out: its residual is in-sample, so it is in no
pool and not counted in the coverage (`held_out` False, `not_held_out` the reason); its interval
is still shown. `coverage`: the share of held-out rows whose published figure lies inside its
interval (the goal: at least 80 %). `ideal` has no interval: it is the physics bound, not an engine
the table measures.

`interval_for` gives a scenario's prediction the residual interval of every row of its group (no row
to leave out), widened by the scenario's own spread; simulate --json reads the residuals from RESIDUALS_FILE, which
`python -m specsight.studies.published.report --residuals` rewrites from the table it prints.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from simulator.common.paths import DATA_DIR

LEVEL = 0.8
QUANTILES = ((1 - LEVEL) / 2, 1 - (1 - LEVEL) / 2)
MIN_POOL = 4
RESIDUALS_FILE = DATA_DIR / "published" / "residuals.json"
FAMILIES = {"eagle": "eagle", "eagle3": "eagle", "mtp": "eagle", "ngram": "lookup", "suffix": "lookup",
            "draft_model": "draft_model"}
_IDS = re.compile(r"#\d+|arXiv \d{4}\.\d{4,5}")


def publication_ids(source: str) -> frozenset[str]:
    """The publications a source names (PR and issue numbers, arXiv ids); the source itself if none."""
    ids = frozenset(_IDS.findall(source))
    return ids or frozenset([source])


def family(method: str | None) -> str:
    """A drafter method's family (None or '': plain decoding)."""
    return "plain" if not method else FAMILIES.get(method, method)


def _pool(rows: Sequence[Mapping[str, Any]], i: int | None, engine: str, fam: str, figure: str,
          ids: frozenset[str]) -> list[float]:
    """Residuals of the rows of (engine, family, figure) not sharing a publication with ids, widened
    to the family then to every row of the figure while fewer than MIN_POOL."""
    pool: list[float] = []
    for keep in (lambda r: r["engine"] == engine and r["family"] == fam, lambda r: r["family"] == fam,
                 lambda r: True):
        pool = [r["residual"] for j, r in enumerate(rows) if j != i and r["figure"] == figure and keep(r)
                and r.get("held_out", True) and math.isfinite(r["residual"]) and not (ids & frozenset(r["ids"]))]
        if len(pool) >= MIN_POOL:
            break
    return pool


def conformal_interval(predicted: float, pool: Sequence[float],
                       spread: Sequence[float] | None = None) -> list[float] | None:
    """predicted x exp(the pool's order statistics of ranks floor((n + 1) q_lo) and
    ceil((n + 1) q_hi)), clipped to the pool's ends: the split-conformal interval, whose coverage
    holds for exchangeable residuals at any pool size n (Lei et al. 2018, 'Distribution-free
    predictive inference for regression', JASA; a plain quantile undercovers small pools); then
    widened by the constants' spread (`spread`: [down, up], log half-widths, spread.py) in
    quadrature about the residual interval's centre m with half-width w:
        low = m - sqrt(w^2 + down^2),   high = m + sqrt(w^2 + up^2)   (log space)
    (the residuals' spread and the constants' taken as independent: their variances add, as the
    GUM's root-sum-of-squares does; the residuals' centre m, the table's bias, is kept). None for
    an empty pool or a prediction that is not finite and positive; a non-finite residual or a
    spread that is not two finite numbers of 0 or more: ValueError."""
    if not pool or not math.isfinite(predicted) or predicted <= 0:
        return None
    lo, hi = _conformal_bounds(pool)
    return widened(predicted, lo, hi, spread)


def _conformal_bounds(pool: Sequence[float]) -> tuple[float, float]:
    """The pool's split-conformal log bounds (conformal_interval), before any widening."""
    r = np.sort(np.asarray(pool, dtype=float))
    if not np.isfinite(r).all():
        raise ValueError(f"a residual of the pool is not finite: {[float(x) for x in pool]}")
    n = len(r)
    return (float(r[min(max(math.floor((n + 1) * QUANTILES[0]), 1), n) - 1]),
            float(r[min(max(math.ceil((n + 1) * QUANTILES[1]), 1), n) - 1]))


def widened(predicted: float, lo: float, hi: float, spread: Sequence[float] | None) -> list[float]:
    """predicted x exp of the log bounds [lo, hi] widened by `spread` in quadrature about their
    centre (conformal_interval)."""
    if spread is not None and (len(spread) != 2 or not all(math.isfinite(float(v)) and float(v) >= 0
                                                           for v in spread)):
        raise ValueError(f"spread {list(spread)}: two finite log half-widths of 0 or more, [down, up]")
    down, up = (float(spread[0]), float(spread[1])) if spread is not None else (0.0, 0.0)
    m, w = (lo + hi) / 2, (hi - lo) / 2
    lo, hi = m - math.sqrt(w * w + down * down), m + math.sqrt(w * w + up * up)
    return [float(predicted * math.exp(lo)), float(predicted * math.exp(hi))]


def residual_rows(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The residual table from validation rows (name, published_engine, method, figure, source,
    published, predicted; held_out and not_held_out where a row is not held out)."""
    out = []
    for r in records:
        pub, pred = float(r["published"]), float(r["predicted"])
        res = math.log(pub / pred) if math.isfinite(pred) and pred > 0 else math.nan
        sp = r.get("spread")
        out.append({"name": r["name"], "engine": r["published_engine"], "family": family(r.get("method")),
                    "figure": r["figure"], "ids": sorted(publication_ids(str(r["source"]))),
                    "published": pub, "predicted": pred, "residual": res,
                    "spread": [float(sp[0]), float(sp[1])] if sp is not None else [0.0, 0.0],
                    "held_out": bool(r.get("held_out", True)), "not_held_out": str(r.get("not_held_out") or "")})
    return out


def loso_intervals(rows: Sequence[Mapping[str, Any]]) -> list[list[float] | None]:
    """Each row's 80 % interval, leave-one-source-out (module docstring)."""
    return [conformal_interval(r["predicted"], _pool(rows, i, r["engine"], r["family"], r["figure"],
                                                     frozenset(r["ids"])), r.get("spread"))
            for i, r in enumerate(rows)]


def coverage(rows: Sequence[Mapping[str, Any]], intervals: Sequence[list[float] | None]) -> dict[str, Any]:
    """Held-out rows (`held_out`, default True) with an interval, how many hold their published
    figure, the share, and the rows with an interval left out of the count as not held out."""
    held = [iv[0] <= r["published"] <= iv[1] for r, iv in zip(rows, intervals)
            if iv is not None and r.get("held_out", True)]
    out = [str(r.get("name", "")) for r, iv in zip(rows, intervals) if iv is not None and not r.get("held_out", True)]
    return {"rows": len(held), "inside": int(sum(held)), "coverage": (sum(held) / len(held)) if held else None,
            "level": LEVEL, "not_held_out": out}


def coverage_words(c: Mapping[str, Any], what: str) -> str:
    """'30 of 36 rows (83 %; goal at least 80 %: met)' for a `coverage` result (`what`: rows, runs)."""
    if not c["rows"]:
        return f"no {what}"
    share = "-" if c["coverage"] is None else f"{100 * c['coverage']:.0f} %"
    met = c["coverage"] is not None and c["coverage"] >= LEVEL
    return (f"{c['inside']} of {c['rows']} {what} ({share}; goal at least {100 * LEVEL:.0f} %: "
            f"{'met' if met else 'NOT met'})")


def interval_for(value: float, engine: str, method: str | None, figure: str = "speedup",
                 rows: Sequence[Mapping[str, Any]] | None = None,
                 spread: Sequence[float] | None = None) -> list[float] | None:
    """A scenario's prediction with the interval of its (engine, family) group's residuals (every
    row: a scenario is no row of the table), widened by its constants' spread ([down, up], log;
    spread.py); None for ideal or with no residuals."""
    if engine in (None, "ideal"):
        return None
    rows = load_residuals() if rows is None else rows
    return conformal_interval(value, _pool(rows, None, engine, family(method), figure, frozenset()), spread)


def tpot_interval_for(value: float, engine: str, method: str | None,
                      rows: Sequence[Mapping[str, Any]] | None = None,
                      spread: Sequence[float] | None = None) -> list[float] | None:
    """A speculative TPOT's interval: its group's speedup residuals negated (a speedup's error
    taken as the speculative TPOT's, the plain TPOT held right: log(TPOT) moves by -log(speedup)),
    widened by the TPOT's own `spread` ([down, up], spread.py's `tpot` figure, d ln(round)); None
    for ideal or with no residuals."""
    if engine in (None, "ideal") or not math.isfinite(value) or value <= 0:
        return None
    rows = load_residuals() if rows is None else rows
    pool = _pool(rows, None, engine, family(method), "speedup", frozenset())
    if not pool:
        return None
    lo, hi = _conformal_bounds(pool)
    return widened(value, -hi, -lo, spread)


def summary_intervals(summary: Mapping[str, Any], engine: str | None, method: str | None,
                      rows: Sequence[Mapping[str, Any]] | None = None,
                      spread: Sequence[float] | None = None,
                      tpot_spread: Sequence[float] | None = None) -> dict[str, list[float] | None]:
    """`<metric>_interval` for a run's summary under a real engine: each speedup_* figure with its
    group's interval (interval_for, widened by the speedup's `spread`), and the speculative TPOT
    means and percentiles with tpot_interval_for (the speedup residuals inverted, widened by the
    TPOT's `tpot_spread`). Empty for ideal, or a run without a baseline."""
    if engine in (None, "ideal") or not any(k.startswith("speedup_") for k in summary):
        return {}
    rows = load_residuals() if rows is None else rows
    out: dict[str, list[float] | None] = {}
    for k, v in summary.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
            continue
        if k.startswith("speedup_"):
            out[f"{k}_interval"] = interval_for(float(v), engine, method, "speedup", rows, spread)
        elif k.startswith("tpot_ms"):
            out[f"{k}_interval"] = tpot_interval_for(float(v), engine, method, rows, tpot_spread)
    return out


def load_residuals() -> list[dict[str, Any]]:
    return json.loads(RESIDUALS_FILE.read_text())["rows"] if RESIDUALS_FILE.exists() else []


def residuals_document(df: Any) -> dict[str, Any]:
    rows = residual_rows(df.to_dict("records"))
    ivs = loso_intervals(rows)
    for r, iv in zip(rows, ivs):
        r["interval"] = iv
    return {"command": "python -m specsight.studies.published.report --residuals > docs/validation.md", "level": LEVEL,
            "coverage": coverage(rows, ivs), "rows": rows}

