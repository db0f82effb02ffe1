"""Break-even: where speculation stops paying along an axis (study.py: `breakeven`), what an axis
value changes (axes.py), the crossings and verdict (crossings.py), capacity within the SLO along an
axis (capacity.py), the drafter axis (drafters.py), one study per engine (engines.py,
engine_plots.py), the analytic model and its overlay (analytic.py), and the files (outputs.py).
"""
from __future__ import annotations

from typing import Any

from ..moved import forward


def __getattr__(name: str) -> Any:  # noqa: ANN401
    """The old module specsight.studies.breakeven's names, for one release (see moved.py)."""
    return forward(__name__, name)
