"""A disaggregated deployment's serving commands: each engine's prefill and decode servers.

The pools' own commands come from the engine writers (each pool a scenario of its own:
simulator/scenario/disagg_spec.py pool_source; the prefill pool without a drafter), then each gets
the engine's P/D flags, and the drafter where the engine's prefill server must run it too (its
KV travels with the target's: simulator/engines, `drafter_kv_transferred`; docs/simulator.md):
  vLLM     `--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'` on both
           servers, behind vLLM's disaggregated-serving proxy (docs.vllm.ai, features/nixl_connector_usage);
           EAGLE, EAGLE-3 and MTP also on the prefill server, at num_speculative_tokens 1, as vLLM's
           own P/D spec-decode test runs them
           (tests/v1/kv_connector/nixl_integration/spec_decode_acceptance_test.sh@bde36bbe22affc345fe463d917a6fa2150af0d83;
           PR #49230 fails the NIXL handshake when the two servers' drafters differ)
  SGLang   `--disaggregation-mode prefill|decode --disaggregation-transfer-backend mooncake`, behind
           `python -m sglang_router.launch_router --pd-disaggregation --prefill URL ... --decode URL ...`
           (docs.sglang.io, advanced_features/pd_disaggregation)
  TensorRT-LLM  context and generation servers, each `trtllm-serve MODEL --extra_llm_api_options
           YAML` with `cache_transceiver_config: {backend: DEFAULT}`, the context server's with
           `disable_overlap_scheduler: true`, behind `trtllm-serve disaggregated -c disagg_config.yaml`
           (hostname, port, backend, context_servers / generation_servers: num_instances, urls)
           (docs/source/features/disagg-serving.md@453df8fd46583aee57c30ef8b2ac8482f86aaba0,
           examples/disaggregated/README.md@013971245ed5ddb230f1917dd8ccce711a17280f). MTP and EAGLE-3
           (one-model) give the context server the generation servers' speculative_config, as
           TensorRT-LLM's disaggregated tests do (test_eagle3, test_auto_dtype with mtp_nextn:
           tests/integration/defs/accuracy/test_disaggregated_serving.py@00bb903d965ffe9710a457d5848065d7d1b8f60a;
           examples/disaggregated/slurm/benchmark/gen_worker_config.py@58eb0435c6ce6706d6c563629979bd85b1cce332
           sets MTP on both); NGram (test_ngram) and a draft model on the generation servers only.
"""
from __future__ import annotations

import dataclasses
import json

import yaml

from . import trtllm as deploy_trtllm
from . import vllm as deploy_vllm
from .command import EngineCommand, ServingConfig, unsupported

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"}, separators=(",", ":"))
VLLM_PREFILL_DRAFTERS = ("eagle", "eagle3", "mtp")          # their KV crosses with the target's
TRTLLM_CONTEXT_DRAFTERS = ("mtp", "eagle3")                 # one-model: the draft layers in the target's KV
TRTLLM_FILES = ("trtllm_prefill.yaml", "trtllm_decode.yaml", "disagg_config.yaml")
TRTLLM_PORT = 8000            # the disaggregated server's; servers from 8001 (the docs' example layout)
LOOKUPS = ("ngram", "suffix")                             # host-side proposers: no drafter KV
PREFILL_DRAFTER = ("as specsight prices it: the drafter's pass over each prompt chunk, its weights and KV in the "
                   "prefill server's memory")


def _with(e: EngineCommand, pool: str, flags: tuple[str, ...], note: str) -> EngineCommand:
    if not e.supported:
        return dataclasses.replace(e, engine=f"{e.engine}-{pool}")
    return dataclasses.replace(e, engine=f"{e.engine}-{pool}", argv=e.argv + flags, notes=e.notes + (note,))


def with_decode_drafter(pre: ServingConfig, dec: ServingConfig, k: int) -> ServingConfig:
    """The prefill pool's configuration running the decode pool's drafter at a static K."""
    return dataclasses.replace(pre, method=dec.method, draft_model=dec.draft_model, draft_tp=dec.draft_tp, k=k,
                               tree=dec.tree, tree_nodes=dec.tree_nodes, tree_branches=dec.tree_branches,
                               policy="static", policy_params={"k": k})


def _vllm(pcfg: ServingConfig, pe: EngineCommand, dcfg: ServingConfig, de: EngineCommand, p: int, d: int
          ) -> list[EngineCommand]:
    note = (f"run {p} prefill and {d} decode servers, each with this KV connector, behind vLLM's "
            "disaggregated-serving proxy (docs.vllm.ai: features/nixl_connector_usage)")
    extra: tuple[str, ...] = ()
    if de.supported and dcfg.speculates and dcfg.method in VLLM_PREFILL_DRAFTERS:
        pe = deploy_vllm.build(with_decode_drafter(pcfg, dcfg, 1))
        extra = ("the prefill server runs the decode servers' drafter at num_speculative_tokens 1 and NIXL moves its "
                 "KV with the target's (vLLM's tests/v1/kv_connector/nixl_integration/spec_decode_acceptance_test.sh; "
                 f"PR #49230 refuses the handshake when the drafters differ); {PREFILL_DRAFTER}",)
    elif de.supported and dcfg.speculates and dcfg.method == "draft_model":
        extra = ("the draft model's KV is not transferred: the decode servers recompute it over the prompt "
                 "(vllm-project/vllm issue #54926), as specsight prices it",)
    pre = _with(pe, "prefill", ("--kv-transfer-config", NIXL), note)
    if pre.supported:
        pre = dataclasses.replace(pre, notes=pre.notes + extra)
    return [pre, _with(de, "decode", ("--kv-transfer-config", NIXL), note)]


