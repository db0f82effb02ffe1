"""A real engine's deployment (simulator/engines/): the profile's GPU side with the engine's host
model, linear layers with tile and wave quantization, the engine's round."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..common.errors import SpecsightInputError
from ..costs.cost_model import CostModel
from ..engines import EngineLimits, engine_for
from ..engines.device import device_class
from ..engines.host import load_host_overrides
from ..engines.measured_host import load_measured_host
from ..engines.step_cost import EngineStepCost, engine_profile
from ..engines.tiles import TiledCostModel
from ..hardware.hardware import load_profile
from ..models.catalog import load_model
from ..speculation.drafters import Drafter
from .deployment import Deployment, drafter_loaded, replica_kv_budget
from .engine_defaults import with_engine_defaults
from .scenario import Scenario, as_scenario


def real_engine_deployment(scenario: Scenario, mean_tokens: float | None = None, measured: Any = None,
                           hold_drafter: bool = False) -> Deployment:
    """resolve_deployment for a real engine (simulator/engines/): the profile's GPU side with the
    engine's host model, linear layers with tile and wave quantization, the engine's round. On a
    device class with measured host time (a CPU) `measured` (a MeasuredHost) stands in for the
    engine version's file: the fit of those constants prices the passes without them.
    hold_drafter: as resolve_deployment's."""

    hw, eng = scenario.hardware, scenario.engine
    engine = engine_for(eng.kind, eng.version)
    if eng.profile is not None:
        engine.host_overrides = load_host_overrides(eng.profile, engine.name, engine.version)
    if hw.is_fixed:
        raise SpecsightInputError("engine.kind", eng.kind, "a real engine prices passes on a GPU profile: "
                                                           "hardware.kind roofline, or engine.kind ideal")
    tp = int(hw.tp)
    if hw.ep > 1 or hw.dp_attention:
        raise SpecsightInputError("hardware.ep", hw.ep, "1 (and dp_attention false) with a real engine: expert "
                                                        "parallelism is priced by engine.kind ideal")
    loaded = hold_drafter or drafter_loaded(scenario)    # a plain deployment runs no drafter: nothing to refuse
    if loaded:
        engine.check(scenario.drafter, tp)
    base = load_profile(hw.profile or hw.gpu)   # type: ignore[arg-type]
    device = device_class(base)
    host_name = engine.measured_host_name(device)
    if host_name is None:
        measured = None
    elif measured is None:
        measured = load_measured_host(host_name)
    if measured is not None and loaded and scenario.drafter is not None:
        measured.proposer(scenario.drafter.method)        # refuse a method whose proposer was not measured
    profile = engine_profile(base, device)
    model = load_model(scenario.model)          # type: ignore[arg-type]
    costs = TiledCostModel if device.tiles else CostModel
    cm = costs(model, profile, tp=tp, dtype=hw.dtype, kv_dtype=hw.kv_dtype)
    drafter = Drafter(scenario.drafter, model, cm) if scenario.drafter is not None else None
    if drafter is not None and drafter.draft_cost is not None:
        dc = drafter.draft_cost
        if dc.tp != tp and loaded:
            raise SpecsightInputError("drafter.model", scenario.drafter.model,   # type: ignore[union-attr]
                                      f"{engine.label} runs the drafter at the target's TP ({tp}); its heads "
                                      f"({dc.model.num_heads}) do not divide by it")
        drafter.draft_cost = costs(dc.model, dc.hw, tp=dc.tp, dtype=dc.dtype)
    kv = replica_kv_budget(scenario, cm, drafter, mean_tokens, hold_drafter)
    limits = EngineLimits(int(eng.max_num_seqs), int(eng.max_num_batched_tokens), tp)
    cost = EngineStepCost(engine, limits, cm, drafter, scenario.k_max, device, measured)
    return Deployment(cost, drafter, kv, kv.num_blocks, f"{base.describe()}; engine {engine.label}",
                      model.max_position_embeddings)


def engine_deployment(scenario: Scenario | str | Path | Mapping[str, Any], measured: Any) -> Deployment:
    """A real engine's deployment with `measured` host constants (a MeasuredHost) in place of its
    version's file (calibrate/engine_host_fit.py prices the passes with zero host time)."""
    sc = with_engine_defaults(as_scenario(scenario))
    return real_engine_deployment(sc, None, measured)
