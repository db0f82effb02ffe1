"""The scenario schema as one table: every key, its type, range, allowed names, unit, default
and meaning (field types: simulator/common/schema.py). `load_scenario` checks a scenario against
SCENARIO before anything is built; model config.json files are checked against MODEL_CONFIG.

Limits: each integer and number has a maximum a real deployment would not exceed, high enough
for a fleet study (10^9 requests, 10^9 users); they are the constants below, and docs/schema.md
(generated from this table: `python -m simulator.scenario.schema_table > docs/schema.md`; a test keeps it
current) lists them. A new key (an engine kind, a workload preset, a per-layer attention type)
is one more entry here with its type and limit.
"""
from __future__ import annotations

from pathlib import Path

from ..common.csvio import MAX_CELL
from ..common.input_files import MAX_BYTES, MAX_INT_DIGITS, MAX_NESTING, MAX_NODES
from ..common.schema import REQUIRED, Bool, Float, Int, ListOf, OneOf, Pair, Section, Str, Variants, markdown
from ..hardware.hardware import (
    DTYPE_BYTES,
    MAX_PRICE_USD_PER_GPU_HOUR,
    MAX_SHARPNESS,
    MIN_LINK_GB_S,
    MIN_MEMORY_TB_S,
    MIN_TFLOPS,
)
from ..speculation.acceptance_presets import PRESETS
from ..speculation.drafters import METHODS
from ..speculation.policies import KINDS as POLICY_KINDS
from ..speculation.spec_math import MAX_K
from ..workload.length_dist import MAX_LENGTH_TOKENS, ORDERS
from ..workload.rate_schedule import DEFAULT_PERIOD_S
from ..workload.rate_schedule import SHAPES as SCHEDULE_SHAPES
from ..workload.workload_presets import PRESETS as WORKLOAD_PRESETS

HARDWARE_KINDS = ("roofline", "fixed")
ROUTERS = ("round_robin", "least_outstanding")
ENGINE_KINDS = ("ideal", "vllm", "sglang", "trtllm")   # how a round is priced (docs/engines.md)

# ---- limits (the schema's maxima; docs/schema.md lists them) -----------------------------------
MAX_REQUESTS = 10 ** 9  # requests in one scenario (a fleet-day); work limits: simulator/scenario/work_limits.py
MAX_USERS = 10 ** 9               # closed-loop concurrency (users are created lazily)
MAX_TOKENS = MAX_LENGTH_TOKENS     # one request's prompt or output length (the longest context windows)
MAX_SEQS = 65_536                 # engine.max_num_seqs (each replica holds arrays of this size)
MAX_BATCHED_TOKENS = 10 ** 8      # tokens per iteration
MAX_BLOCK_SIZE = 65_536           # tokens per KV block
MAX_BLOCKS = 10 ** 10             # KV blocks per replica
MAX_TP = 1024                     # GPUs per replica
MAX_LAYERS = 1024                 # layers of a model (the deepest real ones have about 130)
MAX_REPLICAS = 100_000           # replicas behind one router
MAX_QPS = 10 ** 9                 # requests per second
MIN_QPS = 1e-6                    # one request in 11.6 days: arrival times stay far from float64's limits
MAX_SECONDS = 10 ** 7             # think time, step time (115 days)
MAX_MS = 10 ** 9                  # SLO thresholds
MAX_SEED = 2 ** 63 - 1            # the seed (numpy takes any size; int64 keeps it portable)
MAX_NAME = 200                    # characters of a name (scenario, column)
MAX_PATH = 1024                   # characters of a catalog name or a file path
MAX_TEXT = 10_000                 # characters of a description
MAX_LIST = 1024                   # per-position rates, schedule rows
MAX_VOCAB = 2 ** 18               # kernel acceptance vocabulary (its work grows with it: the largest real ones)
MAX_GB = 10 ** 5                  # memory figures (GB per GPU)
MAX_PRICE = MAX_PRICE_USD_PER_GPU_HOUR   # USD per GPU-hour (no GPU rents for more)

POS = dict(lo=0.0, lo_open=True)


