"""What one forward pass costs, reported per op class (`PassCost` of `OpCost`s: FLOPs, bytes,
seconds and what bounds each), the per-op pieces of the cost model's terms (`OpPieces`), and the
soft roofline that adds compute and memory time (simulator/cost_model.py prices them)."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


class OpPieces(NamedTuple):
    """The per-op pieces of a pass's terms that depend only on its tokens and logits
    (CostModel._pass_terms(per_op=True)): FLOPs, bytes and roofline seconds of the weight-streaming
    op classes, and the bytes of the memory-bound streams. Routed experts: None without MoE layers."""
    linear_flops: float
    linear_s: float
    experts_flops: float | None
    experts_bytes: float | None
    experts_s: float | None
    weights_bytes_s: float      # the rate the linear and expert weights stream at (matrix-vector at one token)
    head_flops: float
    head_s: float
    sampling_bytes: float
    elementwise_bytes: float
    linear_attn_flops: float | None = None     # linear-attention layers (None without them)
    linear_attn_bytes: float | None = None
    linear_attn_s: float | None = None


@dataclass(frozen=True)
class OpCost:
    flops: float
    bytes: float
    time_s: float
    bound: str   # "memory" | "compute" | "network" | "overhead"


@dataclass(frozen=True)
class PassCost:
    ops: Mapping[str, OpCost]

    @property
    def time_s(self) -> float:
        return float(sum(o.time_s for o in self.ops.values()))

    @property
    def flops(self) -> float:
        return float(sum(o.flops for o in self.ops.values()))

    @property
    def bytes(self) -> float:
        return float(sum(o.bytes for o in self.ops.values() if o.bound in ("memory", "compute")))

    @property
    def bound(self) -> str:
        """'compute' when the compute-bound op classes take longer than the memory-bound ones."""
        t_c = sum(o.time_s for o in self.ops.values() if o.bound == "compute")
        t_m = sum(o.time_s for o in self.ops.values() if o.bound == "memory")
        return "compute" if t_c > t_m else "memory"

    def to_dict(self) -> dict:
        return {"time_s": self.time_s, "flops": self.flops, "bytes": self.bytes, "bound": self.bound,
                "breakdown": {k: vars(v).copy() for k, v in self.ops.items()}}


def soft_roofline(t_compute: float | np.ndarray, t_memory: float | np.ndarray, p: float) -> float | np.ndarray:
    """(t_c^p + t_m^p)^(1/p); p = inf gives max(t_c, t_m). Works on floats and arrays."""
    if math.isinf(p):
        return np.maximum(t_compute, t_memory)
    return (t_compute ** p + t_memory ** p) ** (1.0 / p)
