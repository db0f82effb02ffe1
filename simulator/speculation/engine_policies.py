"""The serving engines' own dynamic-K rules, as the engines implement them, each run only under
its own engine (`engine.kind`; `check_policy_engine`).

  vllm_dynamic      vLLM V1 `num_speculative_tokens_per_batch_size` (PR #32374): [[start, end, K], ...]
                    inclusive ranges keyed on the number of requests the scheduler scheduled in the
                    step (prefill chunks included); gaps and the tail inherit the previous K;
                    K <= num_speculative_tokens; lookahead KV stays reserved at num_speculative_tokens
  sglang_adaptive   SGLang `--speculative-adaptive` (PR #21599), the EMA strategy: per batch-size
                    key, an EMA of the accepted drafts per request, warm-up, update interval,
                    hysteresis and candidate steps; EAGLE/EAGLE3 with topk = 1 only
  trtllm_schedule   TensorRT-LLM (PyTorch backend) `draft_len_schedule`, `max_concurrency`, and the
                    `acceptance_window` / `acceptance_length_threshold` gate that turns speculation
                    off for good

Sources (read for this file; docs/simulator_models.md has the table):
  vLLM     vllm/v1/spec_decode/dynamic/utils.py@14b450ca (`validate_and_normalize_dynamic_sd_schedule`,
           `build_dynamic_sd_schedule_lookup`, its 3-item form); vllm/config/speculative.py@002e77c1
           (the field); vllm/v1/core/sched/scheduler.py (`num_spec_tokens_to_schedule =
           dynamic_sd_lookup[len(num_scheduled_tokens)]`, set when a step is scheduled: the drafts the
           model runner proposes at the end of that step are verified in the next one); lookahead
           KV at the static K: issue #49548 (reference/engines.md §3).
  SGLang   python/sglang/srt/speculative/adaptive_spec_params.py@015c8726 (`DEFAULT_ADAPTIVE_CONFIG`,
           `AdaptiveStepSlot.update`, `_recompute_params`); adaptive_step_router.py@a12239f6
           (`batch_size_key_for_batch`); python/sglang/srt/server_args.py
           `_generate_cuda_graph_batch_sizes` (the capture list with speculation on).
  TRT-LLM  tensorrt_llm/llmapi/llm_args.py@fcd3f316 `DecodingBaseConfig` (fields, validators, the
           translation of max_concurrency into {max_concurrency: max_draft_len});
           tensorrt_llm/_torch/pyexecutor/py_executor.py (`get_draft_len_for_batch_size(
           len(self.active_requests))`, the permanent-disable flag); tensorrt_llm/_torch/speculative/
           speculation_gate.py@41080dc5 (`SpeculationGate.record_avg_decoded`).
"""
from __future__ import annotations

import bisect
import math
from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from ..common.errors import SpecsightInputError
from .drafters import EAGLE_METHODS
from .policies import ENGINE_RULES, Policy, PolicyState

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

# SGLang DEFAULT_ADAPTIVE_CONFIG (adaptive_spec_params.py@015c8726): batch-size key ->
# (candidate_steps, up_hysteresis, down_hysteresis); ceiling_coeff 0 in every entry
SGLANG_DEFAULT_CONFIG = ((1, (1, 3, 5, 7), 0.0, -0.25), (8, (0, 1, 3), 0.0, 0.0),
                         (32, (0, 1), 0.0, 0.0), (64, (0,), 0.0, 0.0))
SGLANG_DOWN_HYSTERESIS = -0.25     # AdaptiveStepSlot's default where an entry gives none


def sglang_spec_cuda_graph_bs(max_bs: int = 256) -> tuple[int, ...]:
    """SGLang's CUDA-graph capture sizes with speculation on (server_args.py
    `_generate_cuda_graph_batch_sizes`): 1..8, 10..32 step 2, 40..64 step 4, 72..256 step 8,
    272.. step 16, up to cuda_graph_max_bs (GPU-dependent; any value >= 64 routes the default
    keys alike)."""
    bs = list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8)) \
        + list(range(272, max_bs + 1, 16))
    return tuple(b for b in bs if b <= max_bs)


class VllmDynamicPolicy(Policy):
    """vLLM's per-batch-size K. K = min(num_speculative_tokens, K of the last range starting at or
    below c), c = the requests scheduled in the previous iteration (decode and prefill chunks):
    vLLM picks K when it schedules a step, and the drafts proposed at the end of that step are the
    ones the next step verifies. c = 0 (nothing scheduled yet): the static K."""
    kind = "vllm_dynamic"
    reads_request_counts = True
    reserves_k_max = True

    def __init__(self, k_max: int, ranges: Iterable[tuple[int, int, int]]):
        super().__init__(k_max)
        self.ranges = tuple(sorted((int(a), int(b), int(k)) for a, b, k in ranges))
        self._starts = [a for a, _, _ in self.ranges]

    def k_for_scheduled(self, scheduled: int) -> int:
        if scheduled <= 0:
            return self.k_max
        i = bisect.bisect_right(self._starts, scheduled) - 1      # the first range starts at 1
        return min(self.k_max, self.ranges[i][2])

    def choose_k(self, batch_size: int, state: PolicyState) -> int:
        return self.k_for_scheduled(state.scheduled_requests)


