"""Every engine constant the round is priced with, with the range its source allows: what the
intervals on an answer carry beyond the validation residuals (specsight/studies/published/spread.py
re-prices a round at each end of each range).

A constant that is not measured here (the cited figures of host.py, collectives.py,
kernel_floors.py, ../shared/reference/engine-host-work.md) gets a declared range [low, high]: the
spread of the figures its source reports, or the two figures of two sources where one engine's
constant stands in for another's; the value priced is the module constant, and lies in the range.
A constant measured here (simulator/engines/measured_host.py, data/engine_host/) gets a narrow
range from its measurement: Z80 times its fit's standard error either side. A declared range is
read as an 80 % band (spread.py), and +- 1 standard error is a 68 % one; +- z se with z the
normal's 90th percentile, 1.2816 (scipy.stats.norm.ppf(0.9)), holds a normal estimate's true value
80 % of the time, two-sided, so both kinds of range are 80 % bands.

Each constant names the round term it enters (`term`, a key of EngineStepCost.round_terms, or
`host` for H(B)'s base, `host_fraction`, `allreduce_reading`) and the engines (and versions) whose
round it prices: () for every engine on a GPU. A source names its publications (PR and issue
numbers, arXiv ids) so that a published row's interval can leave its own publication's constants
out (specsight/studies/published/intervals.publication_ids).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..common.input_files import read_yaml
from . import collectives as C
from . import host as H
from . import kernel_floors as F
from .measured_host import DATA_DIR, PROPOSER_KEYS

TERMS = ("node_floor", "launch_tails", "plans", "syncs", "moe_fixed", "allreduce", "allreduce_reading",
         "draft_floor", "host", "host_fraction", "measured_iteration", "measured_proposer")


@dataclass(frozen=True)
class SourcedConstant:
    """One constant: its priced value, the range [low, high] its source allows, the term it enters."""
    name: str
    term: str
    value: float
    low: float
    high: float
    unit: str
    source: str
    engines: tuple[tuple[str, str | None], ...] = ()   # (engine, version or None: every version); (): all
    measured: bool = False

    def __post_init__(self) -> None:
        if self.term not in TERMS:
            raise ValueError(f"{self.name}: term {self.term!r} not one of {TERMS}")
        if not (self.low <= self.value <= self.high) or not all(map(math.isfinite, (self.low, self.high))):
            raise ValueError(f"{self.name}: value {self.value} outside its range [{self.low}, {self.high}]")

    def applies(self, engine: str, version: str) -> bool:
        return not self.engines or any(e == engine and v in (None, version) for e, v in self.engines)


Z80 = 1.2815515655446004          # scipy.stats.norm.ppf(0.9): the 80 % two-sided normal quantile

_VLLM_EARLY = (("vllm", "v1-0.9"), ("vllm", "v1-0.8"))
SOURCED: tuple[SourcedConstant, ...] = (
    SourcedConstant("graph_node_host_s", "launch_tails", H.GRAPH_NODE_HOST_S, *H.GRAPH_NODE_HOST_RANGE_S, "s",
                    "host time a captured-graph node: SGLang issue #29960 0.98 us (2,876 nodes), vLLM 0.91 us; "
                    "ahrefs/ocannl #488 0.58 us (host.py)"),
    SourcedConstant("graph_node_gpu_s", "node_floor", H.GRAPH_NODE_GPU_S, *H.GRAPH_NODE_GPU_RANGE_S, "s",
                    "a replayed node's least GPU time: 0.58 us (ahrefs/ocannl #488), 0 if all of it is host "
                    "time (host.py)"),
    SourcedConstant("sync_s", "syncs", H.SYNC_S, 0.049 * H.MS, 0.055 * H.MS, "s",
                    "one launch latency a sync: vidur's MODEL_EXECUTION_LAUNCH medians, 0.049-0.055 ms at "
                    "batch 8-64 (host.py)"),
    SourcedConstant("moe_layer_fixed_s", "moe_fixed", F.MOE_LAYER_FIXED_S, *F.MOE_LAYER_FIXED_RANGE_S, "s",
                    "fused MoE's fixed time a layer: vLLM PR #24700, Mixtral bf16 13 us to Qwen3 pre-PR configs "
                    "30.5 us (kernel_floors.py)"),
    SourcedConstant("allreduce_1mb_tp8_us", "allreduce", C.CURVE_US[8][-1], C.CURVE_US[8][-1],
                    C.VLLM_AR_1MB_TP8_US, "us",
                    "SGLang's custom all-reduce curve priced for vLLM: vLLM's own at 1048576, TP 8 took 45.0 us "
                    "against SGLang's 33.8 in the same test (SGLang PR #2904; collectives.py)", (("vllm", None),)),
    SourcedConstant("allreduce_bytes_per_size_unit", "allreduce_reading", C.SIZE_BYTES_PER_UNIT,
                    C.SIZE_READINGS["bytes"], C.SIZE_READINGS["elements"], "bytes",
                    "the curve's sizes read as float32 elements (the test's code) or as bytes (collectives.py)"),
    SourcedConstant("vllm_v010_draft_step_s", "draft_floor", H.VLLM_V010_DRAFT_STEP_S,
                    *H.VLLM_V010_DRAFT_STEP_RANGE_S, "s",
                    "SpecDecode-Bench's (arXiv 2601.11580) fitted 0.712 ms a draft forward, less its 0.28 ms "
                    "roofline at the low end (host.py)", (("vllm", "v1-0.9"),)),
    SourcedConstant("vllm_v014_draft_step_s", "draft_floor", H.VLLM_V014_DRAFT_STEP_S,
                    *H.VLLM_V014_DRAFT_STEP_RANGE_S, "s",
                    "vLLM PR #32628's 0.236 ms per K to SpecDecode-Bench's (arXiv 2601.11580) 0.712 (host.py)",
                    (("vllm", "v1"),)),
    SourcedConstant("vllm_eager_draft_step_s", "draft_floor", H.VLLM_EAGER_DRAFT_STEP_S,
                    *H.VLLM_EAGER_DRAFT_STEP_RANGE_S, "s",
                    "vLLM PR #17504's eager / graphed propose (16 / 6 ms) on SpecDecode-Bench's (arXiv "
                    "2601.11580) 0.712 ms, to no eager penalty (host.py)", (("vllm", "v1-0.8"),)),
    SourcedConstant("vllm_v010_step_s", "host", H.VLLM_V010_STEP_S, *H.VLLM_V010_STEP_RANGE_S, "s",
                    "V1's host work a step without overlap: SpecDecode-Bench's (arXiv 2601.11580) fitted 1.207 ms, "
                    "vLLM PR #25872's 0.97 ms (host.py)", _VLLM_EARLY),
    SourcedConstant("vllm_v1_round_hidden_s", "host", H.V1_ROUND_HIDDEN_S, H.V1_ROUND_HIDDEN_S, H.VLLM_V010_STEP_S,
                    "s", "V1's host work a round: vLLM PR #25872's 0.97 ms to SpecDecode-Bench's (arXiv 2601.11580) "
                    "1.207 ms (host.py)",
                    (("vllm", "v1"),)),
    SourcedConstant("sglang_round_hidden_s", "host", H.SGLANG_ROUND_HIDDEN_S, H.SGLANG_ROUND_HIDDEN_S, 1.2 * H.MS,
                    "s", "SGLang's host work a round: PR #11398's 1.107 ms hidden by overlap, issue #21895's ~1.2 ms "
                    "of CPU-bound restore before verify (engine-host-work.md)", (("sglang", None),)),
    SourcedConstant("sglang_flashinfer_plan_s", "plans", H.SGLANG_FLASHINFER_PLAN_S,
                    *H.SGLANG_FLASHINFER_PLAN_RANGE_S, "s",
                    "a FlashInfer host plan: SGLang issue #29843's 0.7-1.0 ms metadata rebuild (host.py)",
                    (("sglang", "v0.4"),)),
    SourcedConstant("trtllm_host_fraction", "host_fraction", H.TRTLLM_HOST_FRACTION, 0.025, 0.035, "1",
                    "TensorRT-LLM blog2's overlap gain 1.03x, as rounded to two digits: 1.025-1.035 (host.py)",
                    (("trtllm", None),)),
)


def sourced_for(engine: str, version: str) -> tuple[SourcedConstant, ...]:
    """The declared (not measured) constants that price `engine` at `version` on a GPU."""
    return tuple(c for c in SOURCED if c.applies(engine, version))


@lru_cache(maxsize=16)
def measured_ranges(name: str, method: str | None) -> tuple[SourcedConstant, ...]:
    """The measured host constants of data/engine_host/NAME.yaml with their measurement spread: the
    iteration's a_s and b_s +- Z80 times their fit's standard error (b_s no lower than 0), and
    `method`'s proposer time a round +- Z80 times the standard error of its level (the residuals'
    standard deviation over its points, n - 4 degrees of freedom, over sqrt(n)): 80 % bands, as
    the declared ranges are read; a proposer fitted on no points: none."""
    p = DATA_DIR / f"{name}.yaml"
    raw = read_yaml(p, "engine host constants", "profile")
    it = raw["iteration"]
    src = f"data/engine_host/{name}.yaml"
    out = []
    for key in ("a_s", "b_s"):
        v, half = float(it[key]), Z80 * float(it["stderr"][key])
        out.append(SourcedConstant(f"measured_iteration_{key}", "measured_iteration", v, max(v - half, 0.0),
                                   v + half, "s", f"{src}: iteration {key} +- {Z80:.4f} x its fit's standard error"))
    prop = (raw.get("proposer") or {}).get(method or "")
    pts = (prop or {}).get("points") or []
    if len(pts) > len(PROPOSER_KEYS):
        B = np.array([float(q["batch"]) for q in pts])
        K = np.array([float(q["k"]) for q in pts])
        y = np.array([float(q["host_ms"]) for q in pts]) * 1e-3
        fit = prop["round_s"] + prop["round_per_seq_s"] * B + K * (prop["step_s"] + prop["step_per_seq_s"] * B)
        se = float(np.sqrt(np.sum((y - fit) ** 2) / (len(y) - len(PROPOSER_KEYS))) / math.sqrt(len(y)))
        out.append(SourcedConstant(f"measured_proposer_{method}", "measured_proposer", 0.0, -Z80 * se, Z80 * se, "s",
                                   f"{src}: the {method} proposer's time a round +- {Z80:.4f} x the standard error "
                                   "of its level"))
    return tuple(out)


def _fmt(v: float, unit: str) -> str:
    if unit == "s":
        return f"{v * 1e6:.2f} us" if abs(v) < 1e-4 else f"{v * 1e3:.3f} ms"
    return f"{v:g} {unit}" if unit != "1" else f"{v:g}"


def ranges_markdown() -> str:
    """docs/engines.md's table of the declared ranges (regenerate: python -m simulator.engines.sourced)."""
    lines = ["| constant | priced | range | term | engines | source |", "| --- | --- | --- | --- | --- | --- |"]
    for c in SOURCED:
        eng = ", ".join(f"{e} {v}" if v else e for e, v in c.engines) or "every engine (GPU)"
        lines.append(f"| `{c.name}` | {_fmt(c.value, c.unit)} | {_fmt(c.low, c.unit)} - {_fmt(c.high, c.unit)} "
                     f"| {c.term} | {eng} | {c.source} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(ranges_markdown(), end="")
