"""What one forward pass costs, reported per op class (`PassCost` of `OpCost`s: FLOPs, bytes,
seconds and what bounds each), the per-op pieces of the cost model's terms (`OpPieces`), the
report itself (`pass_breakdown`, CostModel.breakdown: the same physics as CostModel.time_s, op by
op), and the soft roofline that adds compute and memory time (simulator/costs/cost_model.py prices them)."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .pass_time import attention_time_s

if TYPE_CHECKING:
    from .cost_model import CostModel
    from .pass_shape import PassShape


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


def pass_breakdown(cm: CostModel, shape: PassShape) -> PassCost:
    """Per op class FLOPs, bytes, seconds and what bounds it of `cm`'s pass of `shape` (scalars
    only): the pieces of time_s's terms (CostModel._pass_terms), the attention roof
    (pass_time.attention_time_s), the all-reduce and the launches as time_s adds them."""
    T, n_logits, F, W = float(shape.num_tokens), float(shape.num_logits), cm.peak_flops_s, cm.bw_bytes_s
    o = cm._pass_terms(T, n_logits, per_op=True)
    c = cm.pass_constants(float(shape.num_seqs))

    def op(flops: float, nbytes: float, seconds: float, bw_bytes_s: float, shown: float = 1.0) -> OpCost:
        """flops: at the dtype's rate (what bounds the op); shown: the FLOPs reported per such FLOP."""
        return OpCost(flops * shown, nbytes, float(seconds),
                      "compute" if flops / F > nbytes / bw_bytes_s else "memory")

    ops = {"linear": op(o.linear_flops, cm.linear_bytes, o.linear_s, o.weights_bytes_s, cm._linear_flops_shown)}
    if o.experts_s is not None:
        ops["moe_experts"] = op(o.experts_flops, o.experts_bytes, o.experts_s, o.weights_bytes_s,
                                cm._moe_flops_shown)
    if o.linear_attn_s is not None:
        ops["linear_attention"] = op(o.linear_attn_flops, o.linear_attn_bytes, o.linear_attn_s, cm.bw_kv_bytes_s)
    attn_flops = cm.attn_flops_per_pair * shape.sum_attn_pairs
    attn_bytes = cm.full_kv_bytes_per_token * (shape.sum_context + 2 * T)
    if cm.window:
        attn_flops += cm.win_flops_per_pair * min(shape.sum_attn_pairs, T * cm.window)
        attn_bytes += cm.win_kv_bytes_per_token * (min(shape.sum_context, c.seqs * (cm.window - 1.0)) + 2 * T)
    ops["attention"] = op(attn_flops, attn_bytes,
                          attention_time_s(c, T, shape.sum_context, shape.sum_attn_pairs), c.kv_bytes_s)
    ops["lm_head"] = op(o.head_flops, cm.lm_head_bytes, o.head_s,
                        cm.bw_gemv_bytes_s if n_logits == 1 else W, cm._head_flops_shown)
    sb, eb = o.sampling_bytes, o.elementwise_bytes
    ops["sampling"] = OpCost(0.0, sb, sb / W + cm.sampling_host_s_per_logit * n_logits, "memory")
    ops["elementwise"] = OpCost(0.0, eb, eb / W, "memory")
    if cm.allreduce_count:
        ops["allreduce"] = OpCost(0.0, cm.allreduce_count * (cm.allreduce_bytes_per_token * T),
                                  cm._ar_per_token_s * T + cm._ar_fixed_s, "network")
    if cm.all_to_all_count:   # (dp_attention: no all-reduce, so _ar_* hold the all-to-all alone)
        ops["all_to_all"] = OpCost(0.0, cm.all_to_all_bytes_per_token * T,
                                   cm._a2a_per_token_s * T + cm._a2a_fixed_s, "network")
    ops["overhead"] = OpCost(0.0, 0.0, cm.launch_overhead_s, "overhead")
    return PassCost(ops)
