"""A scenario's `disaggregation:` block: prefill and decode pools (xPyD) and the link between them.

    disaggregation:
      prefill: {instances: 2, tp: 1}             # gpu, max_num_seqs, max_num_batched_tokens: the
      decode: {instances: 6, tp: 2}              # scenario's hardware/engine values unless given
      link: auto                                 # nvlink | network | auto

Each pool is the scenario with its own hardware.gpu, hardware.tp, hardware.replicas (instances)
and engine limits (`pool_source`); the prefill pool never speculates, and runs the drafter over
each prompt chunk (holding its weights and KV) only where the decode pool's engine moves the
drafter's KV (run/disaggregated.py prefill_drafts). The KV transfer of a request
(`transfer_s`): latency + prompt tokens x KV bytes per token per GPU / link bandwidth per GPU, each
GPU of a tensor-parallel group sending its own shard in parallel (the larger of the two pools'
per-GPU shards). The link: NVLink within a node (the profile's interconnect.bandwidth_gb_s,
latency_us), the inter-node network otherwise (internode_bandwidth_gb_s, internode_latency_us:
one NIC per GPU); `auto` is NVLink when both pools fit in one node (gpus_per_node), else the
network. The drafter's own KV is transferred with the target's (its bytes per token are added)
where the decode pool's engine moves it, and rebuilt on the decode instance where it does not
(EngineDef.drafter_kv_transferred; run.py drafter_kv_transferred; docs/simulator.md).
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..common.errors import SpecsightInputError
from ..common.limits import MAX_BATCHED_TOKENS, MAX_GB, MAX_REPLICAS, MAX_SEQS, path_field
from ..common.schema import Float, Int, Section, Str

LINKS = ("auto", "nvlink", "network")


@dataclass(frozen=True)
class Link:
    """The link a KV transfer crosses, per GPU."""
    kind: str
    bandwidth_gb_s: float      # GB/s per GPU per direction
    latency_s: float

    def transfer_s(self, kv_bytes: float) -> float:
        return self.latency_s + kv_bytes / (self.bandwidth_gb_s * 1e9)


def pool_source(source: Mapping[str, Any], pool: str, keep_drafter: bool = False) -> dict[str, Any]:
    """The scenario mapping of one pool: its instances, GPU, TP and engine limits in place of the
    scenario's; the prefill pool never speculates (policy off), and holds the drafter only with
    `keep_drafter` (the decode pool's engine moves the drafter's KV: its prefill server runs the
    drafter over the prompt). A pool the block leaves out is the schema's default: one instance
    with the scenario's values."""
    p = source["disaggregation"].get(pool) or {}
    raw = copy.deepcopy(dict(source))
    raw.pop("disaggregation", None)
    hw = dict(raw.get("hardware") or {})
    hw["replicas"] = p.get("instances", 1)
    for key in ("tp", "gpu"):
        if p.get(key) is not None:
            hw[key] = p[key]
    raw["hardware"] = hw
    eng = dict(raw.get("engine") or {})
    for key in ("max_num_seqs", "max_num_batched_tokens", "num_gpu_blocks"):
        if p.get(key) is not None:
            eng[key] = p[key]
    if pool == "decode" and eng.get("router") == "prefix_aware":
        eng["router"] = "least_outstanding"
    if pool == "decode":
        eng["prefix_caching"] = False
    raw["engine"] = eng
    if pool == "prefill":
        if not keep_drafter:
            for key in ("drafter", "acceptance"):
                raw.pop(key, None)
        raw["policy"] = {"kind": "off"}
    return raw


def pool_link(raw: Mapping[str, Any], profile: Any, gpus: int) -> Link:
    """The link between the pools from the (prefill) GPU profile, `gpus` the two pools' GPUs in all."""
    ic = profile.interconnect
    kind = raw.get("link") or "auto"
    if kind == "auto":
        kind = "nvlink" if ic.gpus_per_node is None or gpus <= ic.gpus_per_node else "network"
    if kind == "network":
        if ic.internode_bandwidth_gb_s is None:
            raise SpecsightInputError("disaggregation.link", kind, f"nvlink, or a profile with inter-node links "
                                      f"({profile.name} has no interconnect.internode_bandwidth_gb_s)")
        bw, lat_us = float(ic.internode_bandwidth_gb_s), float(ic.internode_latency_us or 0.0)
    else:
        bw, lat_us = float(ic.bandwidth_gb_s), float(ic.latency_us)
    if raw.get("bandwidth_gb_s") is not None:
        bw = float(raw["bandwidth_gb_s"])
    if raw.get("latency_us") is not None:
        lat_us = float(raw["latency_us"])
    return Link(kind, bw, lat_us * 1e-6)


def check_disaggregation(raw: Mapping[str, Any] | None, hardware: Any) -> None:
    if raw is None:
        return
    if hardware.is_fixed:
        raise SpecsightInputError("disaggregation", "hardware.kind fixed", "a GPU profile (hardware.kind roofline): "
                                  "the KV transfer is priced from the model's KV bytes and the link")
    if hardware.replicas != 1:
        raise SpecsightInputError("hardware.replicas", hardware.replicas, "1 with disaggregation (the pools' "
                                  "instances say how many)")


_POOL = {
    "instances": Int(doc="instances in the pool", lo=1, hi=MAX_REPLICAS, default=1),
    "tp": Int(doc="tensor-parallel GPUs per instance (default: hardware.tp)", lo=1, hi=1024, nullable=True),
    "gpu": path_field("GPU profile (default: hardware.gpu)", nullable=True),
    "max_num_seqs": Int(doc="running sequences per instance (default: engine's)", lo=1, hi=MAX_SEQS, nullable=True),
    "max_num_batched_tokens": Int(doc="tokens per iteration (default: engine's)", lo=1, hi=MAX_BATCHED_TOKENS,
                                  nullable=True),
    "num_gpu_blocks": Int(doc="override the KV capacity per instance", unit="blocks", lo=1, hi=10 ** 12,
                          nullable=True),
}
DISAGGREGATION = Section(doc="prefill/decode disaggregation: two pools and the KV link (simulator/scenario/"
                             "disagg_spec.py)", nullable=True, keys={
    "prefill": Section(doc="the prefill pool (no speculation; the drafter where its KV is moved)", keys=_POOL),
    "decode": Section(doc="the decode pool (speculation runs here)", keys=_POOL),
    "link": Str(doc="the KV link: nvlink (one node), network (inter-node NIC per GPU), auto (nvlink when both "
                    "pools fit in one node)", choices=LINKS, default="auto"),
    "bandwidth_gb_s": Float(doc="override the link's bandwidth per GPU", unit="GB/s", lo=1e-3, hi=MAX_GB,
                            nullable=True),
    "latency_us": Float(doc="override the link's latency per transfer", unit="us", lo=0.0, hi=1e9, nullable=True),
})
