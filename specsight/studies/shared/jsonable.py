"""Plain JSON values from results: NaN and infinities become None, numpy values Python values."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def json_safe(v: Any) -> Any:
    """NaN/inf -> None, numpy scalars -> Python numbers, numpy arrays -> lists, recursively."""
    if isinstance(v, Mapping):
        return {str(k): json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    if getattr(v, "ndim", 0) and hasattr(v, "tolist"):          # a numpy array
        return json_safe(v.tolist())
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v
