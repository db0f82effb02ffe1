"""A day of traffic: the fewest replicas serving a `schedule` workload within an SLO in every
window (study.py: `fleet_day`), and its files (outputs.py).
"""
from __future__ import annotations

from typing import Any

from ..moved import forward


def __getattr__(name: str) -> Any:  # noqa: ANN401
    """The old module specsight.studies.fleet_day's names, for one release (see moved.py)."""
    return forward(__name__, name)
