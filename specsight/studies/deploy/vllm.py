"""vLLM: `vllm serve MODEL --tensor-parallel-size N ... --speculative-config '{JSON}'`.

Names as vLLM's own code spells them (docs/deploy.md has the table):
  flags   vllm/engine/arg_utils.py@99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b, EngineArgs.add_cli_args
          (--tensor-parallel-size, --data-parallel-size, --enable-expert-parallel, --dtype, --quantization,
          --kv-cache-dtype, --max-num-seqs, --max-num-batched-tokens, --gpu-memory-utilization;
          --speculative-config is parsed with json.loads into SpeculativeConfig)
  JSON    vllm/config/speculative.py@002e77c1f0ef9b19cff8b9e21cfbd6feb3d6b443, SpeculativeConfig
          (method, model, num_speculative_tokens, draft_tensor_parallel_size, parallel_drafting,
          num_speculative_tokens_per_batch_size; the SpeculativeMethod literal)
"""
from __future__ import annotations

import json

from .command import DTYPES, EngineCommand, ServingConfig, policy_refusal, unsupported

ENGINE = "vllm"
# specsight drafter method -> SpeculativeConfig.method (parallel: a draft model with parallel_drafting)
METHODS = {"draft_model": "draft_model", "eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp", "medusa": "medusa",
           "ngram": "ngram", "suffix": "suffix", "parallel": "draft_model"}
REFUSED = {"self_spec": "vLLM has no self-speculative (layer-skipping) method: SpeculativeMethod is ngram, medusa, "
                        "mlp_speculator, draft_model, suffix, custom_class, eagle, eagle3, the MTP family, ngram_gpu, "
                        "dflash, dspark"}
POLICIES = ("static", "batch_schedule", "vllm_dynamic")
NO_TARGET_TP_DRAFT = "draft_tensor_parallel_size can only be 1 or the target's tensor_parallel_size"


def schedule_ranges(cfg: ServingConfig) -> list[list[int]] | None:
    """num_speculative_tokens_per_batch_size rows [start, end, K] (inclusive; gaps and the tail
    inherit the previous K), or None for a static K. batch_schedule rows [max_batch, K] become
    [previous max_batch + 1, max_batch, K], and the batches past the last row (K = 0 in
    specsight) an explicit [last + 1, max_num_seqs, 0]."""
    if cfg.policy == "vllm_dynamic":
        return [list(r) for r in cfg.policy_params["ranges"]]
    if cfg.policy != "batch_schedule":
        return None
    out, start = [], 1
    for b, k in cfg.policy_params["rows"]:
        out.append([start, b, k])
        start = b + 1
    if start <= cfg.max_num_seqs:
        out.append([start, cfg.max_num_seqs, 0])
    return out


def speculative_config(cfg: ServingConfig) -> dict:
    """The --speculative-config JSON object."""
    spec: dict = {"method": METHODS[cfg.method], "num_speculative_tokens": cfg.k}
    if cfg.draft_model:
        spec["model"] = cfg.draft_model
    if cfg.method == "parallel":
        spec["parallel_drafting"] = True
    if cfg.draft_tp is not None and cfg.method in ("draft_model", "parallel"):
        spec["draft_tensor_parallel_size"] = cfg.draft_tp
    ranges = schedule_ranges(cfg)
    if ranges is not None:
        spec["num_speculative_tokens_per_batch_size"] = ranges
    return spec


def parallel_flags(cfg: ServingConfig) -> list[str]:
    """The replica's layout: TP over its GPUs; with DP attention, TP 1 and --data-parallel-size tp
    (each GPU its own requests); with expert parallelism, --enable-expert-parallel, whose expert
    layers form one EP group of DP x TP GPUs (vLLM's Expert Parallel Deployment page)."""
    if cfg.dp_attention:
        out = ["--tensor-parallel-size", "1", "--data-parallel-size", str(cfg.tp)]
    else:
        out = ["--tensor-parallel-size", str(cfg.tp)]
    return out + (["--enable-expert-parallel"] if cfg.ep > 1 else [])


def refusal(cfg: ServingConfig) -> str | None:
    if 1 < cfg.ep < cfg.tp:
        return (f"hardware.ep {cfg.ep} of tp {cfg.tp}: vLLM's expert layers form one EP group of all DP x TP GPUs "
                "(--enable-expert-parallel); it has no EP group smaller than the replica")
    if not cfg.speculates:
        return None
    if cfg.method in REFUSED:
        return REFUSED[cfg.method]
    if cfg.tree and cfg.method == "medusa":
        return ("specsight prices Medusa as a token tree (drafter.tree_nodes); vLLM's Medusa proposer drafts one "
                "chain of the heads' top-1 tokens, not the configuration simulated")
    if cfg.tree:
        return ("a token tree: SpeculativeConfig at the cited commit has no tree field (vLLM's EAGLE proposer "
                "drafts a chain); plan a chain (drafter.tree: false)")
    if cfg.draft_tp is not None and cfg.method in ("draft_model", "parallel") and cfg.draft_tp not in (1, cfg.tp):
        return f"drafter.draft_tp {cfg.draft_tp}: {NO_TARGET_TP_DRAFT} ({cfg.tp})"
    return policy_refusal(cfg, ENGINE, POLICIES)


def build(cfg: ServingConfig) -> EngineCommand:
    """`vllm serve` for cfg, or why vLLM cannot run it."""
    why = refusal(cfg)
    if why:
        return unsupported(ENGINE, why)
    argv = ["vllm", "serve", cfg.model] + parallel_flags(cfg) + ["--dtype", DTYPES[cfg.dtype]]
    notes = []
    if cfg.dtype == "fp8":
        argv += ["--quantization", "fp8"]
        notes.append("fp8 weights: --quantization fp8 quantizes a bf16 checkpoint at load (or serve an fp8 checkpoint)")
    if cfg.kv_dtype == "fp8":
        argv += ["--kv-cache-dtype", "fp8"]
    argv += ["--max-num-seqs", str(cfg.max_num_seqs), "--max-num-batched-tokens", str(cfg.max_num_batched_tokens),
             "--gpu-memory-utilization", f"{cfg.gpu_memory_utilization:g}"]
    if cfg.speculates:
        argv += ["--speculative-config", json.dumps(speculative_config(cfg), separators=(",", ":"))]
        if cfg.policy in ("batch_schedule", "vllm_dynamic"):
            notes.append("vLLM picks K from the requests it scheduled in the step (prefill chunks included) and "
                         "keeps lookahead KV reserved for num_speculative_tokens "
                         "(simulator/speculation/engine_policies.py)")
        if cfg.method == "ngram":
            notes.append("n-gram window: vLLM's prompt_lookup_min/max defaults (5); the simulated match "
                         "probability is a scenario input, not an engine setting")
    return EngineCommand(ENGINE, tuple(argv), (), tuple(notes))
