"""Expert parallelism (EP), data-parallel attention and the link between nodes: the layout of one
replica's GPUs and the closed forms the cost model prices it with (pure functions, floats or numpy
arrays).

A replica is `hardware.tp` GPUs (the engines' `--tp-size`). Its layouts, as the engines name them:

    ep = 1, dp_attention off  every weight tensor-parallel over the tp GPUs (today's pricing)
    ep > 1, dp_attention off  attention and dense layers tensor-parallel; each MoE layer's routed
                              experts split into ep groups of E / ep experts, each expert
                              tensor-parallel over tp / ep GPUs (SGLang --ep-size < --tp-size:
                              moe_tp_size = tp / ep). Every GPU holds every token (TP attention), so
                              a rank picks its experts' tokens locally and the MoE layer's existing
                              all-reduce combines them: no all-to-all.
    ep = tp, dp_attention on  each GPU runs attention (and the dense layers, shared experts, LM
                              head, replicated) for its own 1/tp of the requests; the routed experts
                              are expert-parallel over all tp GPUs, and each MoE layer sends every
                              token to its top-k experts' ranks and back: an all-to-all dispatch and
                              combine (SGLang --tp N --dp-size N --enable-dp-attention --ep-size N
                              --moe-dense-tp-size 1 --enable-dp-lm-head; vLLM --data-parallel-size N
                              --enable-expert-parallel at tensor-parallel size 1, where the expert
                              layers form one EP group of size DP x TP).

Sources: SGLang server arguments (docs.sglang.io, "server arguments": --ep-size, --dp-size,
--enable-dp-attention "DP for attention, TP for FFN"), SGLang's "DP, DPA" guide (DP attention
for MLA models, whose one latent KV head tensor parallelism copies on every rank), SGLang's Expert
Parallelism page (--moe-a2a-backend deepep: all-to-all dispatch and combine); vLLM's Data Parallel
Deployment and Expert Parallel Deployment pages (docs.vllm.ai: --data-parallel-size,
--enable-expert-parallel, expert layers form a DP x TP group).

Under uniform routing a rank's share of the expert work does not depend on the layout: T tokens
with top-k routing touch experts_touched(E, 1 - k/E, T) = E (1 - (1 - k/E)^T) distinct experts of
a layer in expectation; a rank of an ep-way split holds E / ep of them and reads 1 / ep of the
touched ones, each at 1 / (tp / ep) of its bytes: 1 / tp of the touched experts' bytes, as under
tensor parallelism. EP changes the price through the all-to-all, the weights and KV each GPU holds
(data-parallel attention replicates the non-expert weights and splits the requests' KV), and the
links the collectives cross (`ring_link`, `all_to_all_s_per_byte`). What it leaves out: routing
imbalance (the busiest rank sets the layer's time; EPLB's redundant experts), DeepEP's dedup of a
token's copies bound for one rank, two-batch overlap of communication with compute.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..common.errors import SpecsightInputError, require_int

if TYPE_CHECKING:
    from ..hardware.hardware import Interconnect
    from .model_spec import ModelSpec

# FP8 dispatch, BF16 combine: DeepEP's kernels as DeepSeek-V3 serves them (deepseek-ai/DeepEP
# README, "Following V3's configuration ... FP8 dispatching, and BF16 combining"; DeepSeek-V3
# Technical Report sec. 3.3.2: activations before the MoE up-projections quantised to FP8 for dispatch).
FP8_DISPATCH_BYTES = 1


@dataclass(frozen=True)
class ParallelLayout:
    """How one replica's `gpus` (hardware.tp) split the model: ep expert-parallel groups, attention
    data-parallel over every GPU or tensor-parallel over all of them, and the NVLink domain size
    (None: one domain holds any number of GPUs)."""
    gpus: int
    ep: int = 1
    dp_attention: bool = False
    gpus_per_node: int | None = None

    @property
    def attention_dp(self) -> int:
        """Ranks that each run attention for their own requests (1: tensor-parallel attention)."""
        return self.gpus if self.dp_attention else 1

    @property
    def attention_tp(self) -> int:
        """GPUs one attention (and dense layer, LM head) is tensor-parallel over."""
        return 1 if self.dp_attention else self.gpus

    @property
    def expert_tp(self) -> int:
        """GPUs one routed expert is tensor-parallel over, inside its EP group."""
        return self.gpus // self.ep

    @property
    def nodes(self) -> int:
        return 1 if self.gpus_per_node is None else -(-self.gpus // self.gpus_per_node)

    @property
    def crosses_node(self) -> bool:
        """True when the replica's GPUs span more than one NVLink domain."""
        return self.nodes > 1


