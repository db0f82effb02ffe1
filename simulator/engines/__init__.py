"""Real serving engines as a scenario dimension (`engine.kind: vllm | sglang | trtllm`, with
`engine.version`); `ideal` is the cost model's passes alone (simulator/serving/step_cost.py).

Each engine file declares, per drafter method it runs, the passes of one round and their CUDA
graphs, where the host syncs, its scheduler's host time with overlap on or off, the verify
attention's kernel class and its `engine:` defaults (round.py's EngineDef); step_cost.py prices an
iteration from them, replica.py adds the host time. docs/engines.md tabulates every round.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..common.errors import SpecsightInputError
from .round import EngineDef, EngineLimits, Pass
from .sglang import SGLang
from .trtllm import TRTLLM
from .vllm import VLLM

ENGINES: dict[str, type[EngineDef]] = {"vllm": VLLM, "sglang": SGLang, "trtllm": TRTLLM}

__all__ = ["ENGINES", "EngineDef", "EngineLimits", "Pass", "engine_for", "engine_defaults", "engine_label"]
IDEAL = "ideal"         # engine.kind ideal: the cost model's passes alone, no serving engine's rounds


def engine_for(kind: str, version: str | None) -> EngineDef:
    """The engine `kind` at `version` (None: its default version)."""
    if kind not in ENGINES:
        raise SpecsightInputError("engine.kind", kind, f"one of {', '.join(ENGINES)} (or ideal)")
    return ENGINES[kind](version)


def engine_label(kind: str | None, version: str | None = None) -> str:
    """The engine a result was priced under, in words: `ideal`, or the engine and its version
    (`vllm v1`, `sglang v0.5`); what every header, column and title names."""
    kind = IDEAL if kind is None else str(kind)
    return IDEAL if kind == IDEAL else engine_for(kind, version).label


def engine_defaults(engine: EngineDef, source_engine: Mapping[str, Any] | None, speculating: bool,
                    tp: int) -> dict:
    """The engine's defaults for the `engine:` keys the scenario did not set itself."""
    given = set(source_engine or ())
    return {k: v for k, v in engine.defaults(speculating, tp).items() if k not in given}