def _rate(doc: str, **kw) -> Float:
    return Float(doc=doc, lo=0.0, hi=1.0, **kw)


def _tokens(doc: str, lo: int = 1, **kw) -> Int:
    return Int(doc=doc, unit="tokens", lo=lo, hi=MAX_TOKENS, **kw)


def _path(doc: str, **kw) -> Str:
    return Str(doc=doc, max_len=MAX_PATH, **kw)


HARDWARE = Section(doc="where the model runs", keys={
    "kind": Str(doc="roofline: the cost model on a GPU profile; fixed: constant step times",
                choices=HARDWARE_KINDS, default="roofline"),
    "gpu": _path("hardware_profiles/<gpu>.yaml name, or a YAML path (required for roofline)", nullable=True),
    "profile": _path("a calibrated profile (name or path); replaces gpu", nullable=True),
    "tp": Int(doc="GPUs of each replica: its tensor-parallel degree (see ep, dp_attention)", unit="GPUs", lo=1,
              hi=MAX_TP, default=1),
    "ep": Int(doc="expert-parallel degree of the routed experts: divides tp and the experts; tp with "
                  "dp_attention (SGLang --ep-size)", unit="GPUs", lo=1, hi=MAX_TP, default=1),
    "dp_attention": Bool(doc="attention data-parallel over the tp GPUs, each holding its own requests' KV; "
                             "needs ep = tp on a MoE model (SGLang --enable-dp-attention)", default=False),
    "replicas": Int(doc="replicas behind the router", lo=1, hi=MAX_REPLICAS, default=1),
    "dtype": Str(doc="weight and compute dtype", choices=tuple(DTYPE_BYTES), default="bf16"),
    "kv_dtype": Str(doc="KV-cache dtype (default: dtype; bf16 for fp8 weights)", choices=tuple(DTYPE_BYTES),
                    nullable=True),
    "target_step_s": Float(doc="fixed: seconds per target pass (required for fixed)", unit="s", hi=MAX_SECONDS,
                           **POS, nullable=True),
    "draft_step_s": Float(doc="fixed: seconds per draft step", unit="s", lo=0.0, hi=MAX_SECONDS, default=0.0),
})

DRAFTER = Section(doc="the drafter (none: no speculation)", nullable=True, keys={
    "method": Str(doc="drafting method", choices=METHODS, default=REQUIRED),
    "num_speculative_tokens": Int(doc="K, and the largest K a dynamic policy may pick", unit="tokens", lo=0,
                                  hi=MAX_K, default=3),
    "model": _path("draft model or head config: catalog name or config.json path (model-based methods)",
                   nullable=True),
    "tree": Bool(doc="eagle/eagle3: verify a token tree instead of a chain", default=False),
    "tree_nodes": Int(doc="tree candidates (0: 63 medusa, 59 eagle)", unit="tokens", lo=0, hi=MAX_LIST, default=0),
    "tree_branches": Int(doc="candidates per depth", lo=1, hi=MAX_LIST, default=1),
    "match_probability": _rate("ngram/suffix: chance a sequence finds a match in a round", default=1.0),
    "host_base_us": Float(doc="ngram/suffix host lookup cost per round", unit="µs", lo=0.0, hi=1e9, default=50.0),
    "host_us_per_seq": Float(doc="ngram/suffix host lookup cost per sequence", unit="µs", lo=0.0, hi=1e9,
                             default=5.0),
    "layer_fraction": Float(doc="self_spec: fraction of the target's layers the draft runs", lo=0.0, hi=1.0,
                            lo_open=True, default=1.0),
    "kv_budget_tokens": _tokens("self_spec: bounded draft KV (0: full)", lo=0, default=0),
    "draft_tp": Int(doc="draft_model/parallel TP degree (default: the target's)", unit="GPUs", lo=1, hi=MAX_TP,
                    nullable=True),
    "lookahead_window": Int(doc="lookahead: W, the lookahead branch's window (candidates G: tree_branches)",
                            unit="tokens", lo=0, hi=MAX_LIST, default=0),
})

