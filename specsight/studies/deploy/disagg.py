"""A disaggregated deployment's serving commands: each engine's prefill and decode servers.

The pools' own commands come from the engine writers (each pool a scenario of its own:
simulator/scenario/disagg_spec.py pool_source; the prefill pool without a drafter), then each gets
the engine's P/D flags:
  vLLM     `--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'` on both
           servers, behind vLLM's disaggregated-serving proxy (docs.vllm.ai, features/nixl_connector_usage)
  SGLang   `--disaggregation-mode prefill|decode --disaggregation-transfer-backend mooncake`, behind
           `python -m sglang_router.launch_router --pd-disaggregation --prefill URL ... --decode URL ...`
           (docs.sglang.io, advanced_features/pd_disaggregation)
  TensorRT-LLM  not written: its disaggregated serving (`trtllm-serve disaggregated` with a YAML of
           context and generation servers) is not mapped here.
"""
from __future__ import annotations

import dataclasses
import json

from .command import EngineCommand, unsupported

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"}, separators=(",", ":"))


def _with(e: EngineCommand, pool: str, flags: tuple[str, ...], note: str) -> EngineCommand:
    if not e.supported:
        return dataclasses.replace(e, engine=f"{e.engine}-{pool}")
    return dataclasses.replace(e, engine=f"{e.engine}-{pool}", argv=e.argv + flags, notes=e.notes + (note,))


def pd_engines(prefill: tuple[EngineCommand, ...], decode: tuple[EngineCommand, ...], instances: tuple[int, int]
               ) -> tuple[EngineCommand, ...]:
    """Each engine's prefill and decode commands (`vllm-prefill`, `vllm-decode`, ...), in engine order."""
    p, d = instances
    by = {e.engine: e for e in prefill}
    out: list[EngineCommand] = []
    for e in decode:
        pe = by[e.engine]
        if e.engine == "vllm":
            note = (f"run {p} prefill and {d} decode servers, each with this KV connector, behind vLLM's "
                    "disaggregated-serving proxy (docs.vllm.ai: features/nixl_connector_usage)")
            out += [_with(pe, "prefill", ("--kv-transfer-config", NIXL), note),
                    _with(e, "decode", ("--kv-transfer-config", NIXL), note)]
        elif e.engine == "sglang":
            note = (f"run {p} prefill and {d} decode servers behind `python -m sglang_router.launch_router "
                    "--pd-disaggregation --prefill URL ... --decode URL ...` (docs.sglang.io: "
                    "advanced_features/pd_disaggregation)")
            back = ("--disaggregation-transfer-backend", "mooncake")
            pre = _with(pe, "prefill", ("--disaggregation-mode", "prefill") + back, note)
            if e.supported and any(a.startswith("--speculative-") for a in e.argv) and pre.supported:
                pre = dataclasses.replace(pre, notes=pre.notes + (
                    "the decode servers speculate: SGLang's PD prefill server runs the EAGLE drafter too, given the "
                    "decode servers' --speculative-* flags, and its KV travels with the target's "
                    "(sgl-project/sglang PR #33584); specsight prices no drafter prefill on the prefill pool",))
            out += [pre, _with(e, "decode", ("--disaggregation-mode", "decode") + back, note)]
        else:
            out.append(unsupported(e.engine, "its disaggregated serving (trtllm-serve disaggregated with a YAML of "
                                             "context and generation servers) is not written by specsight"))
    return tuple(out)
