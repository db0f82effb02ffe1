"""SGLang: `python -m sglang.launch_server --model-path MODEL --tp-size N ... --speculative-algorithm ...`.

Names as SGLang's own code spells them (docs/deploy.md has the table):
  flags   python/sglang/srt/server_args.py@001067fffe33427bee0ed2f007fb7551a1d76b44, ServerArgs: the
          primary flag is the field name with dashes (model_path -> --model-path, tp_size -> --tp-size);
          speculative_algorithm's builtins EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, DFLASH, DSPARK;
          ep_size, dp_size, enable_dp_attention, moe_dense_tp_size, enable_dp_lm_head (same file)
  adaptive python/sglang/srt/speculative/adaptive_spec_params.py@015c872628e328b530880bcf95ae91222604b225
          (_load_adaptive_config: a JSON object whose integer-string keys are batch sizes holding
          candidate_steps, up_hysteresis, down_hysteresis, ceiling_coeff; ema_alpha, update_interval,
          warmup_batches read from the entry or the top level; adaptive_unsupported_reason: EAGLE/EAGLE3, topk 1)
"""
from __future__ import annotations

import json

from .command import DTYPES, EngineCommand, ServingConfig, policy_refusal, unsupported

ENGINE = "sglang"
ADAPTIVE_FILE = "sglang_adaptive.json"
# specsight drafter method -> speculative_algorithm (NEXTN: SGLang rewrites it to EAGLE over the MTP layers)
ALGORITHMS = {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "draft_model": "STANDALONE", "ngram": "NGRAM"}
REFUSED = {
    "medusa": "SGLang has no Medusa algorithm (builtins EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, DFLASH, DSPARK)",
    "suffix": "SGLang has no suffix-decoding algorithm (NGRAM is its host-side lookup; simulate drafter.method "
              "ngram to deploy it)",
    "parallel": "SGLang has no PARD-style parallel draft model (DFLASH needs a DFlash checkpoint; specsight did "
                "not simulate one)",
    "self_spec": "SGLang has no self-speculative (layer-skipping) algorithm",
}
POLICIES = ("static", "sglang_adaptive")


def spec_shape(cfg: ServingConfig) -> tuple[int, int, int]:
    """(speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens): a chain of K
    is (K, 1, K + 1), the verify window being the last emitted token and K drafts (SGLang forces
    N = S + 1 at topk 1); a tree of depth K is (K, branches, nodes + 1)."""
    if cfg.tree:
        nodes = cfg.tree_nodes or 59          # drafters.Drafter.verify_tokens_per_seq's default
        return cfg.k, cfg.tree_branches, nodes + 1
    return cfg.k, 1, cfg.k + 1


def adaptive_config(cfg: ServingConfig) -> dict:
    """The --speculative-adaptive-config JSON: one integer-string key per batch-size slot."""
    p = cfg.policy_params
    out: dict = {"ema_alpha": p["ema_alpha"], "warmup_batches": p["warmup_batches"],
                 "update_interval": p["update_interval"]}
    for e in p["entries"]:
        out[str(e["batch_size"])] = {k: e[k] for k in ("candidate_steps", "up_hysteresis", "down_hysteresis",
                                                       "ceiling_coeff")}
    return out


def parallel_flags(cfg: ServingConfig) -> list[str]:
    """Expert parallelism and DP attention as specsight prices them (simulator/models/moe_parallel.py): the
    routed experts over --ep-size groups; DP attention with --dp-size tp, and the dense layers and LM
    head replicated per attention rank (--moe-dense-tp-size 1, --enable-dp-lm-head)."""
    out = ["--ep-size", str(cfg.ep)] if cfg.ep > 1 else []
    if cfg.dp_attention:
        out += ["--dp-size", str(cfg.tp), "--enable-dp-attention", "--moe-dense-tp-size", "1", "--enable-dp-lm-head"]
    return out


def refusal(cfg: ServingConfig) -> str | None:
    if not cfg.speculates:
        return None
    if cfg.method in REFUSED:
        return REFUSED[cfg.method]
    if cfg.draft_tp is not None and cfg.draft_tp != cfg.tp:
        return (f"drafter.draft_tp {cfg.draft_tp}: SGLang's draft worker runs at the target's TP ({cfg.tp}) "
                "(reference/engines.md section 1)")
    return policy_refusal(cfg, ENGINE, POLICIES)


def build(cfg: ServingConfig) -> EngineCommand:
    """`python -m sglang.launch_server` for cfg, or why SGLang cannot run it."""
    why = refusal(cfg)
    if why:
        return unsupported(ENGINE, why)
    argv = ["python", "-m", "sglang.launch_server", "--model-path", cfg.model, "--tp-size", str(cfg.tp),
            "--dtype", DTYPES[cfg.dtype]] + parallel_flags(cfg)
    notes, files = [], []
    if cfg.dtype == "fp8":
        argv += ["--quantization", "fp8"]
    if cfg.kv_dtype == "fp8":
        argv += ["--kv-cache-dtype", "fp8_e4m3"]
    argv += ["--max-running-requests", str(cfg.max_num_seqs), "--chunked-prefill-size",
             str(cfg.max_num_batched_tokens), "--mem-fraction-static", f"{cfg.gpu_memory_utilization:g}"]
    notes.append("--mem-fraction-static (weights and KV pool) takes engine.gpu_memory_utilization and "
                 "--chunked-prefill-size engine.max_num_batched_tokens: the nearest SGLang knobs, not the same ones")
    if cfg.speculates:
        steps, topk, tokens = spec_shape(cfg)
        argv += ["--speculative-algorithm", ALGORITHMS[cfg.method]]
        if cfg.draft_model:
            argv += ["--speculative-draft-model-path", cfg.draft_model]
        if cfg.method == "ngram":
            argv += ["--speculative-num-draft-tokens", str(tokens), "--speculative-ngram-max-bfs-breadth", "1"]
            notes.append("NGRAM as a chain (BFS breadth 1) of K + 1 verify positions, as simulated")
        else:
            argv += ["--speculative-num-steps", str(steps), "--speculative-eagle-topk", str(topk),
                     "--speculative-num-draft-tokens", str(tokens)]
        if cfg.policy == "sglang_adaptive":
            argv += ["--speculative-adaptive", "--speculative-adaptive-config", ADAPTIVE_FILE]
            files.append((ADAPTIVE_FILE, json.dumps(adaptive_config(cfg), indent=2) + "\n"))
    return EngineCommand(ENGINE, tuple(argv), tuple(files), tuple(notes))