ACCEPTANCE = OneOf(doc="acceptance model (docs/simulator_models.md)", nullable=True, options=(
    _rate("a number: iid acceptance rate alpha"),
    Str(doc="a string: a preset name", choices=tuple(PRESETS)),
    Variants(doc="acceptance model", tag="model", variants={
        "iid": {"alpha": _rate("per-position acceptance rate", default=REQUIRED)},
        "per_position": {"alphas": ListOf(doc="conditional rates alpha_1..alpha_n (the last repeats)",
                                          item=_rate("rate"), max_len=MAX_LIST, default=REQUIRED)},
        "beta": {"alpha": Float(doc="mean per-request rate", lo=0.0, hi=1.0, lo_open=True, hi_open=True,
                                default=REQUIRED),
                 "concentration": Float(doc="Beta concentration (higher: requests more alike)", hi=1e9, **POS,
                                        default=REQUIRED)},
        "trace": {"path": _path("CSV of accept lengths or vLLM counters", default=REQUIRED),
                  "k": Int(doc="drafts proposed per row when the CSV has no k column", lo=1, hi=MAX_K,
                           nullable=True),
                  "counters": Str(doc="vLLM counters: delta rows summed, cumulative: last row",
                                  choices=("delta", "cumulative"), default="delta")},
        "kernel": {"vocab_size": Int(doc="synthetic vocabulary", lo=2, hi=MAX_VOCAB, default=REQUIRED),
                   "overlap": _rate("target/draft distribution overlap (or alpha)"),
                   "alpha": _rate("target acceptance rate (or overlap)"),
                   "seed": Int(doc="seed of the synthetic distributions", lo=0, hi=MAX_SEED, default=0),
                   "sharpness": Float(doc="distribution sharpness", lo=0.0, hi=1e6, nullable=True)},
        "preset": {"name": Str(doc="published figures (simulator/speculation/acceptance_presets.py)",
                               choices=tuple(PRESETS), default=REQUIRED)},
    }),
))

