"""Test helper: write a scenario mapping to a YAML file that opens, as shipped scenarios do,
with a comment stating the question it answers."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml


def write_scenario(path: Path, scenario: Mapping[str, Any], question: str) -> Path:
    path.write_text(f"# {question}\n" + yaml.safe_dump(dict(scenario)))
    return path
