"""Published validation: the simulator against published speedups and throughputs (study.py:
`validate_published`) and its report (report.py, docs/validation.md).
"""
from __future__ import annotations

from typing import Any

from ..moved import forward


def __getattr__(name: str) -> Any:  # noqa: ANN401
    """The old module specsight.studies.published's names, for one release (see moved.py)."""
    return forward(__name__, name)