_K = Int(doc="K", lo=0, hi=MAX_K)
POLICY = OneOf(doc="speculation policy (docs/simulator_models.md); default static with a drafter, else off",
               nullable=True, options=(
    Str(doc="a string: the kind", choices=POLICY_KINDS),
    Variants(doc="policy", tag="kind", variants={
        "static": {"k": Int(doc="K (default: the drafter's num_speculative_tokens)", lo=0, hi=MAX_K,
                            nullable=True)},
        "off": {},
        "batch_schedule": {"schedule": ListOf(doc="rows [max_batch, K], max_batch increasing", max_len=MAX_LIST,
                                              item=Pair(items=(Int(doc="max_batch", lo=1, hi=MAX_SEQS * MAX_REPLICAS),
                                                               Int(doc="K", lo=0, hi=MAX_K))),
                                              default=REQUIRED)},
        "adaptive": {"up": _rate("raise K when the acceptance EMA is above", default=0.8),
                     "down": _rate("lower K when the acceptance EMA is below", default=0.4),
                     "ema_decay": Float(doc="EMA decay per round", lo=0.0, hi=1.0, hi_open=True, default=0.8),
                     "k_min": Int(doc="smallest K", lo=1, hi=MAX_K, default=1),
                     "k_init": Int(doc="first K (default k_max)", lo=1, hi=MAX_K, nullable=True)},
        "goodput": {"prior_strength": Float(doc="weight of the acceptance prior, in observations", hi=1e9, **POS,
                                            default=10.0)},
        "vllm_dynamic": {"num_speculative_tokens_per_batch_size": ListOf(
            doc="vLLM: rows [start, end, K], inclusive ranges of requests scheduled per step (prefills "
                "included), the first starting at 1; gaps inherit the previous K; K capped at "
                "num_speculative_tokens (engine.kind vllm)", max_len=MAX_LIST,
            item=Pair(items=(Int(doc="start", lo=1, hi=MAX_SEQS), Int(doc="end", lo=1, hi=MAX_SEQS),
                             Int(doc="K", lo=0, hi=MAX_K))), default=REQUIRED)},
        "sglang_adaptive": {
            "adaptive_config": ListOf(doc="SGLang --speculative-adaptive-config, one entry per batch-size key "
                                          "(default {1: [1,3,5,7], 8: [0,1,3], 32: [0,1], 64: [0]}, steps above the "
                                          "drafter's K dropped; engine.kind sglang)", max_len=MAX_LIST, nullable=True,
                                      item=Section(keys={
                "batch_size": Int(doc="batch-size key", lo=1, hi=MAX_SEQS, default=REQUIRED),
                "candidate_steps": ListOf(doc="speculative steps (K) this key may use", max_len=MAX_LIST,
                                          item=Int(doc="steps", lo=0, hi=MAX_K), default=REQUIRED),
                "up_hysteresis": Float(doc="step up when ema > steps - 0.5 + this", lo=-MAX_K, hi=MAX_K, default=0.0),
                "down_hysteresis": Float(doc="step down when ema <= lower - 0.5 + this (0.5 + this to 0)",
                                         lo=-MAX_K, hi=MAX_K, default=-0.25),
                "ceiling_coeff": Float(doc="cap a non-rising step at ceil(ema x this); 0: none", lo=0.0, hi=MAX_K,
                                       default=0.0)})),
            "ema_alpha": Float(doc="weight of each batch's mean accepted drafts in the EMA", **POS, hi=1.0,
                               default=0.2),
            "warmup_batches": Int(doc="batches per key before the first update", lo=0, hi=MAX_REQUESTS, default=10),
            "update_interval": Int(doc="batches between updates", lo=1, hi=MAX_REQUESTS, default=5),
            "cuda_graph_bs": ListOf(doc="SGLang CUDA-graph batch sizes a batch pads to before its key is chosen "
                                        "(default: SGLang's capture list with speculation on, up to 256)",
                                    max_len=MAX_LIST, nullable=True, item=Int(doc="batch size", lo=1, hi=MAX_SEQS))},
        "trtllm_schedule": {
            "draft_len_schedule": ListOf(doc="TensorRT-LLM: rows [batch_upper_bound, K] ({4: 4, 8: 2, 32: 1} is "
                                             "[[4, 4], [8, 2], [32, 1]]): K of the first bound >= active requests, "
                                             "0 past the last; the smallest bound's K = num_speculative_tokens "
                                             "(engine.kind trtllm)", max_len=MAX_LIST, nullable=True,
                                         item=Pair(items=(Int(doc="batch_upper_bound", lo=1, hi=MAX_SEQS),
                                                          Int(doc="K", lo=0, hi=MAX_K)))),
            "max_concurrency": Int(doc="speculation off above this many active requests (not with "
                                       "draft_len_schedule)", lo=1, hi=MAX_SEQS, nullable=True),
            "acceptance_window": Int(doc="finished requests in the rolling acceptance mean; 0 or null: no gate",
                                     lo=0, hi=MAX_REQUESTS, nullable=True),
            "acceptance_length_threshold": Float(doc="speculation off for good once that mean of accepted drafts "
                                                     "per iteration is below this", lo=0.0, hi=MAX_K, nullable=True)},
    }),
))

