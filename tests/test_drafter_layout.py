"""A drafter in the target's parallel layout (simulator/scenario/resolve.py `_drafter_layout`,
simulator/speculation/drafters.py `Drafter.weight_bytes_per_gpu`): under data-parallel attention every GPU holds
the drafter's non-expert weights whole, as it holds the target's, and 1/tp of its routed experts;
DeepSeek-V3's MTP block (one MoE layer of 256 routed experts, fp8) on the shipped two-node scenario,
by hand from its config's numbers."""
from __future__ import annotations

import pytest

from simulator.scenario.resolve import resolve_deployment
from simulator.scenario.scenario import load_scenario

SCENARIO = "scenarios/deepseek-v3-2node-ep-mtp.yaml"     # tp 16, ep 16, dp_attention, fp8


def _drafter(*overrides: str):
    return resolve_deployment(load_scenario(SCENARIO, list(overrides))).drafter


def test_a_dp_attention_drafter_holds_its_dense_weights_whole():
    d = _drafter()
    m = d.draft_cost.model
    routed = 1 * 256 * 3 * 7168 * 2048                       # one MoE layer: 256 experts of 3 x 7168 x 2048
    assert m.num_moe_layers * m.num_experts * m.expert_params == routed
    from simulator.speculation.drafter_structure import own_params
    params = own_params(d.structure, m, d.config)          # the MTP block without the shared embedding / head
    assert d.weight_bytes_per_gpu() == pytest.approx((params - routed) + routed / 16, rel=1e-12)   # fp8: 1 byte


def test_without_dp_attention_the_drafter_splits_over_tp():
    tp = _drafter("hardware.dp_attention=false")
    dp = _drafter()
    m = dp.draft_cost.model
    routed = m.num_moe_layers * m.num_experts * m.expert_params
    params = tp.weight_bytes_per_gpu() * 16                  # fp8, split 16 ways: the block's own weights
    assert dp.weight_bytes_per_gpu() == pytest.approx(params - routed + routed / 16, rel=1e-12)
    assert dp.weight_bytes_per_gpu() > tp.weight_bytes_per_gpu()