def check_layout(model: ModelSpec, tp: int, ep: int = 1, dp_attention: bool = False,
                 gpus_per_node: int | None = None) -> ParallelLayout:
    """The layout of `model` on tp GPUs, or a SpecsightInputError naming the allowed combinations:
    ep divides tp and the routed experts; ep > 1 needs a MoE model; dp_attention needs ep = tp on
    a MoE model (ep = 1 on a dense one: a replicated dense model per GPU)."""
    tp, ep = require_int("tp", tp, lo=1), require_int("ep", ep, lo=1)
    if not isinstance(dp_attention, bool):
        raise SpecsightInputError("dp_attention", dp_attention, "true or false")
    if ep > 1:
        if not model.is_moe:
            raise SpecsightInputError("ep", ep, f"1: {model.name} has no routed experts")
        if tp % ep or model.num_experts % ep:
            raise SpecsightInputError("ep", ep, f"a divisor of both tp ({tp}) and the {model.name} routed "
                                                f"experts ({model.num_experts})")
    if dp_attention and model.is_moe and ep != tp:
        raise SpecsightInputError("ep", ep, f"equal to tp ({tp}) with dp_attention: the routed experts are "
                                            f"expert-parallel over every attention rank")
    return ParallelLayout(tp, ep, dp_attention, gpus_per_node)


def experts_touched(num_experts: float, keep: float, tokens: float | np.ndarray) -> float | np.ndarray:
    """Expected distinct experts a layer's tokens touch under uniform top-k routing:
    E (1 - (1 - k / E)^T), keep = 1 - k / E. The one writing of the expert-coverage form
    (CostModel's routed-expert bytes)."""
    return num_experts * (1.0 - keep ** tokens)


def expert_bytes_per_rank(model: ModelSpec, tokens: float | np.ndarray, layout: ParallelLayout,
                          bytes_per_weight: float) -> float | np.ndarray:
    """Routed-expert weight bytes one GPU reads in a pass of `tokens` tokens, all MoE layers: its
    E / ep experts, of which experts_touched / ep are touched in expectation, each at
    1 / expert_tp of its weights."""
    touched = experts_touched(model.num_experts, 1.0 - model.experts_per_token / model.num_experts, tokens)
    return (model.num_moe_layers * touched / layout.ep * model.expert_params * bytes_per_weight
            / layout.expert_tp)


def all_to_all_bytes(tokens: float | np.ndarray, top_k: int, hidden: int, bytes_per_elem: float,
                     ep: int) -> float | np.ndarray:
    """Bytes one rank sends in one dispatch (or combine) of one MoE layer for `tokens` of its own
    tokens: each token's top_k copies of a hidden-size vector, the (ep - 1) / ep of them whose
    expert lives on another rank (uniform routing)."""
    return tokens * top_k * hidden * bytes_per_elem * (ep - 1) / ep


def link_fractions(ep: int, gpus_per_node: int | None) -> tuple[float, float]:
    """Of the bytes a rank sends to the other ep - 1 ranks, the fractions that stay inside its
    NVLink domain and that leave the node (ranks packed node by node, uniform destinations)."""
    if ep <= 1:
        return 0.0, 0.0
    local = ep if gpus_per_node is None else min(ep, gpus_per_node)
    return (local - 1) / (ep - 1), (ep - local) / (ep - 1)


def all_to_all_s_per_byte(ep: int, ic: Interconnect) -> float:
    """Seconds per byte a rank sends in an all-to-all: NVLink and the inter-node NICs carry their
    shares at once (DeepEP forwards NVLink and RDMA traffic concurrently), so the slower share sets
    the time: max(f_nvlink / B_nvlink, f_internode / B_internode)."""
    intra, inter = link_fractions(ep, ic.gpus_per_node)
    t = intra / (ic.bandwidth_gb_s * 1e9)
    if inter:
        t = max(t, inter / (_internode(ic)[0]))
    return t


def collective_latency_s(gpus: int, ic: Interconnect) -> float:
    """The fixed seconds of one collective over `gpus` ranks: the inter-node latency once it
    crosses a node, else the NVLink one (ring_link's)."""
    return ring_link(gpus, ic)[1]


def ring_link(gpus: int, ic: Interconnect) -> tuple[float, float]:
    """(bytes/s, latency s) a ring all-reduce over `gpus` ranks runs at: the NVLink figures inside
    one domain; past it every ring crosses the per-GPU NICs, the slowest link of the ring."""
    if ic.gpus_per_node is not None and gpus > ic.gpus_per_node:
        return _internode(ic)
    return ic.bandwidth_gb_s * 1e9, ic.latency_us * 1e-6


def _internode(ic: Interconnect) -> tuple[float, float]:
    if ic.internode_bandwidth_gb_s is None or ic.internode_latency_us is None:
        raise SpecsightInputError("interconnect.internode_bandwidth_gb_s", ic.internode_bandwidth_gb_s,
                                  "required (with internode_latency_us) for a degree beyond gpus_per_node "
                                  f"({ic.gpus_per_node})")
    return ic.internode_bandwidth_gb_s * 1e9, ic.internode_latency_us * 1e-6