_QPS = Float(doc="requests per second", unit="1/s", lo=MIN_QPS, hi=MAX_QPS, default=REQUIRED)
ARRIVAL = Variants(doc="arrival process (a string names the process, its keys then sit in workload)",
                   tag="process", default=REQUIRED, variants={
    "poisson": {"qps": _QPS},
    "gamma": {"qps": _QPS, "cv": Float(doc="coefficient of variation of the gaps", lo=1e-3, hi=1e3, default=REQUIRED)},
    "constant": {"qps": _QPS},
    "closed_loop": {"concurrency": Int(doc="simultaneous users", unit="users", lo=1, hi=MAX_USERS, default=REQUIRED),
                    "think_time_s": Float(doc="pause between a reply and the next request", unit="s", lo=0.0,
                                          hi=MAX_SECONDS, default=0.0)},
    "trace": {"path": _path("CSV with arrived_at, num_prefill_tokens, num_decode_tokens", default=REQUIRED),
              "time_scale": Float(doc="multiply arrival times by this", hi=1e6, **POS, default=1.0),
              "max_requests": Int(doc="replay at most this many rows", lo=1, hi=MAX_REQUESTS, nullable=True)},
    "schedule": {
        "rates": ListOf(doc="rows [start_s, qps]: the rate from start_s (the first row at 0, starts increasing); "
                            "num_requests null: the expected count of one period", max_len=MAX_LIST, default=REQUIRED,
                        item=Pair(items=(Float(doc="start_s", unit="s", lo=0.0, hi=MAX_SECONDS),
                                         Float(doc="qps", unit="1/s", lo=0.0, hi=MAX_QPS)))),
        "shape": Str(doc="step: each rate holds until the next row; linear: straight lines between rows (the last "
                         "back to the first)", choices=SCHEDULE_SHAPES, default="step"),
        "period_s": Float(doc="the schedule repeats after this (> the last start_s)", unit="s", hi=MAX_SECONDS, **POS,
                          default=DEFAULT_PERIOD_S),
        "time_compression": Float(doc="the clock runs this many times faster: times divide by it, rates do not "
                                      "(60: an hour lasts a minute)", lo=1e-6, hi=1e6, default=1.0),
        "rate_scale": Float(doc="multiply every rate", hi=1e6, **POS, default=1.0)},
})

LENGTH = OneOf(doc="token length: an integer (fixed) or a distribution", nullable=True, options=(
    _tokens("an integer: a fixed length"),
    Variants(doc="length distribution", tag="dist", variants={
        "fixed": {"value": _tokens("the length", default=REQUIRED)},
        "uniform": {"low": _tokens("smallest length", default=REQUIRED),
                    "high": _tokens("largest length (inclusive)", default=REQUIRED)},
        "lognormal": {"mean": Float(doc="mean length (or median)", unit="tokens", lo=1.0, hi=MAX_TOKENS),
                      "median": Float(doc="median length exp(mu) (or mean)", unit="tokens", lo=1.0, hi=MAX_TOKENS),
                      "sigma": Float(doc="std of ln(length)", lo=0.0, hi=5.0, default=REQUIRED)},
        "empirical": {"path": _path("CSV file", default=REQUIRED),
                      "column": Str(doc="column name", max_len=MAX_NAME, default=REQUIRED),
                      "order": Str(doc="random: rows with replacement; sequential: in order, cycling",
                                   choices=ORDERS, default="random")},
    }, common={"min": _tokens("clip below", default=1),
               "max": _tokens(f"clip above (samples never exceed {MAX_TOKENS:,})", nullable=True)}),
))

WORKLOAD = Section(doc="requests", default=REQUIRED, keys={
    "arrival": ARRIVAL,
    "num_requests": Int(doc="requests (trace: default every row)", lo=1, hi=MAX_REQUESTS, nullable=True,
                        default=1000),
    "preset": Str(doc="published dataset lengths (simulator/workload/workload_presets.py); prompt_len / output_len win",
                  choices=tuple(WORKLOAD_PRESETS), nullable=True),
    "prompt_len": LENGTH,
    "output_len": LENGTH,
})

ENGINE = Section(doc="the serving engine per replica (vLLM's names and defaults)", nullable=True, keys={
    "kind": Str(doc="whose rounds: ideal (the cost model's passes alone) or a named engine's", choices=ENGINE_KINDS,
                default="ideal"),
    "version": Str(doc="the engine's version where its behaviour differs (default: the engine's own)", max_len=MAX_NAME,
                   nullable=True),
    "profile": _path("an engine profile YAML: host constants fitted by `specsight calibrate --from-bench` "
                     "(docs/engines.md); unset: the built-in constants", nullable=True),
    "max_num_seqs": Int(doc="running sequences", unit="sequences", lo=1, hi=MAX_SEQS, default=256),
    "max_num_batched_tokens": Int(doc="tokens per iteration (>= max_num_seqs)", unit="tokens", lo=1,
                                  hi=MAX_BATCHED_TOKENS, default=8192),
    "block_size": Int(doc="tokens per KV block", unit="tokens", lo=1, hi=MAX_BLOCK_SIZE, default=16),
    "gpu_memory_utilization": Float(doc="fraction of each GPU's HBM", lo=0.0, hi=1.0, lo_open=True, default=0.9),
    "router": Str(doc="request routing", choices=ROUTERS, default="round_robin"),
    "num_gpu_blocks": Int(doc="override the KV capacity", unit="blocks", lo=1, hi=MAX_BLOCKS, nullable=True),
    "activation_reserve_gb": Float(doc="memory held back for activations (default: estimated)", unit="GB per GPU",
                                   lo=0.0, hi=MAX_GB, nullable=True),
})

