"""Expert parallelism, data-parallel attention and the inter-node link (simulator/models/moe_parallel.py),
against hand computation on DeepSeek-V3 (58 MoE layers of 256 routed experts, top-8, hidden 7168,
MLA) over H200 nodes of 8 GPUs (hardware_profiles/h200-sxm.yaml: NVLink 450 GB/s, 20 us; inter-node
50 GB/s, 10 us)."""
from __future__ import annotations

import dataclasses

import pytest

from simulator.common.errors import SpecsightInputError
from simulator.costs.cost_model import CostModel
from simulator.costs.kv_cache import kv_budget
from simulator.costs.pass_shape import PassShape
from simulator.hardware.hardware import load_profile
from simulator.models.catalog import load_model
from simulator.models.moe_parallel import (
    ParallelLayout,
    all_to_all_bytes,
    all_to_all_s_per_byte,
    check_layout,
    expert_bytes_per_rank,
    link_fractions,
)
from simulator.scenario.hardware_spec import HardwareSpec

H200 = load_profile("h200-sxm")
DSV3 = load_model("deepseek-v3")
N_MOE, E, K, D = 58, 256, 8, 7168


def _decode(batch: int, context: int = 1000) -> PassShape:
    return PassShape(num_seqs=batch, num_tokens=batch, sum_context=batch * context,
                     sum_attn_pairs=batch * (context + 1), num_logits=batch)


def test_model_numbers_the_hand_values_use():
    assert (DSV3.num_moe_layers, DSV3.num_experts, DSV3.experts_per_token, DSV3.hidden_size) == (N_MOE, E, K, D)
    ic = H200.interconnect
    assert (ic.gpus_per_node, ic.internode_bandwidth_gb_s, ic.internode_latency_us) == (8, 50, 10)


def test_all_to_all_volume_by_hand():
    # 128 tokens on a rank, 8 copies each of 7168 FP8 bytes, 15 of 16 ranks elsewhere
    assert all_to_all_bytes(128, 8, 7168, 1, 16) == 128 * 8 * 7168 * 15 / 16 == 6_881_280
    assert all_to_all_bytes(128, 8, 7168, 1, 1) == 0.0


def test_link_fractions_and_crossing_node_detection():
    assert link_fractions(16, 8) == (7 / 15, 8 / 15)
    assert link_fractions(8, 8) == (1.0, 0.0)
    assert link_fractions(16, None) == (1.0, 0.0)
    assert ParallelLayout(16, gpus_per_node=8).crosses_node and ParallelLayout(16, gpus_per_node=8).nodes == 2
    assert not ParallelLayout(8, gpus_per_node=8).crosses_node
    assert not ParallelLayout(16).crosses_node                  # no gpus_per_node: one domain
    assert all_to_all_s_per_byte(16, H200.interconnect) == (8 / 15) / 50e9      # the NICs are the slower share
    assert all_to_all_s_per_byte(8, H200.interconnect) == 1.0 / 450e9


def test_tensor_parallel_ring_crosses_to_the_internode_link_past_one_node():
    tp8, tp16 = CostModel(DSV3, H200, tp=8, dtype="fp8"), CostModel(DSV3, H200, tp=16, dtype="fp8")
    assert (tp8.link_bytes_s, tp8.ring_latency_s) == (450e9, 20 * 1e-6)
    assert (tp16.link_bytes_s, tp16.ring_latency_s) == (50e9, 10 * 1e-6)
    one_domain = dataclasses.replace(H200, interconnect=dataclasses.replace(
        H200.interconnect, gpus_per_node=None, internode_bandwidth_gb_s=None, internode_latency_us=None))
    assert CostModel(DSV3, one_domain, tp=16, dtype="fp8").link_bytes_s == 450e9


def test_all_to_all_per_pass_by_hand():
    cm = CostModel(DSV3, H200, tp=16, dtype="fp8", ep=16, dp_attention=True)
    T = 256                                              # 16 tokens per GPU
    a2a = cm.breakdown(_decode(T)).ops["all_to_all"]
    per_gpu = T / 16
    hand_bytes = N_MOE * per_gpu * K * D * (1 + 2) * 15 / 16      # FP8 dispatch + BF16 combine
    assert a2a.bytes == pytest.approx(hand_bytes, rel=1e-12)
    hand_s = hand_bytes * (8 / 15) / 50e9 + 2 * N_MOE * 10e-6
    assert a2a.time_s == pytest.approx(hand_s, rel=1e-12)
    assert "allreduce" not in cm.breakdown(_decode(T)).ops      # attention TP 1: no all-reduce
    # within one node (EP8) the NVLink figures price it
    cm8 = CostModel(DSV3, H200, tp=8, dtype="fp8", ep=8, dp_attention=True)
    a8 = cm8.breakdown(_decode(T)).ops["all_to_all"]
    assert a8.time_s == pytest.approx(N_MOE * (T / 8) * K * D * 3 * 7 / 8 / 450e9 + 2 * N_MOE * 20e-6, rel=1e-12)


def test_expert_bytes_per_rank_by_hand_and_the_cost_models():
    P = DSV3.expert_params
    one = expert_bytes_per_rank(DSV3, 1, ParallelLayout(16, ep=16, dp_attention=True), 1)
    assert one == pytest.approx(N_MOE * (K / 16) * P, rel=1e-12)   # one token: 8 experts, 1/16 of them here
    for T in (1, 64, 4096):
        for tp, ep, dp in ((16, 16, True), (16, 4, False), (8, 1, False)):
            cm = CostModel(DSV3, H200, tp=tp, dtype="fp8", ep=ep, dp_attention=dp)
            want = expert_bytes_per_rank(DSV3, T, cm.layout, 1)
            assert cm.breakdown(_decode(T)).ops["moe_experts"].bytes == pytest.approx(want, rel=1e-12)
            # E/ep experts at 1/expert_tp of their bytes: 1/tp of the touched bytes whatever ep is
            assert want == pytest.approx(N_MOE * E * (1 - (1 - K / E) ** T) * P / tp, rel=1e-12)


