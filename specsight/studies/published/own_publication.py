"""A published row's spread without its own publication's constants, and whether the row is held out.

Leave-one-source-out (intervals.py) builds a row's interval without its own publication: the
residuals of the rows that share it, and here the ranges of the engine constants whose source names
it (intervals.publication_ids of the constant's source, against the row's). A row whose prediction
is priced with such a constant (SpecDecode-Bench's batch-128 row: vLLM v1-0.9's host work a step and
its draft step are that publication's fit) is not held out: its residual is in-sample.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .intervals import publication_ids
from .spread import NONE, Spread, scenario_spread

if TYPE_CHECKING:
    from .study import PublishedRow


def row_spread(row: PublishedRow, scenario: Mapping[str, Any] | None) -> Spread:
    """The log half-widths the ranges of the row's engine constants give its figure (spread.py, at
    the row's batch, K and mean context) in `scenario` (the row's, under its engine), without the
    constants of the row's own publication (`left_out` names those that price it); NONE where the
    row's engine refuses its setup (scenario None) and under ideal."""
    if scenario is None:
        return NONE
    return scenario_spread(scenario, row.checks, leave_out=publication_ids(row.source))


def not_held_out_reason(row: PublishedRow, left_out: Sequence[str]) -> str:
    """Why a row priced with constants of its own publication is not held out ('' if it is)."""
    if not left_out:
        return ""
    ids = ", ".join(sorted(publication_ids(row.source)))
    return (f"priced with {', '.join(left_out)}, from its own publication ({ids}): its residual is in-sample, "
            "so it is in no pool and not counted in the coverage")
