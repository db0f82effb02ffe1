"""Small CSV helpers for user-supplied data files (traces, length samples, acceptance logs).

Standard library `csv` only: `simulator/` must import without pandas or torch.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from .errors import SpecsightInputError
from .input_files import read_text, usable_file
from .paths import REPO_ROOT

MAX_CELL = 2 ** 53        # |value| of any cell: every integer up to it is exact in float64, and sums of
                          # a CSV's worth of rows stay finite


def resolve_path(path: object, field: str) -> Path:
    """`path` as given if it exists (relative to the cwd), else relative to the repository root."""
    if not isinstance(path, (str, Path)) or not str(path):
        raise SpecsightInputError(field, path, "must be a path to a CSV file")
    try:
        p = Path(path).expanduser()
    except RuntimeError:            # ~user of an unknown user
        p = Path(path)
    cands = (p,) if p.is_absolute() else (p, REPO_ROOT / p)
    for cand in cands:
        if usable_file(cand):
            return cand
    for cand in cands:              # there but not a readable regular file: read_text says why
        try:
            there = cand.exists()
        except (OSError, ValueError):
            there = True
        if there:
            read_text(cand, field, "csv")
    raise SpecsightInputError(field, str(path), f"file not found (looked in the current directory and {REPO_ROOT})")


def read_csv_columns(path: Path, field: str) -> dict[str, np.ndarray]:
    """Every column of a headed CSV as a float64 array; a non-numeric cell is an error naming it."""
    rows = list(csv.reader(read_text(path, field, "csv").splitlines()))
    if not rows or not rows[0]:
        raise SpecsightInputError(field, str(path), "CSV is empty (a header row is required)")
    header = [h.strip() for h in rows[0]]
    body = [r for r in rows[1:] if any(c.strip() for c in r)]
    cols: dict[str, np.ndarray] = {}
    for j, name in enumerate(header):
        vals = np.empty(len(body))
        for i, r in enumerate(body):
            try:
                vals[i] = float(r[j])
            except (IndexError, ValueError):
                cell = r[j] if j < len(r) else None
                raise SpecsightInputError(field, str(path),
                                          f"row {i + 2}, column {name!r}: {cell!r} is not a number") from None
        if not np.all(np.isfinite(vals)):
            row = int(np.flatnonzero(~np.isfinite(vals))[0]) + 2
            raise SpecsightInputError(field, str(path), f"row {row}, column {name!r}: NaN or infinite")
        if np.any(np.abs(vals) > MAX_CELL):
            row = int(np.flatnonzero(np.abs(vals) > MAX_CELL)[0]) + 2
            raise SpecsightInputError(field, str(path), f"row {row}, column {name!r}: a value beyond +-{MAX_CELL:.3g} "
                                                        "(2^53, the largest exact integer)")
        cols[name] = vals
    return cols


def require_columns(cols: dict[str, np.ndarray], names: tuple[str, ...], field: str, path: Path) -> None:
    missing = [n for n in names if n not in cols]
    if missing:
        raise SpecsightInputError(field, str(path), f"missing column(s) {', '.join(missing)}; found {', '.join(cols)}")


def as_counts(values: np.ndarray, field: str, column: str, lo: int = 0, hi: int = MAX_CELL) -> np.ndarray:
    """A float column that must hold integers in [lo, hi], as int64."""
    bad = (values != np.round(values)) | (values < lo) | (values > hi)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise SpecsightInputError(field, float(values[i]), f"row {i + 2}, column {column!r}: integers in "
                                                           f"[{lo}, {hi:,}]")
    return values.astype(np.int64)