def _sglang(pe: EngineCommand, dcfg: ServingConfig, de: EngineCommand, p: int, d: int) -> list[EngineCommand]:
    note = (f"run {p} prefill and {d} decode servers behind `python -m sglang_router.launch_router "
            "--pd-disaggregation --prefill URL ... --decode URL ...` (docs.sglang.io: "
            "advanced_features/pd_disaggregation)")
    back = ("--disaggregation-transfer-backend", "mooncake")
    pre = _with(pe, "prefill", ("--disaggregation-mode", "prefill") + back, note)
    if de.supported and dcfg.speculates and dcfg.method not in LOOKUPS and pre.supported:
        pre = dataclasses.replace(pre, notes=pre.notes + (
            "the decode servers speculate: SGLang's PD prefill server runs the EAGLE drafter too, given the "
            "decode servers' --speculative-* flags, and its KV travels with the target's "
            f"(sgl-project/sglang PR #33584); {PREFILL_DRAFTER}",))
    return [pre, _with(de, "decode", ("--disaggregation-mode", "decode") + back, note)]


def disagg_config(p: int, d: int) -> dict:
    """`trtllm-serve disaggregated -c`'s YAML: the servers' URLs in the docs' layout (localhost,
    the disaggregated server on 8000, the context servers from 8001, then the generation servers)."""
    urls = [f"localhost:{TRTLLM_PORT + 1 + i}" for i in range(p + d)]
    return {"hostname": "localhost", "port": TRTLLM_PORT, "backend": "pytorch",
            "context_servers": {"num_instances": p, "urls": urls[:p]},
            "generation_servers": {"num_instances": d, "urls": urls[p:]}}


def _trtllm(pcfg: ServingConfig, dcfg: ServingConfig, p: int, d: int) -> list[EngineCommand]:
    names = ("trtllm-prefill", "trtllm-decode", "trtllm-disaggregated")
    why = deploy_trtllm.refusal(dcfg) or deploy_trtllm.refusal(pcfg)
    if why:
        return [unsupported(n, why) for n in names]
    transceiver = {"backend": "DEFAULT"}
    ctx, ctx_notes = deploy_trtllm.options(pcfg)
    gen, gen_notes = deploy_trtllm.options(dcfg)
    ctx.update({"disable_overlap_scheduler": True, "cache_transceiver_config": transceiver})
    gen["cache_transceiver_config"] = dict(transceiver)
    if "speculative_config" in gen and dcfg.method in TRTLLM_CONTEXT_DRAFTERS:
        ctx["speculative_config"] = dict(gen["speculative_config"])
        ctx_notes.append("the context server runs the generation servers' speculative_config: its draft layers' KV "
                         "travels with the target's (TensorRT-LLM's tests/integration/defs/accuracy/"
                         f"test_disaggregated_serving.py gives both servers the same); {PREFILL_DRAFTER}")
    elif dcfg.method == "draft_model" and "speculative_config" in gen:
        gen_notes.append("the draft model's KV stays on the context server: each generation server's draft engine "
                         "prefills the prompt the first time it sees a request (ModelDrafter), as specsight prices it")
    urls = disagg_config(p, d)
    layout = (f"run {p} context and {d} generation servers, each on the host:port disagg_config.yaml lists "
              "(trtllm-serve --host H --port P), then `trtllm-serve disaggregated -c disagg_config.yaml` "
              "(docs/source/features/disagg-serving.md)")
    buffer = ("cache_transceiver_config.max_tokens_in_buffer: set it to at least the longest prompt for the best "
              "transfer (the docs' advice; unset here)")
    out = []
    for name, cfg, opts, notes, file in ((names[0], pcfg, ctx, ctx_notes, TRTLLM_FILES[0]),
                                         (names[1], dcfg, gen, gen_notes, TRTLLM_FILES[1])):
        argv = ("trtllm-serve", cfg.model, "--tp_size", str(cfg.tp), "--extra_llm_api_options", file)
        out.append(EngineCommand(name, argv, ((file, yaml.safe_dump(opts, sort_keys=False)),),
                                 tuple(notes) + (layout, buffer)))
    out.append(EngineCommand(names[2], ("trtllm-serve", "disaggregated", "-c", TRTLLM_FILES[2]),
                             ((TRTLLM_FILES[2], yaml.safe_dump(urls, sort_keys=False)),),
                             ("the orchestrator: clients send OpenAI requests to hostname:port; it routes each to a "
                              "context server, then a generation server (docs/source/features/disagg-serving.md)",)))
    return out


def pd_engines(pcfg: ServingConfig, prefill: tuple[EngineCommand, ...], dcfg: ServingConfig,
               decode: tuple[EngineCommand, ...], instances: tuple[int, int]) -> tuple[EngineCommand, ...]:
    """Each engine's prefill and decode commands (`vllm-prefill`, `vllm-decode`, ...; TensorRT-LLM's
    with `trtllm-disaggregated`), in engine order; pcfg, dcfg: the pools' configurations."""
    p, d = instances
    by = {e.engine: e for e in prefill}
    out: list[EngineCommand] = []
    for e in decode:
        if e.engine == "vllm":
            out += _vllm(pcfg, by[e.engine], dcfg, e, p, d)
        elif e.engine == "sglang":
            out += _sglang(by[e.engine], dcfg, e, p, d)
        else:
            out += _trtllm(pcfg, dcfg, p, d)
    return tuple(out)
