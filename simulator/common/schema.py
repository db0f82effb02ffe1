"""The scenario schema's machinery: field types that check a value and say what they allow.

A schema is a tree of field objects (the table itself is simulator/scenario/schema_table.py):
    Int, Float      numbers with a closed or open range (every range has a finite top)
    Bool, Str       a boolean; a string of bounded length, optionally one of a set of names
    ListOf, Pair    a list of one item type (bounded length); a fixed-length row of typed items
    Section         a mapping of named fields (unknown keys refused, "did you mean")
    Variants        a mapping whose tag key (`dist`, `model`, `kind`, `process`) selects a Section
    OneOf           a value whose Python type picks the alternative (`output_len: 256` or a mapping)
`check(field, value, where)` walks a value against its field and returns it cleaned (an integral
float in an integer field becomes an int, -0.0 becomes 0.0; nothing else changes) or raises
SpecsightInputError(where, value, what is allowed). `markdown()` renders a table for docs/schema.md.

Why hand-written, not pydantic or jsonschema: the table is ~100 keys, and what matters is the
error line (`workload.arrival.qps='2': must be a number in (0, 1e+09], not a string`), the
"did you mean" hint, tagged unions keyed by a name with shorthands (`acceptance: 0.7`,
`policy: off`), numpy scalars from Python callers, and a generated reference. pydantic would add
a compiled dependency to a package whose simulator imports only numpy, simpy and PyYAML, and its
strict mode and discriminated unions would still need a layer translating its errors into ours;
jsonschema reports errors by schema path and cannot refuse a huge integer before Python converts
it. Eight small classes do all of it and keep the limits in one readable table.
"""
from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import SpecsightInputError, closest_names, unknown_key_text

REQUIRED = "required"      # a Field.default meaning "no default: the key must be given"
LIMIT_NOTE = " (the schema's limit: docs/schema.md)"


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and type(v).__name__ not in ("bool", "bool_")


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and type(v).__name__ not in ("bool", "bool_")


def _kind_of(v: Any) -> str:
    """What a wrong value is, for the error line."""
    if isinstance(v, str):
        return "a string" + _number_hint(v)
    if type(v).__name__ in ("bool", "bool_"):
        return "a boolean (YAML reads yes/no/on/off/true/false as booleans)"
    if v is None:
        return "null"
    if isinstance(v, Mapping):
        return "a mapping"
    if isinstance(v, (list, tuple)):
        return "a list"
    if _is_real(v):
        return "a number"
    return f"a {type(v).__name__}"


def _number_hint(text: str) -> str:
    """For a string that reads as a number: how to write it so YAML reads a number."""
    try:
        x = float(text)
    except ValueError:
        return ""
    if not math.isfinite(x):
        return ""
    t = text.strip()
    if "e" in t.lower() and "." not in t:        # YAML 1.1 wants a dot in a float with an exponent
        return f" (YAML reads {t} as text: write {x:.1e})"
    return f" (quoted: write {t} without quotes)"


def _written(key: Any) -> str:
    """A non-string mapping key as the YAML text that gives it."""
    if key is None:
        return "~"
    if type(key).__name__ in ("bool", "bool_"):
        return "true" if key else "false"
    return str(key)


