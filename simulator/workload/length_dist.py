"""Token-length distributions for prompts and outputs.

A scenario writes a length as an int (fixed) or a mapping:

    512                                         # fixed
    {dist: fixed, value: 512}
    {dist: uniform, low: 128, high: 1024}       # integers, both ends included
    {dist: lognormal, mean: 1000, sigma: 0.8}   # mean of the length in tokens; sigma of ln(length)
    {dist: lognormal, median: 700, sigma: 0.8}  # or its median (= exp(mu))
    {dist: empirical, path: data/traces/azure_llm_inference_2023_conv.csv, column: num_decode_tokens}
    {dist: empirical, path: ..., column: ..., order: sequential}   # rows in order, cycling

Any of them may add `min` and/or `max` (tokens) to clip. Samples are rounded to integers and are
always >= 1 and <= MAX_LENGTH_TOKENS (10^7, the schema's limit on one request's length).
Empirical `order`: `random` (default) resamples rows with replacement; `sequential`
takes rows 0, 1, 2, ... in order (cycling past the last), so a prompt and an output length read
from two columns of one trace are the same request's (no random draw).
Lognormal: mu = ln(mean) - sigma^2 / 2, so E[length] = mean before rounding/clipping.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..common.csvio import as_counts, read_csv_columns, require_columns, resolve_path
from ..common.errors import SpecsightInputError
from ..common.limits import MAX_NAME, MAX_TOKENS, path_field, tokens_field
from ..common.schema import REQUIRED, Float, OneOf, Str, Variants, check

DISTS = ("fixed", "uniform", "lognormal", "empirical")
ORDERS = ("random", "sequential")
MAX_LENGTH_TOKENS = MAX_TOKENS   # the longest prompt or output (the schema's limit)


@dataclass(frozen=True)
class LengthDist:
    """A distribution of token counts (>= 1). Fields not used by `dist` stay None."""
    dist: str
    value: int | None = None          # fixed
    low: int | None = None            # uniform, inclusive
    high: int | None = None           # uniform, inclusive
    mu: float | None = None           # lognormal: mean of ln(length)
    sigma: float | None = None        # lognormal: std of ln(length)
    path: str | None = None           # empirical: CSV file
    column: str | None = None         # empirical: column name
    order: str = "random"             # empirical: random (with replacement) | sequential (cycling)
    min_len: int = 1                  # clip below (never under 1)
    max_len: int | None = None        # clip above
    _values: np.ndarray | None = field(default=None, repr=False, compare=False)   # empirical samples

    @classmethod
    def from_value(cls, v: Any, field: str) -> LengthDist:
        """An int (fixed length) or a {dist: ...} mapping; errors name `field` and the key."""
        v = check(LENGTH, v, field)            # types, ranges, names: LENGTH below
        if isinstance(v, Mapping):
            return cls._from_mapping(v, field)
        return cls(dist="fixed", value=v)

    @classmethod
    def _from_mapping(cls, raw: Mapping[str, Any], where: str) -> LengthDist:
        dist = raw["dist"]
        lo = raw.get("min", 1)
        hi = raw.get("max")
        if hi is not None and hi < lo:
            raise SpecsightInputError(f"{where}.max", hi, f"must be >= min ({lo})")
        kw: dict[str, Any] = {"dist": dist, "min_len": lo, "max_len": hi}

        def need(key: str) -> Any:
            if key not in raw:
                raise SpecsightInputError(f"{where}.{key}", None, f"required for dist {dist}")
            return raw[key]

        if dist == "fixed":
            kw["value"] = need("value")
        elif dist == "uniform":
            kw["low"], kw["high"] = need("low"), need("high")
            if kw["high"] < kw["low"]:
                raise SpecsightInputError(f"{where}.high", kw["high"], f"must be >= low ({kw['low']})")
        elif dist == "lognormal":
            sigma = float(need("sigma"))
            if ("mean" in raw) == ("median" in raw):
                raise SpecsightInputError(f"{where}.mean", raw.get("mean"),
                                          "give exactly one of mean or median (tokens)")
            if "mean" in raw:
                mu = math.log(raw["mean"]) - sigma ** 2 / 2.0
            else:
                mu = math.log(raw["median"])
            kw.update(mu=mu, sigma=sigma)
        else:
            p = resolve_path(need("path"), f"{where}.path")
            col = need("column")
            cols = read_csv_columns(p, f"{where}.path")
            require_columns(cols, (str(col),), f"{where}.column", p)
            values = as_counts(cols[str(col)], f"{where}.column", str(col), lo=1, hi=MAX_LENGTH_TOKENS)
            if len(values) == 0:
                raise SpecsightInputError(f"{where}.path", str(p), "has no rows")
            order = raw.get("order", "random")
            kw.update(path=str(p), column=str(col), order=order, _values=values)
        return cls(**kw)

    @property
    def mean_estimate(self) -> float:
        """The mean length before clipping (tokens): for planning and reports."""
        if self.dist == "fixed":
            return float(self.value)  # type: ignore[arg-type]
        if self.dist == "uniform":
            return (self.low + self.high) / 2.0  # type: ignore[operator]
        if self.dist == "lognormal":
            return math.exp(self.mu + self.sigma ** 2 / 2.0)  # type: ignore[operator]
        return float(np.mean(self._values))  # type: ignore[arg-type]

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """[n] int64 lengths >= max(1, min), clipped to max."""
        if self.dist == "fixed":
            x = np.full(n, self.value, dtype=np.int64)
        elif self.dist == "uniform":
            x = rng.integers(self.low, self.high, size=n, endpoint=True)  # type: ignore[arg-type]
        elif self.dist == "lognormal":
            x = np.rint(rng.lognormal(self.mu, self.sigma, size=n))  # type: ignore[arg-type]
        else:
            assert self._values is not None
            if self.order == "sequential":
                x = np.resize(self._values, n)                 # rows 0..n-1, cycling
            else:
                x = self._values[rng.integers(0, len(self._values), size=n)]
        hi = self.max_len if self.max_len is not None else MAX_LENGTH_TOKENS
        return np.clip(x, max(1, self.min_len), hi).astype(np.int64)


# ---- a length in the scenario (workload.prompt_len, output_len), composed into WORKLOAD
LENGTH = OneOf(doc="token length: an integer (fixed) or a distribution", nullable=True, options=(
    tokens_field("an integer: a fixed length"),
    Variants(doc="length distribution", tag="dist", variants={
        "fixed": {"value": tokens_field("the length", default=REQUIRED)},
        "uniform": {"low": tokens_field("smallest length", default=REQUIRED),
                    "high": tokens_field("largest length (inclusive)", default=REQUIRED)},
        "lognormal": {"mean": Float(doc="mean length (or median)", unit="tokens", lo=1.0, hi=MAX_TOKENS),
                      "median": Float(doc="median length exp(mu) (or mean)", unit="tokens", lo=1.0, hi=MAX_TOKENS),
                      "sigma": Float(doc="std of ln(length)", lo=0.0, hi=5.0, default=REQUIRED)},
        "empirical": {"path": path_field("CSV file", default=REQUIRED),
                      "column": Str(doc="column name", max_len=MAX_NAME, default=REQUIRED),
                      "order": Str(doc="random: rows with replacement; sequential: in order, cycling",
                                   choices=ORDERS, default="random")},
    }, common={"min": tokens_field("clip below", default=1),
               "max": tokens_field(f"clip above (samples never exceed {MAX_TOKENS:,})", nullable=True)}),
))
