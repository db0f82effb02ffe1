"""TensorRT-LLM (PyTorch backend): `trtllm-serve MODEL --tp_size N --extra_llm_api_options trtllm.yaml`.

Names as TensorRT-LLM's own code spells them (docs/deploy.md has the table):
  command  tensorrt_llm/commands/serve.py@00209af149e7774406881a37283dce303571eb11: `serve` takes MODEL,
           --tp_size (alias of --tensor_parallel_size) and --extra_llm_api_options (alias --config), a YAML
           file loaded with yaml.safe_load that overwrites the LLM API arguments get_llm_args builds
           (tensor_parallel_size, max_batch_size, max_num_tokens, ...)
  YAML     tensorrt_llm/llmapi/llm_args.py: BaseLlmArgs.dtype, DecodingBaseConfig (max_draft_len,
           speculative_model, max_concurrency, draft_len_schedule, acceptance_window,
           acceptance_length_threshold) and the decoding_type of each decoding config (Eagle, MTP,
           NGram, Draft_Target), in a stored copy later than @fcd3f31682808ae56118ae43c1d7864a3a945e6f
           (which has dtype, max_draft_len, speculative_model and the types Eagle, MTP, NGram,
           DraftTarget, Medusa, but not the schedule fields); docs/deploy.md says which copy.
           speculative_model is the field there (validation alias speculative_model_dir) and at
           llm_args.py@0004396720054fd8e205cbf616f21f0b57c6b412, which renames the acceptance fields
           (docs/deploy.md)
"""
from __future__ import annotations

import yaml

from .command import DTYPES, EngineCommand, ServingConfig, policy_refusal, unsupported

ENGINE = "trtllm"
YAML_FILE = "trtllm.yaml"
# specsight drafter method -> speculative_config.decoding_type
DECODING_TYPES = {"eagle3": "Eagle", "mtp": "MTP", "ngram": "NGram", "draft_model": "Draft_Target"}
REFUSED = {
    "eagle": "the PyTorch backend's Eagle decoding runs EAGLE-3 heads (spec_dec_mode EAGLE3 / EAGLE3_ONE_MODEL); an "
             "EAGLE-1 head needs the TensorRT engine backend, which this generator does not write",
    "medusa": "MedusaDecodingConfig.supports_backend refuses the PyTorch backend that trtllm-serve runs by default",
    "suffix": "TensorRT-LLM's suffix automaton (decoding_type SA) is a GPU drafter specsight did not simulate; "
              "simulate drafter.method ngram to deploy NGram",
    "parallel": "specsight did not check a TensorRT-LLM PARD configuration against its code",
    "self_spec": "TensorRT-LLM has no self-speculative (layer-skipping) decoding config",
}
POLICIES = ("static", "batch_schedule", "trtllm_schedule")


def schedule(cfg: ServingConfig) -> tuple[int, dict[int, int] | None, str | None]:
    """(max_draft_len, draft_len_schedule or None, why not). draft_len_schedule {b: K} gives K to
    batches up to the first bound b >= the batch and 0 past the last: specsight's batch_schedule
    rule; its smallest bound's K must equal max_draft_len (TensorRT-LLM's validator)."""
    if cfg.policy == "batch_schedule":
        rows = cfg.policy_params["rows"]
    elif cfg.policy == "trtllm_schedule" and cfg.policy_params.get("schedule"):
        rows = cfg.policy_params["schedule"]
    else:
        return cfg.k, None, None
    first = rows[0][1]
    if any(k > first for _, k in rows):
        return cfg.k, None, (f"draft_len_schedule needs its smallest batch bound's draft length to be the largest "
                             f"(max_draft_len); this schedule's rows are {rows}")
    return first, {int(b): int(k) for b, k in rows}, None


def options(cfg: ServingConfig) -> tuple[dict, list[str]]:
    """The --extra_llm_api_options mapping and notes."""
    opts: dict = {"tensor_parallel_size": cfg.tp, "max_batch_size": cfg.max_num_seqs,
                  "max_num_tokens": cfg.max_num_batched_tokens, "dtype": DTYPES[cfg.dtype]}
    notes = ["gpu_memory_utilization is not passed: kv_cache_config.free_gpu_memory_fraction is a fraction of the "
             "memory left after the weights (default 0.9)"]
    if cfg.dtype == "fp8":
        notes.append("fp8 weights: serve an FP8 (ModelOpt) checkpoint; dtype sets the activations")
    if cfg.kv_dtype == "fp8":
        notes.append("fp8 KV cache: not set here; an FP8 checkpoint's KV quantization applies")
    if not cfg.speculates:
        return opts, notes
    max_draft, sched, _ = schedule(cfg)
    spec: dict = {"decoding_type": DECODING_TYPES[cfg.method], "max_draft_len": max_draft}
    if cfg.draft_model:
        spec["speculative_model"] = cfg.draft_model
    if sched is not None:
        spec["draft_len_schedule"] = sched
    if cfg.policy == "batch_schedule":
        notes.append("draft_len_schedule is keyed on the requests the executor holds (decoding, in prefill, "
                     "queued), the simulated batch_schedule on the decode batch")
    p = cfg.policy_params
    if cfg.policy == "trtllm_schedule":
        for key in ("max_concurrency", "acceptance_window", "acceptance_length_threshold"):
            if p.get(key) is not None:
                spec[key] = p[key]
    opts["speculative_config"] = spec
    if cfg.method in ("ngram", "draft_model"):
        notes.append("the documented NGram and Draft_Target examples set disable_overlap_scheduler: true "
                     "(reference/engines.md section 2); left at the default here")
    return opts, notes


def refusal(cfg: ServingConfig) -> str | None:
    if cfg.ep > 1 or cfg.dp_attention:
        return ("hardware.ep / hardware.dp_attention: specsight writes no TensorRT-LLM expert-parallel or "
                "attention-DP fields (the cited llm_args keys have none); deploy this layout on SGLang or vLLM")
    if not cfg.speculates:
        return None
    if cfg.method in REFUSED:
        return REFUSED[cfg.method]
    if cfg.tree:
        return ("a token tree: the static tree (eagle_choices) is deprecated and use_dynamic_tree is EAGLE-2's "
                "dynamic tree, not the tree specsight priced; plan a chain (drafter.tree: false)")
    if cfg.draft_tp is not None and cfg.draft_tp != cfg.tp:
        return f"drafter.draft_tp {cfg.draft_tp}: the draft runs at the target's TP ({cfg.tp}) in TensorRT-LLM"
    why = policy_refusal(cfg, ENGINE, POLICIES)
    return why or schedule(cfg)[2]


def build(cfg: ServingConfig) -> EngineCommand:
    """`trtllm-serve` with its YAML for cfg, or why TensorRT-LLM cannot run it."""
    why = refusal(cfg)
    if why:
        return unsupported(ENGINE, why)
    opts, notes = options(cfg)
    argv = ("trtllm-serve", cfg.model, "--tp_size", str(cfg.tp), "--extra_llm_api_options", YAML_FILE)
    text = yaml.safe_dump(opts, sort_keys=False)
    return EngineCommand(ENGINE, argv, ((YAML_FILE, text),), tuple(notes))