def _num(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


@dataclass(frozen=True)
class Field:
    """One key: what it means, its unit and default; subclasses check values."""
    doc: str = ""
    unit: str = ""
    default: Any = None
    nullable: bool = False    # null is accepted (and means the default)

    def allowed(self) -> str:
        raise NotImplementedError

    def check(self, value: Any, where: str) -> Any:
        raise NotImplementedError

    def refuse(self, value: Any, where: str, note: str | None = None) -> SpecsightInputError:
        """note None: a value of the wrong type (the line says what it is); else appended."""
        what = f", not {_kind_of(value)}" if note is None else note
        return SpecsightInputError(where, value, f"must be {self.allowed()}{what}")


@dataclass(frozen=True)
class Int(Field):
    lo: int = 0
    hi: int = 0

    def allowed(self) -> str:
        return f"an integer in [{self.lo}, {self.hi}]"

    def check(self, value: Any, where: str) -> int:
        if _is_int(value):
            i = int(value)
        elif _is_real(value):
            f = float(value)
            if not math.isfinite(f):
                raise self.refuse(value, where, " (NaN and infinities are refused)")
            if f != int(f):
                raise self.refuse(value, where, " (a whole number)")
            i = int(f)
        else:
            raise self.refuse(value, where)
        if not self.lo <= i <= self.hi:
            raise self.refuse(value, where, LIMIT_NOTE if i > self.hi else "")
        return value if _is_int(value) else i


@dataclass(frozen=True)
class Float(Field):
    lo: float = 0.0
    hi: float = 0.0
    lo_open: bool = False
    hi_open: bool = False

    def allowed(self) -> str:
        left, right = "(" if self.lo_open else "[", ")" if self.hi_open else "]"
        return f"a number in {left}{_num(self.lo)}, {_num(self.hi)}{right}"

    def check(self, value: Any, where: str) -> Any:
        if not _is_real(value):
            raise self.refuse(value, where)
        if _is_int(value):       # exact comparison: a 400-digit integer must not reach float()
            x: Any = int(value)
        else:
            x = float(value)
            if not math.isfinite(x):
                raise self.refuse(value, where, " (NaN and infinities are refused)")
        if x < self.lo or x > self.hi or (self.lo_open and x == self.lo) or (self.hi_open and x == self.hi):
            raise self.refuse(value, where, LIMIT_NOTE if x > self.hi else "")
        if x == 0 and not _is_int(value):
            return 0.0             # -0.0 -> 0.0: numpy refuses a zero scale with its sign bit set
        return value


@dataclass(frozen=True)
class Bool(Field):
    def allowed(self) -> str:
        return "true or false"

    def check(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            raise self.refuse(value, where)
        return value


@dataclass(frozen=True)
class Str(Field):
    max_len: int = 200
    choices: tuple[str, ...] = ()
    min_len: int = 1

    def allowed(self) -> str:
        if self.choices:
            return "one of " + ", ".join(self.choices)
        return f"a string of {self.min_len} to {self.max_len} characters"

    def check(self, value: Any, where: str) -> Any:
        if hasattr(value, "__fspath__") and not self.choices:
            value = str(value)
            text = value
        elif not isinstance(value, str):
            raise self.refuse(value, where)
        else:
            text = value
        if self.choices:
            if text not in self.choices:
                raise SpecsightInputError(where, value, closest_names(text, self.choices))
        elif not self.min_len <= len(text) <= self.max_len or "\x00" in text:
            raise SpecsightInputError(where, value, f"must be {self.allowed()} (no NUL)")
        return value


@dataclass(frozen=True)
class ListOf(Field):
    item: Field = field(default_factory=Field)
    min_len: int = 1
    max_len: int = 1024

    def allowed(self) -> str:
        return f"a list of {self.min_len} to {self.max_len} items, each {self.item.allowed()}"

    def check(self, value: Any, where: str) -> list:
        if not isinstance(value, (list, tuple)):
            raise self.refuse(value, where)
        if not self.min_len <= len(value) <= self.max_len:
            raise SpecsightInputError(where, value, f"must be {self.allowed()}")
        return [check(self.item, v, f"{where}[{i}]") for i, v in enumerate(value)]


@dataclass(frozen=True)
class Pair(Field):
    items: tuple[Field, ...] = ()

    def allowed(self) -> str:
        return "[" + ", ".join(f.doc or f.allowed() for f in self.items) + "]"

    def check(self, value: Any, where: str) -> list:
        if not isinstance(value, (list, tuple)) or len(value) != len(self.items):
            raise SpecsightInputError(where, value, f"must be a list {self.allowed()}")
        return [check(f, v, f"{where}[{i}]") for i, (f, v) in enumerate(zip(self.items, value))]


def check_keys(value: Mapping, where: str) -> None:
    """Mapping keys must be strings (YAML reads `~` as null, `1` as a number, `on` as a boolean)."""
    for k in value:
        if not isinstance(k, str):
            text = _written(k)
            raise SpecsightInputError(f"{where} key" if where else "key", text,
                                      f"keys must be strings; YAML reads {text} as {_kind_of(k).split(' (')[0]}: "
                                      f"quote it (\"{text}\")")


@dataclass(frozen=True)
class Section(Field):
    keys: Mapping[str, Field] = field(default_factory=dict)

    def allowed(self) -> str:
        return "a mapping with keys " + ", ".join(self.keys)

    def check(self, value: Any, where: str) -> dict:
        if not isinstance(value, Mapping):
            raise self.refuse(value, where)
        check_keys(value, where)
        out: dict[str, Any] = {}
        for k, v in value.items():
            sub = f"{where}.{k}" if where else k
            f = self.keys.get(k)
            if f is None:
                raise SpecsightInputError(sub, v, unknown_key_text(k, self.keys))
            out[k] = check(f, v, sub)
        for k, f in self.keys.items():
            if f.default == REQUIRED and k not in value:
                raise SpecsightInputError(f"{where}.{k}" if where else k, None, f"required: {f.allowed()}")
        return out


@dataclass(frozen=True)
class Variants(Field):
    """A mapping whose `tag` key names the variant; `common` keys are allowed in every variant."""
    tag: str = "kind"
    variants: Mapping[str, Mapping[str, Field]] = field(default_factory=dict)
    common: Mapping[str, Field] = field(default_factory=dict)

    def allowed(self) -> str:
        return f"a mapping {{{self.tag}: {'|'.join(self.variants)}, ...}}"

    def check(self, value: Any, where: str) -> dict:
        if not isinstance(value, Mapping):
            raise self.refuse(value, where)
        check_keys(value, where)
        name = value.get(self.tag)
        tag_where = f"{where}.{self.tag}"
        if not isinstance(name, str) or name not in self.variants:
            hint = closest_names(str(name), self.variants) if isinstance(name, str) else \
                f"one of {', '.join(self.variants)}, not {_kind_of(name)}"
            raise SpecsightInputError(tag_where, name, hint)
        keys = {**self.variants[name], **self.common}
        for k in value:                  # a key of another variant: say which, and what to set
            owners = [v for v, ks in self.variants.items() if k in ks] if k not in keys and k != self.tag else []
            if owners:
                raise SpecsightInputError(f"{where}.{k}", value[k],
                                          f"unknown key for {self.tag} {name}; a key of {self.tag} "
                                          f"{' or '.join(owners)}: replace the mapping, {self.tag} {owners[0]} with it "
                                          f"(--set '{where}={{{self.tag}: {owners[0]}, {k}: {json.dumps(value[k])}}}')")
        sec = Section(keys={self.tag: Str(choices=tuple(self.variants)), **keys})
        return sec.check(value, where)


@dataclass(frozen=True)
class OneOf(Field):
    """A value whose type picks the alternative: numbers, strings, mappings or lists."""
    options: tuple[Field, ...] = ()

    def allowed(self) -> str:
        return " or ".join(o.allowed() for o in self.options)

    def check(self, value: Any, where: str) -> Any:
        for o in self.options:
            if _accepts_type(o, value):
                return check(o, value, where)
        raise SpecsightInputError(where, value, f"must be {self.allowed()}, not {_kind_of(value)}")


def _accepts_type(f: Field, v: Any) -> bool:
    if isinstance(f, (Int, Float)):
        return _is_real(v)
    if isinstance(f, Str):
        return isinstance(v, str)
    if isinstance(f, Bool):
        return isinstance(v, bool)
    if isinstance(f, (Section, Variants)):
        return isinstance(v, Mapping)
    if isinstance(f, (ListOf, Pair)):
        return isinstance(v, (list, tuple))
    return False


def check(f: Field, value: Any, where: str) -> Any:
    """`value` checked against `f` (null allowed where the field is nullable), cleaned."""
    if value is None:
        if f.nullable:
            return None
        raise SpecsightInputError(where, None, f"must be {f.allowed()}, not null")
    return f.check(value, where)


# ---- size and depth of parsed input ------------------------------------------------------------
MAX_DEPTH = 32           # nesting levels of a scenario (the deepest legitimate one has 4)
MAX_NODES = 100_000      # values in a scenario, YAML aliases counted each time they are used


def check_shape(value: Any, where: str, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> None:
    """Refuse nesting deeper than max_depth and more than max_nodes values (iteratively: no
    recursion, so an alias bomb or 3,000 nested brackets cost nothing to refuse)."""
    stack = [(value, 1)]
    nodes = 0
    while stack:
        v, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            raise SpecsightInputError(where, f"more than {max_nodes} values",
                                      f"at most {max_nodes} values (YAML aliases count each time they are used)")
        if depth > max_depth:
            raise SpecsightInputError(where, f"nested {depth}+ levels deep", f"at most {max_depth} levels of nesting")
        if isinstance(v, Mapping):
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend((x, depth + 1) for x in v)


# ---- reference documentation ---------------------------------------------------------------------
def _rows(f: Field, path: str, out: list[tuple[str, str, str, str, str]]) -> None:
    if isinstance(f, Section):
        for k, sub in f.keys.items():
            _rows(sub, f"{path}.{k}" if path else k, out)
        return
    if isinstance(f, Variants):
        out.append((path, f"{f.tag}: " + " \\| ".join(f.variants), "", "", f.doc))
        for name, keys in f.variants.items():
            for k, sub in keys.items():
                _rows(sub, f"{path}.{k} ({f.tag} {name})", out)
        for k, sub in f.common.items():
            _rows(sub, f"{path}.{k}", out)
        return
    if isinstance(f, OneOf):
        for o in f.options:
            if isinstance(o, (Section, Variants)):
                _rows(o, path, out)
            else:
                out.append((path, o.allowed(), o.unit or f.unit, _default(f), o.doc or f.doc))
        return
    out.append((path, f.allowed() + (" or null" if f.nullable else ""), f.unit, _default(f), f.doc))


def _default(f: Field) -> str:
    if f.default == REQUIRED:
        return "required"
    return "" if f.default is None else f"`{f.default}`"


def markdown(f: Field) -> str:
    """A Markdown table of every key under `f`: path, what is allowed, unit, default, meaning."""
    rows: list[tuple[str, str, str, str, str]] = []
    _rows(f, "", rows)
    lines = ["| key | allowed | unit | default | meaning |", "| --- | --- | --- | --- | --- |"]
    for path, allowed, unit, default, doc in rows:
        lines.append(f"| `{path}` | {allowed.replace('|', '/')} | {unit} | {default} | {doc} |")
    return "\n".join(lines)
