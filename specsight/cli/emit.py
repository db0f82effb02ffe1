"""The one JSON writer of the command line: every --json, and the JSON files commands write."""
from __future__ import annotations

import json
from typing import Any

from ..studies.shared.jsonable import json_safe


def dumps(obj: Any, indent: int | None = 2) -> str:
    """Strict JSON (NaN and infinities as null, numpy values as Python values)."""
    return json.dumps(json_safe(obj), indent=indent, allow_nan=False)


def emit_json(obj: Any, indent: int | None = 2) -> None:
    """Print one JSON object on stdout (indent None: on one line)."""
    print(dumps(obj, indent))
