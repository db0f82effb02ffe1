"""Unknown-key checks for scenario mappings (the error names the full key path)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .errors import SpecsightInputError, unknown_key_text


def reject_unknown(raw: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    """Raise SpecsightInputError("<where>.<key>", ...) for the first key not in `allowed`."""
    allowed = tuple(allowed)
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        key = unknown[0]
        raise SpecsightInputError(f"{where}.{key}", raw[key],
                                  unknown_key_text(key, allowed))
