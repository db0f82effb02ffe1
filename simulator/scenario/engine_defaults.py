"""A scenario with its real engine's defaults for the `engine:` keys it leaves unset
(engines.engine_defaults; ideal: unchanged)."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ..engines import engine_defaults, engine_for
from .deployment import memory_k_max
from .scenario import Scenario


def with_engine_defaults(sc: Scenario) -> Scenario:
    """The scenario with its engine's defaults for the `engine:` keys it leaves unset (ideal:
    unchanged)."""
    if sc.engine.kind == "ideal":
        return sc
    engine = engine_for(sc.engine.kind, sc.engine.version)
    src = sc.source.get("engine") if isinstance(sc.source, Mapping) else None
    d = engine_defaults(engine, src, memory_k_max(sc) > 0, int(sc.hardware.tp))
    if "max_num_seqs" in d:
        d["max_num_seqs"] = min(d["max_num_seqs"], int(sc.engine.max_num_batched_tokens))
    return dataclasses.replace(sc, engine=dataclasses.replace(sc.engine, **d)) if d else sc