class _SglangSlot:
    """One batch-size key's state (SGLang AdaptiveStepSlot)."""
    __slots__ = ("steps", "up", "down", "ceiling", "current", "ema", "batches")

    def __init__(self, steps: Iterable[int], up: float, down: float, ceiling: float, initial: int):
        self.steps = tuple(sorted(set(steps)))
        self.up, self.down, self.ceiling = up, down, ceiling
        self.current = initial if initial in self.steps else self.steps[len(self.steps) // 2]
        self.ema = float(self.current - 1)                  # neutral start: current steps - 1
        self.batches = 0


class SglangAdaptivePolicy(Policy):
    """SGLang's adaptive speculation (EMA strategy). Each decode batch of B requests routes to a
    slot: B padded up to the next CUDA-graph size (none past the largest), then the largest key at
    or below it (the smallest key below all). After each batch the slot's EMA takes the mean
    accepted drafts per request (ema = (1 - ema_alpha) ema + ema_alpha mean; not while the slot's
    steps are 0); batches 1..warmup_batches only count; then every update_interval-th batch
    recomputes the steps: from 0, probe the next candidate; else step down while
    ema <= (0.5 if the lower candidate is 0 else lower - 0.5) + down_hysteresis, and if it did not
    step down, step up while ema > current - 0.5 + up_hysteresis; with ceiling_coeff > 0 a step
    not above the old one is capped at max(1, ceil(ema ceiling_coeff)). Steps are K (topk = 1)."""
    kind = "sglang_adaptive"
    observes_rounds = True
    observes_plain_rounds = True

    def __init__(self, k_max: int, entries: Iterable[tuple[int, Sequence[int], float, float, float]],
                 ema_alpha: float = 0.2, warmup_batches: int = 10, update_interval: int = 5,
                 cuda_graph_bs: Iterable[int] | None = None):
        super().__init__(k_max)
        self.entries = tuple(sorted((int(bs), tuple(steps), float(up), float(down), float(ceil))
                                    for bs, steps, up, down, ceil in entries))
        self.keys = [e[0] for e in self.entries]
        self.ema_alpha, self.warmup, self.interval = float(ema_alpha), int(warmup_batches), int(update_interval)
        self.graph_bs = sorted(set(cuda_graph_bs)) if cuda_graph_bs else list(sglang_spec_cuda_graph_bs())
        self.reset()

    def reset(self) -> None:
        self.slots = [_SglangSlot(steps, up, down, ceil, self.k_max) for _, steps, up, down, ceil in self.entries]

    def key_index(self, batch_size: int) -> int:
        """The slot a batch of batch_size requests routes to."""
        g = bisect.bisect_left(self.graph_bs, batch_size)
        padded = self.graph_bs[g] if g < len(self.graph_bs) else batch_size
        return max(0, bisect.bisect_right(self.keys, padded) - 1)

    def choose_k(self, batch_size: int, state: PolicyState) -> int:
        return self.slots[self.key_index(batch_size)].current

    def observe(self, k: int, accepted: np.ndarray) -> None:
        if len(accepted):
            self._update(self.slots[self.key_index(len(accepted))], float(np.mean(accepted)))

    def observe_plain(self, batch_size: int) -> None:
        self._update(self.slots[self.key_index(batch_size)], 0.0)

    def _update(self, s: _SglangSlot, mean_accepted: float) -> None:
        if s.current > 0:
            s.ema = (1.0 - self.ema_alpha) * s.ema + self.ema_alpha * mean_accepted
        s.batches += 1
        if s.batches <= self.warmup or (s.batches - self.warmup) % self.interval:
            return
        steps, old = s.steps, s.current
        i = steps.index(old)
        if old == 0:                                   # probe the smallest positive step
            i = min(i + 1, len(steps) - 1)
            if steps[i] > 0 and s.ema < 0:
                s.ema = float(steps[i] - 1)
            s.current = steps[i]
            return
        i0 = i
        while i > 0:
            lower = steps[i - 1]
            if s.ema <= (0.5 if lower == 0 else lower - 0.5) + s.down:
                i -= 1
            else:
                break
        if i == i0:
            while i < len(steps) - 1 and s.ema > steps[i] - 0.5 + s.up:
                i += 1
        if s.ceiling > 0:
            cap = max(1, math.ceil(s.ema * s.ceiling))
            if cap < steps[i] <= old:
                while i > 0 and steps[i] > cap:
                    i -= 1
        s.current = steps[i]


class TrtllmSchedulePolicy(Policy):
    """TensorRT-LLM's draft length by active batch size, and its permanent disable. a = the
    requests the executor holds (decoding, in prefill, queued; at most max_num_seqs). With
    draft_len_schedule {b1: K1, b2: K2, ...} (rows [b, K], b increasing): K of the first b >= a, 0
    past the last; max_concurrency M is the schedule {M: num_speculative_tokens}; neither: the
    static K. acceptance_window N with acceptance_length_threshold T: each finished request
    records max(0, output tokens / decoding iterations - 1) (iterations: its decode rounds plus
    the context step that emitted its first token); once N requests have finished, a mean of the
    last N below T turns speculation off for the rest of the run."""
    kind = "trtllm_schedule"

    def __init__(self, k_max: int, schedule: Iterable[tuple[int, int]] | None = None,
                 max_concurrency: int | None = None, acceptance_window: int | None = None,
                 acceptance_length_threshold: float | None = None):
        super().__init__(k_max)
        if schedule is None and max_concurrency is not None:
            schedule = ((int(max_concurrency), self.k_max),)
        self.schedule = None if schedule is None else tuple(sorted((int(b), int(k)) for b, k in schedule))
        self.max_concurrency = max_concurrency
        self.window = int(acceptance_window or 0)
        self.threshold = acceptance_length_threshold
        gate = self.window > 0 and self.threshold is not None
        # what the replica must tell it: the active request count (a schedule), finishes (the gate)
        self.reads_request_counts = self.schedule is not None
        self.observes_finishes = gate
        self.k_by_batch = not (self.reads_request_counts or gate)
        self._limits = [b for b, _ in self.schedule] if self.schedule else []
        self.reset()

    def reset(self) -> None:
        self.history: deque[float] = deque()
        self.finished = 0
        self.disabled = False

    def k_for_active(self, active: int) -> int:
        if self.schedule is None:
            return self.k_max
        i = bisect.bisect_left(self._limits, active)        # first bound >= active
        return self.schedule[i][1] if i < len(self.schedule) else 0

    def choose_k(self, batch_size: int, state: PolicyState) -> int:
        if self.disabled:
            return 0
        return self.k_for_active(state.active_requests if self.reads_request_counts else batch_size)

    def observe_finish(self, output_tokens: int, decode_rounds: int) -> None:
        if self.disabled or not self.observes_finishes:
            return
        self.history.append(max(0.0, output_tokens / (decode_rounds + 1) - 1.0))
        if len(self.history) > self.window:
            self.history.popleft()
        self.finished += 1
        if self.finished >= self.window and sum(self.history) / len(self.history) < self.threshold:
            self.disabled = True


# ---- building from a scenario's `policy:` mapping ---------------------------------------------
KEYS = {"vllm_dynamic": ("num_speculative_tokens_per_batch_size",),
        "sglang_adaptive": ("adaptive_config", "ema_alpha", "warmup_batches", "update_interval", "cuda_graph_bs"),
        "trtllm_schedule": ("draft_len_schedule", "max_concurrency", "acceptance_window",
                            "acceptance_length_threshold")}


def engine_policy(kind: str, raw: Mapping[str, Any], where: str, k_max: int) -> Policy:
    """The engine rule `kind` from a schema-checked mapping (types and ranges already checked);
    the cross-field rules each engine enforces are checked here."""
    if k_max < 1:
        raise SpecsightInputError(f"{where}.kind", kind, "needs a drafter with num_speculative_tokens >= 1")
    if kind == "vllm_dynamic":
        rows, w = raw.get("num_speculative_tokens_per_batch_size"), f"{where}.num_speculative_tokens_per_batch_size"
        if not rows:                  # (the bare string `vllm_dynamic` carries no ranges)
            raise SpecsightInputError(w, rows, "required: rows [start, end, K], the first starting at 1")
        return VllmDynamicPolicy(k_max, _vllm_ranges(rows, w))
    if kind == "sglang_adaptive":
        entries = _sglang_entries(raw.get("adaptive_config"), f"{where}.adaptive_config", k_max)
        return SglangAdaptivePolicy(k_max, entries, raw.get("ema_alpha", 0.2), raw.get("warmup_batches", 10),
                                    raw.get("update_interval", 5), raw.get("cuda_graph_bs"))
    sched, mc = raw.get("draft_len_schedule"), raw.get("max_concurrency")
    if sched is not None and mc is not None:
        raise SpecsightInputError(f"{where}.max_concurrency", mc, "TensorRT-LLM refuses max_concurrency together "
                                                                  "with draft_len_schedule (mutually exclusive)")
    if sched is not None:
        sched = _trtllm_schedule(sched, f"{where}.draft_len_schedule", k_max)
    return TrtllmSchedulePolicy(k_max, sched, mc, raw.get("acceptance_window"), raw.get("acceptance_length_threshold"))


def _vllm_ranges(rows: Iterable[Sequence[int]], where: str) -> list[tuple[int, int, int]]:
    """vLLM's checks: start <= end, ranges not overlapping, the first starting at 1 (K >= 0 and
    positive bounds: the schema)."""
    out = sorted((int(a), int(b), int(k)) for a, b, k in rows)
    prev_end = 0
    for a, b, k in out:
        if a > b:
            raise SpecsightInputError(where, [a, b, k], "range start must be <= end (vLLM)")
        if a <= prev_end:
            raise SpecsightInputError(where, [a, b, k],
                                      f"ranges must not overlap (previous ends at {prev_end}; vLLM)")
        prev_end = b
    if out[0][0] != 1:
        raise SpecsightInputError(where, out[0], "the first range must start at 1 (vLLM)")
    return out


def _sglang_entries(entries: Iterable[Mapping[str, Any]] | None, where: str, k_max: int) -> list[tuple]:
    """(batch_size, steps, up, down, ceiling) per key. The default ladder keeps the steps up to
    the drafter's num_speculative_tokens; a given step above it is refused."""
    if entries is None:
        out = []
        for bs, steps, up, down in SGLANG_DEFAULT_CONFIG:
            kept = tuple(s for s in steps if s <= k_max)
            out.append((bs, kept, up, down, 0.0))
        return out
    out, seen = [], set()
    for i, e in enumerate(entries):
        bs = e["batch_size"]
        if bs in seen:
            raise SpecsightInputError(f"{where}[{i}].batch_size", bs, "each batch-size key once")
        seen.add(bs)
        steps = e["candidate_steps"]
        if max(steps) > k_max:
            raise SpecsightInputError(f"{where}[{i}].candidate_steps", steps,
                                      f"steps must be <= the drafter's num_speculative_tokens ({k_max})")
        out.append((bs, tuple(steps), e.get("up_hysteresis", 0.0), e.get("down_hysteresis", SGLANG_DOWN_HYSTERESIS),
                    e.get("ceiling_coeff", 0.0)))
    return out


def _trtllm_schedule(rows: Iterable[Sequence[int]], where: str, k_max: int) -> list[tuple[int, int]]:
    """TensorRT-LLM's checks: bounds distinct, every draft length <= max_draft_len, and the
    smallest bound's draft length equal to it."""
    out = sorted((int(b), int(k)) for b, k in rows)
    for (b0, _), (b1, _) in zip(out, out[1:]):
        if b0 == b1:
            raise SpecsightInputError(where, b1, "each batch_upper_bound once")
    for b, k in out:
        if k > k_max:
            raise SpecsightInputError(where, [b, k], f"draft lengths must be <= max_draft_len, the drafter's "
                                                     f"num_speculative_tokens ({k_max}) (TensorRT-LLM)")
    if out[0][1] != k_max:
        raise SpecsightInputError(where, list(out[0]), f"the smallest batch_upper_bound's draft length must equal "
                                                       f"max_draft_len ({k_max}) (TensorRT-LLM)")
    return out


def check_policy_engine(policy: Policy, engine_kind: str, drafter: Any) -> None:
    """An engine's rule runs only under that engine; SGLang's needs an EAGLE/EAGLE3 chain
    (topk = 1). drafter: the scenario's DrafterSpec (or None)."""
    need = ENGINE_RULES.get(policy.kind)
    if need is None:
        return
    if engine_kind != need:
        raise SpecsightInputError("policy.kind", policy.kind,
                                  f"runs under engine.kind {need} (this scenario: {engine_kind})")
    if policy.kind == "sglang_adaptive" and drafter is not None:
        if drafter.method not in EAGLE_METHODS:     # adaptive_unsupported_reason: EAGLE/EAGLE3 only, topk = 1
            raise SpecsightInputError("drafter.method", drafter.method,
                                      "SGLang adaptive speculation (policy.kind sglang_adaptive) "
                                      "runs EAGLE/EAGLE3 only")
        if drafter.branches > 1:
            raise SpecsightInputError("drafter.tree_branches", drafter.tree_branches,
                                      "SGLang adaptive speculation (policy.kind sglang_adaptive) needs topk = 1 "
                                      "(a chain: tree_branches 1)")
