"""Serving commands: a scenario as each engine's launch (study.py: `deployment`, `plan_deployment`,
`search_deployment`), one writer per engine (vllm.py, sglang.py, trtllm.py).
"""
from __future__ import annotations

from typing import Any

from ..moved import forward


def __getattr__(name: str) -> Any:  # noqa: ANN401
    """The old module specsight.studies.deploy's names, for one release (see moved.py)."""
    return forward(__name__, name)
