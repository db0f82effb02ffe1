"""A scenario's `acceptance:` value: its schema section (ACCEPTANCE) and the model it builds
(`AcceptanceSpec.from_mapping`): an i.i.d. rate, per-position rates, a Beta population, a trace,
the exact sampling kernel, or a published preset (docs/simulator_models.md)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..common.errors import SpecsightInputError, closest_names, require_int, require_range
from ..common.keys import reject_unknown
from ..common.limits import MAX_K, MAX_LIST, MAX_SEED, MAX_VOCAB, POS, path_field, rate_field
from ..common.schema import REQUIRED, Float, Int, ListOf, OneOf, Str, Variants
from .acceptance import (
    MODELS,
    AcceptanceModel,
    BetaAcceptance,
    IIDAcceptance,
    KernelAcceptance,
    PerPositionAcceptance,
)
from .acceptance_presets import PRESETS, preset_model
from .acceptance_trace import TraceAcceptance

ACCEPTANCE = OneOf(doc="acceptance model (docs/simulator_models.md)", nullable=True, options=(
    rate_field("a number: iid acceptance rate alpha"),
    Str(doc="a string: a preset name", choices=tuple(PRESETS)),
    Variants(doc="acceptance model", tag="model", variants={
        "iid": {"alpha": rate_field("per-position acceptance rate", default=REQUIRED)},
        "per_position": {"alphas": ListOf(doc="conditional rates alpha_1..alpha_n (the last repeats)",
                                          item=rate_field("rate"), max_len=MAX_LIST, default=REQUIRED)},
        "beta": {"alpha": Float(doc="mean per-request rate", lo=0.0, hi=1.0, lo_open=True, hi_open=True,
                                default=REQUIRED),
                 "concentration": Float(doc="Beta concentration (higher: requests more alike)", hi=1e9, **POS,
                                        default=REQUIRED)},
        "trace": {"path": path_field("CSV of accept lengths or vLLM counters, a vLLM /metrics scrape or a vllm "
                                      "bench serve result JSON", default=REQUIRED),
                  "k": Int(doc="drafts proposed per row when the CSV has no k column", lo=1, hi=MAX_K,
                           nullable=True),
                  "counters": Str(doc="vLLM counters: delta rows summed, cumulative: last row",
                                  choices=("delta", "cumulative"), default="delta")},
        "kernel": {"vocab_size": Int(doc="synthetic vocabulary", lo=2, hi=MAX_VOCAB, default=REQUIRED),
                   "overlap": rate_field("target/draft distribution overlap (or alpha)"),
                   "alpha": rate_field("target acceptance rate (or overlap)"),
                   "seed": Int(doc="seed of the synthetic distributions", lo=0, hi=MAX_SEED, default=0),
                   "sharpness": Float(doc="distribution sharpness", lo=0.0, hi=1e6, nullable=True)},
        "preset": {"name": Str(doc="published figures (simulator/speculation/acceptance_presets.py)",
                               choices=tuple(PRESETS), default=REQUIRED)},
    }),
))


class AcceptanceSpec:
    """Builds an AcceptanceModel from a scenario's `acceptance:` value."""

    @staticmethod
    def from_mapping(raw: Any, where: str = "acceptance", k_max: int = 16) -> AcceptanceModel:
        """raw: a number (iid alpha), a preset name, or a mapping with `model`.
        k_max bounds the K the kernel model will be asked for (the drafter's K)."""
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return IIDAcceptance(require_range(where, raw, 0.0, 1.0))
        if isinstance(raw, str):
            raw = {"model": "preset", "name": raw}
        if not isinstance(raw, Mapping):
            raise SpecsightInputError(where, raw, "a number (iid alpha), a preset name, or a mapping {model: "
                                      + "|".join(MODELS) + ", ...}")
        model = raw.get("model")
        if model not in MODELS:
            raise SpecsightInputError(f"{where}.model", model, closest_names(str(model), MODELS))
        keys = {"iid": ("alpha",), "per_position": ("alphas",), "beta": ("alpha", "concentration"),
                "trace": ("path", "k", "counters"),
                "kernel": ("vocab_size", "overlap", "alpha", "seed", "sharpness"), "preset": ("name",)}[model]
        reject_unknown(raw, ("model",) + keys, where)

        def need(key: str) -> Any:
            if key not in raw:
                raise SpecsightInputError(f"{where}.{key}", None, f"required for model {model}")
            return raw[key]

        if model == "iid":
            return IIDAcceptance(require_range(f"{where}.alpha", need("alpha"), 0.0, 1.0))
        if model == "per_position":
            vals = need("alphas")
            if isinstance(vals, (str, bytes, Mapping)) or not hasattr(vals, "__len__") or len(vals) == 0:
                raise SpecsightInputError(f"{where}.alphas", vals, "a non-empty list of conditional rates in [0, 1]")
            return PerPositionAcceptance([require_range(f"{where}.alphas[{i}]", a, 0.0, 1.0)
                                          for i, a in enumerate(vals)])
        if model == "beta":
            alpha = require_range(f"{where}.alpha", need("alpha"), 0.0, 1.0, lo_open=True, hi_open=True)
            conc = require_range(f"{where}.concentration", need("concentration"), 0.0, lo_open=True)
            return BetaAcceptance(alpha, conc)
        if model == "trace":
            k = None if raw.get("k") is None else require_int(f"{where}.k", raw["k"], lo=1)
            counters = raw.get("counters", "delta")
            if counters not in ("delta", "cumulative"):
                raise SpecsightInputError(f"{where}.counters", counters,
                                          "delta (rows are summed) or cumulative (last row used)")
            return TraceAcceptance.from_csv(need("path"), f"{where}.path", k=k, counters=counters)
        if model == "kernel":
            vocab = require_int(f"{where}.vocab_size", need("vocab_size"), lo=2)
            if ("overlap" in raw) == ("alpha" in raw):
                raise SpecsightInputError(f"{where}.overlap", raw.get("overlap"),
                                          "give exactly one of overlap or alpha")
            overlap = None if "overlap" not in raw else require_range(f"{where}.overlap", raw["overlap"], 0.0, 1.0)
            alpha = None if "alpha" not in raw else require_range(f"{where}.alpha", raw["alpha"], 0.0, 1.0)
            seed = require_int(f"{where}.seed", raw.get("seed", 0), lo=0)
            sharp = None if raw.get("sharpness") is None else require_range(f"{where}.sharpness", raw["sharpness"], 0.0)
            return KernelAcceptance(vocab, require_int("k_max", k_max, lo=0), overlap=overlap, alpha=alpha, seed=seed,
                                    sharpness=sharp)
        return preset_model(need("name"), f"{where}.name")
