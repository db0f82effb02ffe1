"""specsight's simulator: catalogs, the roofline cost model, speculation math and the SimPy serving model.

Entry points (imported on first use, so `import simulator.common.errors` stays light):
`simulate` (run/) and its `SimResult` (run/result.py), `load_scenario` and `Scenario` (scenario/scenario.py).

The sub-packages, from the top down; each imports only those below it (docs/layout.md):

    run/          simulate(): one scenario -> SimResult (requests, iterations, summary)
    scenario/     the scenario file: read, checked against the schema, its work limits, its deployment
    serving/      the SimPy serving loop: engine, replica, scheduler, decode batch, metrics
    engines/      a round priced as vLLM, SGLang or TensorRT-LLM runs it
    speculation/  drafters, acceptance, K policies, closed forms, analytic break-even
    workload/     arrivals, request lengths, presets, a rate over a day
    costs/        the physics: one forward pass's time, KV-cache memory
    models/       the model's spec from its config.json, layer kinds, weight formats, MoE layout
    hardware/     GPU profiles
    common/       input errors, schema types, input files, paths

Nothing in this package imports torch, calibrate or specsight; calibration lives in `calibrate/`.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "simulate": "simulator.run",
    "SimResult": "simulator.run.result",
    "load_scenario": "simulator.scenario.scenario",
    "Scenario": "simulator.scenario.scenario",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:  # noqa: ANN401
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'simulator' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