SLO = Section(doc="per-request latency targets", nullable=True, keys={
    "tpot_ms_p99": Float(doc="a request meets the SLO only if its TPOT <= this", unit="ms", hi=MAX_MS, **POS,
                         nullable=True),
    "ttft_ms_p99": Float(doc="... and its TTFT <= this", unit="ms", hi=MAX_MS, **POS, nullable=True),
})

LIMITS = Section(doc="work limits checked before a run (simulator/scenario/work_limits.py)", nullable=True, keys={
    "max_requests": Int(doc="requests per run (memory: about 5 kB each)", lo=1, hi=MAX_REQUESTS,
                        default=2_000_000),
    "max_tokens": Int(doc="num_requests x (mean prompt_len + mean output_len)", unit="tokens", lo=1,
                      hi=10 ** 15, default=2 * 10 ** 9),
    "max_batch_slots": Int(doc="replicas x max_num_seqs (per-slot arrays)", lo=1, hi=MAX_SEQS * MAX_REPLICAS,
                           default=10 ** 7),
    "max_replicas": Int(doc="hardware.replicas (memory: about 100 kB each)", lo=1, hi=MAX_REPLICAS, default=10_000),
    "max_kernel_elements": Int(doc="kernel acceptance: output tokens x (K + 1) x vocab_size probabilities drawn",
                               lo=1, hi=10 ** 18, default=10 ** 10),
    "max_study_tokens": Int(doc="a study (breakeven, plan, sweep): the points' max_tokens work summed", unit="tokens",
                            lo=1, hi=10 ** 18, default=10 ** 11),
})

PRICING = Section(doc="what a GPU-hour costs, for `specsight plan` (simulation ignores it)", nullable=True, keys={
    "usd_per_gpu_hour": Float(doc="price of one GPU for one hour (default: the hardware profile's "
                                  "price_usd_per_gpu_hour; --price-per-gpu-hour wins)", unit="USD", lo=0.0,
                              lo_open=True, hi=MAX_PRICE, nullable=True),
    "source": Str(doc="where the price comes from (a contract, a price page and its date)", max_len=MAX_TEXT,
                  nullable=True),
})

SCENARIO = Section(doc="a scenario", keys={
    "name": Str(doc="reported as `scenario` in the summary (default: the file stem)", max_len=MAX_NAME,
                nullable=True),
    "description": Str(doc="free text", max_len=MAX_TEXT, min_len=0, nullable=True),
    "seed": Int(doc="every random stream derives from it", lo=0, hi=MAX_SEED, default=0),
    "hardware": HARDWARE,
    "model": _path("catalog name (models/<name>.json) or config.json path (required unless hardware.kind fixed)",
                   nullable=True),
    "drafter": DRAFTER,
    "acceptance": ACCEPTANCE,
    "policy": POLICY,
    "workload": WORKLOAD,
    "engine": ENGINE,
    "slo": SLO,
    "limits": LIMITS,
    "pricing": PRICING,
})
TOP_KEYS = tuple(SCENARIO.keys)

