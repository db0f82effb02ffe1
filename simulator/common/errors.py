"""One error type for bad user input: it names the field, the value and what is allowed.

The CLI prints it as one line and exits with code 2; library callers catch ValueError.
Doubtful but valid input raises no error: it emits a `SpecsightWarning` through `warnings.warn`.
"""
from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Iterable

MAX_SHOWN_CHARS = 120     # an error line shows at most this much of a value (a 10**400, a 300-character name)


def shown(value: object) -> str:
    """repr(value), its middle cut out when it is longer than MAX_SHOWN_CHARS."""
    try:
        text = repr(value)
    except ValueError:                  # an int too long for repr (sys.int_info.str_digits_check_threshold)
        text = f"<an integer of about {value.bit_length() * 0.30103:.0f} digits>"   # type: ignore[attr-defined]
    if len(text) <= MAX_SHOWN_CHARS:
        return text
    half = MAX_SHOWN_CHARS // 2 - 10
    return f"{text[:half]}...<{len(text)} characters>...{text[-half:]}"


class SpecsightInputError(ValueError):
    """Bad input: `field` had `value`; `allowed` says what would be accepted."""

    def __init__(self, field: str, value: object, allowed: str):
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}={shown(value)}: {allowed}")


class SpecsightWarning(UserWarning):
    """Valid input that likely misleads (results are unchanged); the CLI prints it as one line
    `specsight: warning: <message>` on stderr."""


KNOWN_LIST_CHARS = 300      # a longer list of known names is cut (the error stays one readable line)


def closest_names(name: str, choices: Iterable[str], n: int = 3) -> str:
    """'did you mean a, b?' text for an unknown name, or the list of known names when nothing is
    close (cut after KNOWN_LIST_CHARS characters, with how many there are in all)."""
    choices = sorted(choices)
    close = difflib.get_close_matches(str(name), choices, n=n, cutoff=0.4)
    if close:
        return "did you mean " + ", ".join(close) + "?"
    text = ", ".join(choices)
    if len(text) <= KNOWN_LIST_CHARS:
        return "known: " + text
    shown = text[:KNOWN_LIST_CHARS].rsplit(", ", 1)[0]
    return f"known: {shown}, ... ({len(choices)} in all)"


def unknown_key_text(key: str, allowed: Iterable[str]) -> str:
    """'unknown key; did you mean a? (allowed: a, b, c)', the allowed keys listed once."""
    allowed = list(allowed)
    hint = closest_names(key, allowed)
    return f"unknown key; {hint}" + ("" if hint.startswith("known: ") else f" (allowed: {', '.join(allowed)})")


def require_finite(field: str, value: float) -> float:
    """Reject NaN and infinities (they would silently poison every later number)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise SpecsightInputError(field, value, "must be a number") from None
    if not math.isfinite(x):
        raise SpecsightInputError(field, value, "must be a finite number (not NaN or infinite)")
    return x


def require_range(field: str, value: float, lo: float | None = None, hi: float | None = None,
                  lo_open: bool = False, hi_open: bool = False) -> float:
    """A finite number inside [lo, hi] (or open ends); the error states the interval."""
    x = require_finite(field, value)
    bad = (lo is not None and (x < lo or (lo_open and x == lo))) or \
          (hi is not None and (x > hi or (hi_open and x == hi)))
    if bad:
        left = "(" if lo_open else "["
        right = ")" if hi_open else "]"
        lo_s = "-inf" if lo is None else f"{lo:g}"
        hi_s = "inf" if hi is None else f"{hi:g}"
        raise SpecsightInputError(field, value, f"must lie in {left}{lo_s}, {hi_s}{right}")
    return x


def require_int(field: str, value: object, lo: int | None = None, hi: int | None = None) -> int:
    """An integer (bools and non-integral floats rejected) within [lo, hi]."""
    if isinstance(value, bool):
        raise SpecsightInputError(field, value, "must be an integer")
    if isinstance(value, numbers.Integral):
        i = int(value)                      # exactly (a float would round 99999999999999999999)
    else:
        try:
            f = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise SpecsightInputError(field, value, "must be an integer") from None
        if not math.isfinite(f) or f != int(f):
            raise SpecsightInputError(field, value, "must be an integer")
        i = int(f)
    if (lo is not None and i < lo) or (hi is not None and i > hi):
        rng = f">= {lo}" if hi is None else (f"<= {hi}" if lo is None else f"in [{lo}, {hi}]")
        # i: 0, not the 0.0 a float flag parsed; a huge float as given (1e+30, not its 31 digits)
        raise SpecsightInputError(field, i if abs(i) < 10 ** 15 else value, f"must be an integer {rng}")
    return i
