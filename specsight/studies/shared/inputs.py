"""Checked inputs shared by the studies and the command line."""
from __future__ import annotations

import numbers
from collections.abc import Sequence

from simulator.common.errors import SpecsightInputError, require_int


def int_list(field: str, value: str | int | Sequence[int], lo: int, hi: int) -> list[int]:
    """Integers in [lo, hi] from `1,2,3` text, one integer or a sequence of them (integral floats
    such as 3.0 count as integers)."""
    if isinstance(value, str):
        items: list = [x for x in value.split(",") if x.strip()]
        try:
            [float(x) for x in items]
        except ValueError:
            raise SpecsightInputError(field, value, "a comma-separated list of integers, e.g. 1,2,3,4") from None
    elif isinstance(value, numbers.Real):
        items = [value]
    else:
        items = list(value)
    if not items:
        raise SpecsightInputError(field, value, "at least one value")
    return [require_int(field, _number(v) if isinstance(v, str) else v, lo=lo, hi=hi) for v in items]


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)
