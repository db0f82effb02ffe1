"""The engines' host side: scheduler time per iteration, what overlap hides, what a sync costs,
and what a kernel launch costs outside a CUDA graph.

One iteration's host work (schedule, prepare inputs, process outputs) is H(B) = base + per_seq B.
With overlap (async) scheduling the host prepares iteration i + 1 while the GPU runs iteration i,
so only max(0, H - GPU time) shows; without it all of H shows. A host sync inside a round (a
`.item()`, an accept-length copy the host waits for) stalls the GPU until the host launches the
next pass: one launch latency per sync (`SYNC_S`). Which engine overlaps what, and where it
syncs, is in each engine's file (../shared/reference/engines.md §1-§2).

No engine publishes H(B) for its current release; each constant below is taken from a published
measurement, with the arithmetic shown. None comes from engines.md §4 (the validation rows).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..common.errors import SpecsightInputError
from ..common.input_files import read_yaml

MS = 1e-3
US = 1e-6

# vLLM 0.x on A100, Llama-2-7B TP1 (microsoft/vidur data/profiling/a100/cpu_overheads.csv, medians
# at batch 8 and 64): schedule 0.165 -> 0.952 ms, prepare_inputs (e2e) 0.293 -> 1.163 ms,
# process_model_outputs 0.624 -> 4.108 ms. Straight lines through the two points:
#   schedule         0.0526 ms + 0.01405 ms x B      ((0.952 - 0.165) / 56 = 0.01405)
#   prepare inputs   0.1688 ms + 0.01553 ms x B      ((1.163 - 0.293) / 56 = 0.01553)
#   process outputs  0.1263 ms + 0.06221 ms x B      ((4.108 - 0.624) / 56 = 0.06221)
VIDUR_SCHEDULE_PREPARE_PER_SEQ_S = (0.01405 + 0.01553) * MS      # 0.0296 ms per scheduled request
V0_BASE_S = (0.0526 + 0.1688 + 0.1263) * MS                      # 0.348 ms: the three, V0's engine loop
V0_PER_SEQ_S = (0.01405 + 0.01553 + 0.06221) * MS                # 0.0918 ms per request

# vLLM V1 moves output processing (detokenisation, streaming) to the API-server process (vLLM V1
# blog, Jan 2025 [D]), so its engine loop keeps schedule + prepare. Its base: vLLM PR #25872
# (Llama-3.1-8B, EAGLE-3 K = 4, L20, vllm bench serve, max concurrency 1): async scheduling took the
# mean ITL from 28.14 to 27.17 ms. With speculation a streamed chunk holds one round's tokens, so ITL
# is the round time and 0.97 ms is the host work per round that async scheduling hides at B = 1
# (no acceptance figure needed): base = 0.97 - 0.0296 = 0.94 ms.
V1_ROUND_HIDDEN_S = (28.14 - 27.17) * MS
V1_BASE_S = V1_ROUND_HIDDEN_S - VIDUR_SCHEDULE_PREPARE_PER_SEQ_S
V1_PER_SEQ_S = VIDUR_SCHEDULE_PREPARE_PER_SEQ_S

# SGLang: PR #11398 (Llama-3.1-8B, EAGLE-1 head, steps 5 / topk 1, sglang.test.send_one: one
# request) states speed and accept length of both workers: the v1 worker (no overlap) 246.80 tok/s at
# acc_length 2.99, a round of 2.99 / 246.80 = 12.115 ms; the spec-v2 overlap worker 273.43 tok/s at
# 3.01, a round of 11.008 ms: overlap hides 1.107 ms a round at B = 1. Per request: the vidur slope.
SGLANG_ROUND_HIDDEN_S = (2.99 / 246.80 - 3.01 / 273.43) * 1000 * MS
SGLANG_BASE_S = SGLANG_ROUND_HIDDEN_S - VIDUR_SCHEDULE_PREPARE_PER_SEQ_S
SGLANG_PER_SEQ_S = VIDUR_SCHEDULE_PREPARE_PER_SEQ_S

# TensorRT-LLM: blog2 (DeepSeek-R1, batch 1): the overlap scheduler gains 1.03x, so the host work
# it hides is 3 % of a step: H = 0.03 x the GPU time of the iteration (no absolute figure published).
TRTLLM_HOST_FRACTION = 0.03

# One launch latency: vidur's MODEL_EXECUTION_LAUNCH median (vLLM 0.x launching a CUDA-graphed
# decode pass, Llama-2-7B TP1, A100): 0.0513 ms at batch 8 (0.049-0.055 ms at 8-64). A sync costs
# the GPU this long (it idles until the host launches the next pass).
SYNC_S = 0.0513 * MS

# A kernel launched eagerly from Python (torch dispatch + cudaLaunchKernel): pie-project/pie PR #348
# measured a vLLM model forward (Qwen2.5-72B-AWQ, A100-SXM4-80GB, batch 1) eager against replayed
# from a CUDA graph: 22.68 -> 15.39 ms a token, 7.29 ms for its ~1200 kernels (80 layers x ~15):
# 7.29 / 1200 = 6.1 us a kernel. Eager launches are asynchronous: they overlap the kernels already
# queued, so an eager pass takes max(GPU time, kernels x EAGER_LAUNCH_S).
EAGER_LAUNCH_S = 7.29 * MS / 1200


# ---- host work a round exposes beyond H(B) and its syncs (../shared/reference/engine-host-work.md) ----
# Launching a captured graph costs the host about 1 us per node: SGLang issue #29960 measured
# 2.826 ms for a graph of 2,876 nodes (0.98 us a node; vLLM's 1.983 ms for 2,187: 0.91 us) [M]. The
# GPU waits for it where the host reaches the launch only after a sync (it cannot run ahead).
# Range: 0.58 us a node (a graph replay on an RTX 5070 Ti, ahrefs/ocannl #488) to 0.98 us.
GRAPH_NODE_HOST_S = 2.826 * MS / 2876
GRAPH_NODE_HOST_RANGE_S = (0.58 * US, 2.826 * MS / 2876)

# A graph's node costs the GPU a least time of its own: a replayed chain of N no-op kernels took
# ~15 us + 0.58 us a node, launch and execution together (RTX 5070 Ti, CUDA 13.3; ahrefs/ocannl
# #488) [M]: every graphed pass pays 0.58 us per kernel beyond its roofline time, the latency floor
# of its small kernels (norms, rotary, activations, residual adds) that the roofline's aggregate
# bytes do not see. Range 0 (the per-node time all host-side) to 0.58 us. H100 / H200 / B200 not
# measured by the source [I].
GRAPH_NODE_GPU_S = 0.58 * US
GRAPH_NODE_GPU_RANGE_S = (0.0, 0.58 * US)

# Drafting per draft forward, host and GPU together, where the propose loop is host-bound: a draft
# step takes max(its GPU time, this) (the loop's host work overlaps its own kernels).
#   vLLM v0.10.1 (the V1 engine before async scheduling, as `v1-0.9` prices it): SpecDecode-Bench's
#     fit (arXiv 2601.11580, repo SpecDecode-Bench simulator/predictor.py@2fdccbd, class
#     Llama8BH100; H100, Llama-3.1-8B, EAGLE k = 3, InstructCoder, batch 1-64) [F]: drafting 2.135 ms
#     a round at k = 3, 0.712 ms a draft forward, against a roofline of 0.22-0.28 ms. Range: the
#     non-GPU part alone (0.712 - 0.28 = 0.43 ms, a floor with no GPU work under it) to 0.712.
#   vLLM V1 with async scheduling (`v1`): vLLM PR #32628 (Jan 2026, gpt-oss-120b TP1, C = 1) [M]:
#     EAGLE-3 TPOT 3.15 ms at K = 3 and 4.33 at K = 8: (4.33 - 3.15) / 5 = 0.236 ms per K. Range
#     0.236 (this) to 0.712 (the v0.10.1 figure).
VLLM_V010_DRAFT_STEP_S = 2.135 * MS / 3
VLLM_V010_DRAFT_STEP_RANGE_S = (2.135 * MS / 3 - 0.28 * MS, 2.135 * MS / 3)
VLLM_V014_DRAFT_STEP_S = (4.33 - 3.15) / (8 - 3) * MS
VLLM_V014_DRAFT_STEP_RANGE_S = (VLLM_V014_DRAFT_STEP_S, VLLM_V010_DRAFT_STEP_S)
#   vLLM V1 with the EAGLE drafter eager (`v1-0.8`, Apr 2025, before PR #17211 compiled and graphed
#     it): vLLM PR #17504 timed EAGLE-3's propose() at K = 3, batch 1, at ~16 ms eager and ~6 ms
#     with torch.compile and CUDA graphs, under the torch profiler (host time inflated) [M]: the
#     graphed figure above x 16 / 6 [I: the profiled ratio carried to unprofiled time]. Range 0.712
#     (no eager penalty) to this.
VLLM_EAGER_DRAFT_STEP_S = VLLM_V010_DRAFT_STEP_S * 16.0 / 6.0
VLLM_EAGER_DRAFT_STEP_RANGE_S = (VLLM_V010_DRAFT_STEP_S, VLLM_EAGER_DRAFT_STEP_S)
# SpecDecode-Bench's fixed 1.207 ms on every engine step, plain and speculative alike (same fit,
# v0.10.1) [F]: the per-iteration host work of the V1 engine that overlaps nothing (`v1-0.9`),
# in place of PR #25872's 0.97 ms (measured on L20 at v0.11: the range's other end).
VLLM_V010_STEP_S = 1.207 * MS
VLLM_V010_STEP_RANGE_S = (V1_ROUND_HIDDEN_S, 1.207 * MS)

# SGLang before FA3 became its default on sm90 (May 2025, issue #6066), FlashInfer's multi-step
# draft backend: one host plan() per draft step (S - 1) before the draft graph's replay, after a
# blocking .cpu() of kv_indptr, and a host plan for the verify's custom mask [C]. A plan is a
# rebuild of attention metadata on the host; SGLang issue #29843 measured such a rebuild at ~25
# small ops, 0.7-1.0 ms a replay [M]: 0.85 ms a plan, range 0.7-1.0 [I: that figure for a plan].
SGLANG_FLASHINFER_PLAN_S = 0.85 * MS
SGLANG_FLASHINFER_PLAN_RANGE_S = (0.7 * MS, 1.0 * MS)

# TensorRT-LLM two-model EAGLE-3 before ChainDrafter graphed the whole drafting loop (PR #4802, May
# 2025: its first draft forward ran without a graph): PR #3035 (Mar 2025, two-model EAGLE-3, 4
# drafts) measured the generation step 9.3 -> 14.0 ms [M]: 1.175 ms a draft step, host and GPU.
TRTLLM_TWO_MODEL_DRAFT_STEP_S = (14.0 - 9.3) / 4 * MS


@dataclass(frozen=True)
class HostModel:
    """H(B) = base_s + per_seq_s B (+ fraction x GPU time: TensorRT-LLM's published form); sync_s
    per host sync inside a round."""
    base_s: float
    per_seq_s: float
    gpu_fraction: float = 0.0
    sync_s: float = SYNC_S

    def work_s(self, num_seqs: int, gpu_s: float) -> float:
        return self.base_s + self.per_seq_s * num_seqs + self.gpu_fraction * gpu_s

    def exposed_s(self, num_seqs: int, gpu_s: float, overlap: bool, syncs: int) -> float:
        """Host seconds the iteration adds to its GPU time: all of H without overlap, what H
        exceeds the GPU time by with it, plus SYNC_S per host sync."""
        h = self.work_s(num_seqs, gpu_s)
        shown = max(0.0, h - gpu_s) if overlap else h
        return shown + syncs * self.sync_s


VLLM_V1_HOST = HostModel(V1_BASE_S, V1_PER_SEQ_S)
VLLM_V0_HOST = HostModel(V0_BASE_S, V0_PER_SEQ_S)
SGLANG_HOST = HostModel(SGLANG_BASE_S, SGLANG_PER_SEQ_S)
TRTLLM_HOST = HostModel(0.0, 0.0, TRTLLM_HOST_FRACTION)


def eager_pass_s(gpu_s: float, kernels: float) -> float:
    """An eager pass: its kernels launched one by one, overlapping the GPU's work."""
    return max(gpu_s, kernels * EAGER_LAUNCH_S)


# ---- an engine profile's overrides (`engine.profile: PATH`, written by calibrate/engine_fit.py) ----
# The constants a profile may set, in ms, and the HostModel field each replaces. Only engines with
# one host model for plain decoding and speculation take a profile (vLLM V1 at both versions,
# SGLang): vLLM V0's plain and speculative host differ, TensorRT-LLM's is a fraction of GPU time.
# A profile applies only at the version it was fitted on: vLLM v1 and v1-0.9 share the built-in
# constants but not what a fit sees (overlap, syncs a round; docs/engines.md).
PROFILE_CONSTANTS_MS = {"base_ms": "base_s", "per_seq_ms": "per_seq_s", "sync_ms": "sync_s"}
PROFILE_ENGINES = {"vllm": ("v1", "v1-0.9", "v1-0.8"), "sglang": ("v0.5", "v0.5-spec-v2")}
MAX_PROFILE_MS = 1000.0


@dataclass(frozen=True)
class HostOverrides:
    """An engine profile: the engine (and version) it was fitted on and the host constants it sets
    (seconds; None: the built-in constant)."""
    engine: str
    version: str
    base_s: float | None = None
    per_seq_s: float | None = None
    sync_s: float | None = None
    path: str = ""

    def apply(self, host: HostModel) -> HostModel:
        """`host` with this profile's constants in place of the built-in ones."""
        given = {f: getattr(self, f) for f in PROFILE_CONSTANTS_MS.values() if getattr(self, f) is not None}
        return dataclasses.replace(host, **given) if given else host


def check_profile_engine(engine: str, version: str) -> None:
    """Refuse an engine (version) whose host a profile cannot set."""
    ok = PROFILE_ENGINES.get(engine, ())
    if version not in ok:
        allowed = ", ".join(f"{e} {v}" for e, vs in PROFILE_ENGINES.items() for v in vs)
        raise SpecsightInputError("engine.profile", f"{engine} {version}",
                                  f"an engine profile sets the host of {allowed}")


def overrides_from_mapping(raw: Any, where: str = "engine.profile") -> HostOverrides:
    """A profile's parsed YAML: {engine, version, constants: {NAME_ms: {value, stderr}}, ...}."""
    if not isinstance(raw, Mapping):
        raise SpecsightInputError(where, type(raw).__name__, "a mapping with engine, version and constants")
    engine, version = raw.get("engine"), raw.get("version")
    check_profile_engine(str(engine), str(version))
    consts = raw.get("constants") or {}
    if not isinstance(consts, Mapping):
        raise SpecsightInputError(f"{where}.constants", type(consts).__name__, "a mapping of NAME_ms: {value: ms}")
    vals: dict[str, float] = {}
    for name, entry in consts.items():
        if name not in PROFILE_CONSTANTS_MS:
            raise SpecsightInputError(f"{where}.constants", name, f"one of {', '.join(PROFILE_CONSTANTS_MS)}")
        v = entry.get("value") if isinstance(entry, Mapping) else entry
        number = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
        if not number or not 0 <= v <= MAX_PROFILE_MS:
            raise SpecsightInputError(f"{where}.constants.{name}.value", v,
                                      f"a number of ms in [0, {MAX_PROFILE_MS:g}]")
        vals[PROFILE_CONSTANTS_MS[name]] = float(v) * MS
    return HostOverrides(str(engine), str(version), **vals)


def load_host_overrides(path: str | Path, engine: str, version: str) -> HostOverrides:
    """Read an engine profile YAML for `engine` at `version` (an input error if it was fitted on another)."""
    raw = read_yaml(Path(path), "engine.profile", "profile")
    ov = overrides_from_mapping(raw)
    if (ov.engine, ov.version) != (engine, version):
        raise SpecsightInputError("engine.profile", str(path), f"a profile fitted on {engine} {version} "
                                                               f"(this one is for {ov.engine} {ov.version})")
    return dataclasses.replace(ov, path=str(path))
