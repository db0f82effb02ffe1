"""A scenario's `policy:` value: its schema section (POLICY) and the Policy it builds
(`PolicySpec.from_mapping`): static, off, batch_schedule, adaptive, goodput (policies.py), or an
engine's own dynamic-K rule (engine_policies.py)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..common.errors import SpecsightInputError, closest_names, require_int, require_range
from ..common.keys import reject_unknown
from ..common.limits import MAX_K, MAX_LIST, MAX_REPLICAS, MAX_REQUESTS, MAX_SEQS, POS, rate_field
from ..common.schema import REQUIRED, Float, Int, ListOf, OneOf, Pair, Section, Str, Variants, check
from .engine_policies import KEYS, engine_policy
from .policies import (
    ENGINE_RULES,
    KINDS,
    AdaptivePolicy,
    BatchSchedulePolicy,
    GoodputPolicy,
    OffPolicy,
    Policy,
    StaticPolicy,
)

POLICY = OneOf(doc="speculation policy (docs/simulator_models.md); default static with a drafter, else off",
               nullable=True, options=(
    Str(doc="a string: the kind", choices=KINDS),
    Variants(doc="policy", tag="kind", variants={
        "static": {"k": Int(doc="K (default: the drafter's num_speculative_tokens)", lo=0, hi=MAX_K,
                            nullable=True)},
        "off": {},
        "batch_schedule": {"schedule": ListOf(doc="rows [max_batch, K], max_batch increasing", max_len=MAX_LIST,
                                              item=Pair(items=(Int(doc="max_batch", lo=1, hi=MAX_SEQS * MAX_REPLICAS),
                                                               Int(doc="K", lo=0, hi=MAX_K))),
                                              default=REQUIRED)},
        "adaptive": {"up": rate_field("raise K when the acceptance EMA is above", default=0.8),
                     "down": rate_field("lower K when the acceptance EMA is below", default=0.4),
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


class PolicySpec:
    """Builds a Policy from a scenario's `policy:` value."""

    @staticmethod
    def from_mapping(raw: Any, where: str = "policy", k_max: int = 0,
                     prior_alphas: Sequence[float] | np.ndarray | None = None) -> Policy:
        """raw: None (static), a kind name, or a mapping with `kind`. k_max: the drafter's
        num_speculative_tokens. prior_alphas: the acceptance model's alphas(k_max), for goodput."""
        k_max = require_int(f"{where}.k_max", k_max, lo=0)
        raw = check(POLICY, raw, where)      # types, ranges, names: POLICY above
        if raw is None:
            raw = {"kind": "static"}
        if isinstance(raw, str):
            raw = {"kind": raw}
        if not isinstance(raw, Mapping):
            raise SpecsightInputError(where, raw, "a kind name or a mapping {kind: " + "|".join(KINDS) + ", ...}")
        kind = raw.get("kind")
        if kind not in KINDS:
            raise SpecsightInputError(f"{where}.kind", kind, closest_names(str(kind), KINDS))
        if kind in ENGINE_RULES:
            reject_unknown(raw, ("kind",) + KEYS[kind], where)
            return engine_policy(kind, raw, where, k_max)
        keys = {"static": ("k",), "off": (), "batch_schedule": ("schedule",),
                "adaptive": ("up", "down", "ema_decay", "k_min", "k_init"),
                "goodput": ("prior_strength",)}[kind]
        reject_unknown(raw, ("kind",) + keys, where)
        if kind == "static":
            k = None if raw.get("k") is None else require_int(f"{where}.k", raw["k"], lo=0, hi=k_max)
            return StaticPolicy(k_max, k)
        if kind == "off":
            return OffPolicy(k_max)
        if kind == "batch_schedule":
            return BatchSchedulePolicy(k_max, _schedule_rows(raw.get("schedule"), f"{where}.schedule", k_max))
        if kind == "adaptive":
            up = require_range(f"{where}.up", raw.get("up", 0.8), 0.0, 1.0)
            down = require_range(f"{where}.down", raw.get("down", 0.4), 0.0, 1.0)
            if down > up:
                raise SpecsightInputError(f"{where}.down", down, f"must be <= up ({up})")
            decay = require_range(f"{where}.ema_decay", raw.get("ema_decay", 0.8), 0.0, 1.0, hi_open=True)
            k_min = require_int(f"{where}.k_min", raw.get("k_min", 1), lo=1, hi=max(1, k_max))
            if k_max < 1:
                raise SpecsightInputError(f"{where}.kind", kind,
                                          "adaptive needs a drafter with num_speculative_tokens >= 1")
            k_init = require_int(f"{where}.k_init", raw.get("k_init", k_max), lo=k_min, hi=k_max)
            return AdaptivePolicy(k_max, up, down, decay, k_min, k_init)
        strength = require_range(f"{where}.prior_strength", raw.get("prior_strength", 10.0), 0.0, lo_open=True)
        return GoodputPolicy(k_max, prior_alphas, strength)


def _schedule_rows(rows: Any, where: str, k_max: int) -> tuple[tuple[int, int], ...]:
    """[[max_batch, k], ...] with max_batch strictly increasing and 0 <= k <= k_max."""
    if isinstance(rows, (str, bytes, Mapping)) or not hasattr(rows, "__len__") or len(rows) == 0:
        raise SpecsightInputError(where, rows, "a non-empty list of [max_batch, k] rows, max_batch increasing")
    out: list[tuple[int, int]] = []
    for i, row in enumerate(rows):
        if isinstance(row, (str, bytes, Mapping)) or not hasattr(row, "__len__") or len(row) != 2:
            raise SpecsightInputError(f"{where}[{i}]", row, "must be [max_batch, k]")
        b = require_int(f"{where}[{i}][0]", row[0], lo=1)
        k = require_int(f"{where}[{i}][1]", row[1], lo=0, hi=k_max)
        if out and b <= out[-1][0]:
            raise SpecsightInputError(f"{where}[{i}][0]", b, f"max_batch must increase (previous row {out[-1][0]})")
        out.append((b, k))
    return tuple(out)
