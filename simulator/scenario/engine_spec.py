"""A scenario's `engine:` block: the serving engine per replica (whose rounds, batching limits,
KV-cache layout, routing; vLLM's names and defaults); the dataclass and its schema section."""
from __future__ import annotations

from dataclasses import dataclass

from ..common.errors import SpecsightInputError, closest_names, require_int, require_range
from ..common.limits import MAX_BATCHED_TOKENS, MAX_BLOCK_SIZE, MAX_BLOCKS, MAX_GB, MAX_NAME, MAX_SEQS, path_field
from ..common.schema import Bool, Float, Int, Section, Str

ROUTERS = ("round_robin", "least_outstanding", "prefix_aware")
ENGINE_KINDS = ("ideal", "vllm", "sglang", "trtllm")   # how a round is priced (docs/engines.md)


@dataclass(frozen=True)
class EngineSpec:
    """The serving engine's batching limits and KV-cache layout (vLLM's names and defaults)."""
    max_num_seqs: int = 256                 # sequences running at once, per replica
    max_num_batched_tokens: int = 8192      # tokens per iteration (prefill chunks + decode/verify positions)
    block_size: int = 16                    # tokens per KV-cache block
    gpu_memory_utilization: float = 0.9     # fraction of HBM the engine may use
    router: str = "round_robin"             # round_robin | least_outstanding
    num_gpu_blocks: int | None = None       # override the computed KV capacity (blocks per replica)
    activation_reserve_gb: float | None = None   # per GPU; None: estimated (docs/simulator.md)
    kind: str = "ideal"                     # ideal | vllm | sglang | trtllm: whose rounds (docs/engines.md)
    version: str | None = None              # the engine's version; None: the engine's default
    profile: str | None = None              # an engine profile YAML (host constants); None: built-in
    prefix_caching: bool = False            # automatic prefix caching (simulator/serving/prefix_replica.py)

    def __post_init__(self) -> None:
        w = "engine"
        require_int(f"{w}.max_num_seqs", self.max_num_seqs, lo=1)
        require_int(f"{w}.max_num_batched_tokens", self.max_num_batched_tokens, lo=1)
        require_int(f"{w}.block_size", self.block_size, lo=1)
        require_range(f"{w}.gpu_memory_utilization", self.gpu_memory_utilization, 0.0, 1.0, lo_open=True)
        if self.router not in ROUTERS:
            raise SpecsightInputError(f"{w}.router", self.router, closest_names(str(self.router), ROUTERS))
        if self.kind not in ENGINE_KINDS:
            raise SpecsightInputError(f"{w}.kind", self.kind, closest_names(str(self.kind), ENGINE_KINDS))
        if self.max_num_batched_tokens < self.max_num_seqs:   # as vLLM requires
            raise SpecsightInputError(f"{w}.max_num_batched_tokens", self.max_num_batched_tokens,
                                      f"must be >= max_num_seqs ({self.max_num_seqs})")
        if self.num_gpu_blocks is not None:
            require_int(f"{w}.num_gpu_blocks", self.num_gpu_blocks, lo=1)
        if self.activation_reserve_gb is not None:
            require_range(f"{w}.activation_reserve_gb", self.activation_reserve_gb, 0.0)
        if self.router == "prefix_aware" and not self.prefix_caching:
            raise SpecsightInputError(f"{w}.router", self.router, "prefix_aware needs engine.prefix_caching: true")


ENGINE = Section(doc="the serving engine per replica (vLLM's names and defaults)", nullable=True, keys={
    "kind": Str(doc="whose rounds: ideal (the cost model's passes alone) or a named engine's", choices=ENGINE_KINDS,
                default="ideal"),
    "version": Str(doc="the engine's version where its behaviour differs (default: the engine's own)", max_len=MAX_NAME,
                   nullable=True),
    "profile": path_field("an engine profile YAML: host constants fitted by `specsight calibrate --from-bench` "
                     "(docs/engines.md); unset: the built-in constants", nullable=True),
    "max_num_seqs": Int(doc="running sequences", unit="sequences", lo=1, hi=MAX_SEQS, default=256),
    "max_num_batched_tokens": Int(doc="tokens per iteration (>= max_num_seqs)", unit="tokens", lo=1,
                                  hi=MAX_BATCHED_TOKENS, default=8192),
    "block_size": Int(doc="tokens per KV block", unit="tokens", lo=1, hi=MAX_BLOCK_SIZE, default=16),
    "gpu_memory_utilization": Float(doc="fraction of each GPU's HBM", lo=0.0, hi=1.0, lo_open=True, default=0.9),
    "router": Str(doc="request routing (prefix_aware: the longest cached prefix)", choices=ROUTERS,
                  default="round_robin"),
    "prefix_caching": Bool(doc="automatic prefix caching: prompt blocks reused across requests, LRU eviction",
                           default=False),
    "num_gpu_blocks": Int(doc="override the KV capacity", unit="blocks", lo=1, hi=MAX_BLOCKS, nullable=True),
    "activation_reserve_gb": Float(doc="memory held back for activations (default: estimated)", unit="GB per GPU",
                                   lo=0.0, hi=MAX_GB, nullable=True),
})