# ---- model config.json keys the loader reads (simulator/models/model_spec.py) ---------------------------
_DIM = 2 ** 20
MODEL_CONFIG: dict[str, Int] = {k: Int(doc=doc, lo=lo, hi=hi) for k, lo, hi, doc in (
    ("hidden_size", 1, _DIM, "model width"),
    ("num_attention_heads", 1, 2 ** 16, "query heads"),
    ("num_key_value_heads", 1, 2 ** 16, "KV heads"),
    ("head_dim", 1, 2 ** 16, "per-head width"),
    ("num_hidden_layers", 0, MAX_LAYERS, "layers"),
    ("num_local_experts", 0, 2 ** 16, "routed experts (0: dense)"),
    ("moe_intermediate_size", 0, 2 ** 24, "expert MLP width"),
    ("intermediate_size", 0, 2 ** 24, "MLP width"),
    ("vocab_size", 1, 2 ** 24, "vocabulary"),
    ("num_experts_per_tok", 0, 2 ** 16, "experts per token"),
    ("n_shared_experts", 0, 2 ** 16, "shared experts"),
    ("shared_expert_intermediate_size", 0, 2 ** 24, "a shared expert's MLP width (one shared expert when set)"),
    ("first_k_dense_replace", 0, 2 ** 16, "leading dense layers"),
    ("q_lora_rank", 0, _DIM, "MLA query rank"),
    ("kv_lora_rank", 0, _DIM, "MLA KV rank"),
    ("qk_rope_head_dim", 0, _DIM, "MLA rope width"),
    ("qk_nope_head_dim", 0, _DIM, "MLA non-rope width"),
    ("v_head_dim", 0, _DIM, "MLA value width"),
    ("draft_vocab_size", 0, 2 ** 24, "EAGLE-3 draft vocabulary (0: full)"),
    ("medusa_num_heads", 0, MAX_LIST, "Medusa heads"),
    ("medusa_num_layers", 0, MAX_LIST, "Medusa layers per head"),
    ("max_position_embeddings", 0, 10 ** 12, "context window (0: not given)"),
    ("sliding_window_pattern", 1, MAX_LAYERS, "every n-th layer full, the others sliding (Gemma 3)"),
    ("full_attention_interval", 1, MAX_LAYERS, "every n-th layer full, the others linear (Qwen3-Next)"),
    ("max_window_layers", 0, MAX_LAYERS, "layers from this index on slide (Qwen2, when the window is in use)"),
    ("attention_chunk_size", 1, 10 ** 12, "chunked-attention chunk, priced as a window (Llama 4)"),
    ("linear_num_key_heads", 1, 2 ** 16, "linear-attention key heads (Gated DeltaNet)"),
    ("linear_num_value_heads", 1, 2 ** 16, "linear-attention value heads"),
    ("linear_key_head_dim", 1, 2 ** 16, "linear-attention key head width"),
    ("linear_value_head_dim", 1, 2 ** 16, "linear-attention value head width"),
    ("linear_conv_kernel_dim", 1, 2 ** 8, "linear-attention short convolution taps"),
)}