def test_expert_parallelism_without_dp_attention_prices_as_tensor_parallelism():
    shape = _decode(64)
    base = CostModel(DSV3, H200, tp=8, dtype="fp8").shape_time_s(shape)
    for ep in (2, 4, 8):
        assert CostModel(DSV3, H200, tp=8, dtype="fp8", ep=ep).shape_time_s(shape) == pytest.approx(base, rel=1e-12)


def test_kv_capacity_with_and_without_dp_attention():
    tp, dp = (CostModel(DSV3, H200, tp=16, dtype="fp8", ep=16, dp_attention=flag) for flag in (False, True))
    latent = DSV3.num_layers * DSV3.kv_elems_per_token() * 2            # bf16 latent + rope key, all layers
    assert tp.kv_bytes_per_token == latent                               # MLA under TP: a copy on every GPU
    assert dp.kv_bytes_per_token == pytest.approx(latent / 16, rel=1e-12)   # each GPU: its own requests
    routed = N_MOE * E * DSV3.expert_params
    assert dp.weight_bytes_per_gpu == pytest.approx(DSV3.params_total - routed + routed / 16, rel=1e-12)
    kw = dict(block_size=16, gpu_memory_utilization=0.9, activation_reserve_bytes=4e9)
    usable = 141e9 * 0.9
    for cm in (tp, dp):
        b = kv_budget(cm, 0.0, 0.0, **kw)
        assert b.num_blocks == int((usable - cm.weight_bytes_per_gpu - 4e9) // (16 * cm.kv_bytes_per_token))
    ratio = kv_budget(dp, 0.0, 0.0, **kw).capacity_tokens / kv_budget(tp, 0.0, 0.0, **kw).capacity_tokens
    hand = 16 * (usable - dp.weight_bytes_per_gpu - 4e9) / (usable - tp.weight_bytes_per_gpu - 4e9)
    assert ratio == pytest.approx(hand, rel=1e-3)


def test_dp_attention_splits_attention_and_replicates_dense_weights():
    tp, dp = (CostModel(DSV3, H200, tp=16, dtype="fp8", ep=16, dp_attention=flag) for flag in (False, True))
    assert dp.linear_bytes == pytest.approx(16 * tp.linear_bytes, rel=1e-12)     # attention, dense, shared: whole
    assert dp.linear_flops_per_token == tp.linear_flops_per_token               # 1/16 of the tokens each
    assert dp.attn_flops_per_pair == tp.attn_flops_per_pair
    assert dp.lm_head_bytes == pytest.approx(16 * tp.lm_head_bytes, rel=1e-12)


@pytest.mark.parametrize("tp, ep, dp, field", [
    (12, 12, False, "ep"),      # 256 experts do not split 12 ways
    (16, 3, False, "ep"),       # 3 does not divide tp
    (16, 8, True, "ep"),        # dp_attention needs ep = tp
])
def test_layout_refusals(tp, ep, dp, field):
    with pytest.raises(SpecsightInputError) as e:
        check_layout(DSV3, tp, ep, dp)
    assert e.value.field == field


def test_expert_parallelism_needs_routed_experts_and_a_divisor_of_tp():
    with pytest.raises(SpecsightInputError, match="no routed experts"):
        check_layout(load_model("llama-3.1-8b"), 2, 2)
    with pytest.raises(SpecsightInputError) as e:
        HardwareSpec(gpu="h200-sxm", tp=16, ep=3)
    assert e.value.field == "hardware.ep"
    with pytest.raises(SpecsightInputError):
        HardwareSpec(gpu="h200-sxm", tp=16, ep=8, dp_attention=True)
    with pytest.raises(SpecsightInputError):
        HardwareSpec(kind="fixed", target_step_s=0.01, tp=2, ep=2)


def test_internode_keys_come_together():
    ic = dataclasses.replace(H200.interconnect, internode_latency_us=None)
    with pytest.raises(SpecsightInputError, match="or none"):
        dataclasses.replace(H200, interconnect=ic)


def test_the_shipped_scenario_resolves_target_and_mtp_drafter_in_one_layout():
    from simulator.scenario.resolve import resolve_deployment
    from simulator.scenario.scenario import load_scenario
    sc = load_scenario("scenarios/deepseek-v3-2node-ep-mtp.yaml")
    dep = resolve_deployment(sc)
    cm, dc = dep.step_cost.cm, dep.drafter.draft_cost
    assert (cm.layout.gpus, cm.layout.ep, cm.layout.dp_attention, cm.layout.crosses_node) == (16, 16, True, True)
    assert (dc.layout.ep, dc.layout.dp_attention) == (16, True)              # the MTP block's experts and KV too
    mtp_latent = dc.model.num_layers * dc.model.kv_elems_per_token() * 2
    assert dep.kv.kv_bytes_per_token == pytest.approx((cm.kv_bytes_per_token * 16 + mtp_latent) / 16, rel=1e-12)


def test_a_real_engine_refuses_expert_parallel_layouts():
    from simulator.scenario.resolve import resolve_deployment
    from simulator.scenario.scenario import load_scenario
    sc = load_scenario("scenarios/deepseek-v3-2node-ep-mtp.yaml")
    with pytest.raises(SpecsightInputError) as e:
        resolve_deployment(dataclasses.replace(sc, engine=dataclasses.replace(sc.engine, kind="sglang")))
    assert e.value.field == "hardware.ep"
