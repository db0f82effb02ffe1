"""What the engine writers share: the resolved `ServingConfig` they read, the `EngineCommand` each
returns (argv and files, or why the engine cannot run it), the engines' dtype names, and why an
engine refuses a policy."""
from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# specsight dtype -> the engines' dtype name (fp8 weights: bfloat16 activations, the quantization set apart)
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "bfloat16"}


@dataclass(frozen=True)
class ServingConfig:
    """What a serving engine needs to run the simulated configuration (one replica)."""
    scenario: str
    model: str                         # HF repo id or local folder
    tp: int                            # tensor-parallel GPUs
    dtype: str                         # specsight weight dtype: bf16 | fp16 | fp32 | fp8
    kv_dtype: str | None               # KV-cache dtype when it differs from the weights'
    max_num_seqs: int                  # sequences running at once
    max_num_batched_tokens: int        # tokens per iteration
    gpu_memory_utilization: float      # fraction of HBM the engine may use
    engine_kind: str                   # the engine whose rounds were simulated (ideal: none)
    method: str | None = None          # drafter method (simulator/speculation/drafters.py METHODS); None: none
    draft_model: str | None = None     # HF repo id or local folder (None: methods without one)
    draft_tp: int | None = None        # draft TP when the scenario sets one
    k: int = 0                         # num_speculative_tokens (K, the maximum for dynamic policies)
    tree: bool = False                 # eagle/eagle3 token tree
    tree_nodes: int = 0
    tree_branches: int = 1
    ep: int = 1                        # expert-parallel groups of the routed experts (hardware.ep)
    dp_attention: bool = False         # data-parallel attention over the tp GPUs (hardware.dp_attention)
    policy: str = "off"                # policy kind (simulator/speculation/policies.py KINDS)
    policy_params: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def speculates(self) -> bool:
        return self.method is not None and self.k > 0 and self.policy != "off"


@dataclass(frozen=True)
class EngineCommand:
    """One engine's launch: argv and the files it reads (name, text), or why it cannot run it."""
    engine: str
    argv: tuple[str, ...] = ()
    files: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    unsupported: str | None = None

    @property
    def supported(self) -> bool:
        return self.unsupported is None

    @property
    def command(self) -> str | None:
        """The argv as one shell line (None when unsupported)."""
        return shlex.join(self.argv) if self.supported else None

    def to_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "supported": self.supported, "command": self.command,
                "argv": list(self.argv), "files": dict(self.files), "notes": list(self.notes),
                "unsupported": self.unsupported}


def unsupported(engine: str, why: str) -> EngineCommand:
    return EngineCommand(engine, unsupported=why)


ENGINE_OF_RULE = {"vllm_dynamic": "vllm", "sglang_adaptive": "sglang", "trtllm_schedule": "trtllm"}
SPECSIGHT_ONLY = {"adaptive": "specsight's acceptance-EMA rule", "goodput": "specsight's goodput-maximising rule"}


def policy_refusal(cfg: ServingConfig, engine: str, runs: Iterable[str]) -> str | None:
    """Why `engine` cannot run cfg's policy (it runs the kinds in `runs`), or None."""
    if cfg.policy in runs:
        return None
    if cfg.policy in ENGINE_OF_RULE:
        return (f"policy {cfg.policy} is {ENGINE_OF_RULE[cfg.policy]}'s own rule; {engine} has no such field "
                f"(plan or simulate a static K, or this engine's rule, to deploy on {engine})")
    if cfg.policy == "batch_schedule":
        return (f"{engine} has no per-batch-size K schedule (vLLM and TensorRT-LLM have one); it runs "
                f"{', '.join(sorted(runs))}")
    what = SPECSIGHT_ONLY.get(cfg.policy, f"policy {cfg.policy}")
    return (f"{what} is not an engine feature; {engine} runs {', '.join(sorted(runs))} "
            "(plan a static K: `--policies static`)")