def files_markdown() -> list[str]:
    """docs/schema.md's section on input and output files, physical floors and work limits."""
    sizes = ", ".join(f"{k} {v // 2 ** 20:,} MiB" for k, v in MAX_BYTES.items())
    return [
        "## Files, floors and work", "",
        "Every file a command reads goes through `simulator/common/input_files.py` and every file it writes through "
        "`simulator/common/output_files.py`; each limit below is a constant there (a bigger file: split it; a limit "
        "in `limits:` is raised in the scenario or with `--set limits.KEY=N`).", "",
        "| what | limit | where, how to raise |", "| --- | --- | --- |",
        f"| input file size by kind | {sizes} | `MAX_BYTES`; refused before reading |",
        "| input file kind | regular files only: a directory, FIFO, socket, device or symlink loop is refused by "
        "its kind before it is opened | - |",
        f"| nesting of lists and mappings | {MAX_NESTING} levels; a YAML alias inside its own anchor is refused; "
        f"{MAX_NODES:,} values (aliases counted each use) | `MAX_NESTING`, `MAX_NODES` |",
        f"| digits of one number in a file | {MAX_INT_DIGITS:,} | `MAX_INT_DIGITS` (Python's own) |",
        "| text | UTF-8; an error gives the line and column, never the content | - |",
        f"| a CSV cell | magnitude at most {MAX_CELL:,} (2^53); lengths at most `MAX_TOKENS`, accepted and k at most "
        "`MAX_K` | `simulator/common/csvio.py` |",
        f"| profile floors | memory bandwidth >= {MIN_MEMORY_TB_S:g} TB/s, peak >= {MIN_TFLOPS:g} TFLOP/s, "
        f"interconnect >= {MIN_LINK_GB_S:g} GB/s, roofline_sharpness in [1, {MAX_SHARPNESS:g}] "
        "| `simulator/hardware/hardware.py` (keeps every pass time finite) |",
        "| outputs | regular files only, inside the output folder: a device, FIFO, directory or symlink at the "
        "target is refused, never replaced or followed; the folder is probed by creating a file; a path must "
        "be UTF-8 | - |",
        "| simulator memory | num_requests x 5,000 bytes (`work_limits.BYTES_PER_REQUEST`) against MemAvailable "
        "| lower "
        "num_requests |",
        "| kernel acceptance | set-up draws and output tokens x (K + 1) x vocab_size | `limits.max_kernel_elements` |",
        "| a study (breakeven, plan, sweep) | the points' tokens summed | `limits.max_study_tokens` |",
        "| groundtruth, calibrate | weights, KV cache and logits estimated against the device's free memory | "
        "lower --batch, --k, --prompt-len, --layers or raise --scale |",
        "| dask | connect within `DASK_CONNECT_TIMEOUT_S`, a worker within `DASK_WORKER_WAIT_S` (60 s) | "
        "`specsight/studies/executors.py` |", "",
        "Work estimated past 60 s (`work_limits.ANNOUNCE_S`) is announced on stderr (`specsight: note: ...`) "
        "with its estimate, "
        "and a study then prints its progress every 30 s even off a terminal. YAML duplicate keys and tags "
        "(`!!python/...`) are refused; `5e-05` is a number (YAML 1.2).", ""]


def schema_markdown() -> str:
    """docs/schema.md: the limits and every scenario key."""
    import re
    notes = dict(re.findall(r"^((?:MAX|MIN)_\w+) = .*?# (.*)$", Path(__file__).read_text(), flags=re.M))
    limits = [(n, v, notes.get(n, "")) for n, v in globals().items() if n in notes]
    limits.insert(3, ("MAX_K", MAX_K, "drafts per round (simulator/speculation/spec_math.py)"))
    lines = ["# Scenario schema (generated: `python -m simulator.scenario.schema_table > docs/schema.md`)", "",
             "Every scenario key with its type, range, unit, default and meaning, from "
             "`simulator/scenario/schema_table.py`. `load_scenario` checks a scenario against it before anything "
             "runs: keys must be strings, numbers must be numbers (no strings, no booleans, no NaN or "
             "infinities), integers and names stay within the limits below, and every error is one "
             "`SpecsightInputError` line naming the key path, the value and what is allowed.", "",
             "## Limits", "", "| constant | value | what |", "| --- | --- | --- |"]
    lines += [f"| `{n}` | {v:,} | {note} |" if isinstance(v, int) else f"| `{n}` | {v:g} | {note} |"
              for n, v, note in limits]
    lines += ["", "Work limits (`limits:` block, or `--set limits.max_tokens=...`) are checked after the "
              "scenario is built and before it runs: see `simulator/scenario/work_limits.py`.", "",
              "## Scenario keys", "", markdown(SCENARIO), "",
              *files_markdown(),
              "Kept so by `tests/test_schema.py`, `tests/test_schema_files.py`, `tests/test_schema_limits.py`, the "
              "seeded fuzz test `tests/test_fuzz.py`, the invariants of `tests/test_properties.py`, and the long "
              "campaigns `benchmarks/fuzz_campaign.py` (results: `benchmarks/results/fuzz_campaign.md`) and "
              "`benchmarks/cli_campaign.py` (flags and files of every kind; results: "
              "`benchmarks/results/cli_campaign.md`).", "",
              "## Model config.json keys read (integers)", "", "| key | allowed | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{k}` | {f.allowed()} | {f.doc} |" for k, f in MODEL_CONFIG.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(schema_markdown(), end="")
