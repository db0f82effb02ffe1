"""The sourced host and collective terms of the engine models (simulator/engines/collectives.py,
host.py), each against its source's figure, and the published table's leave-one-source-out
intervals (specsight/studies/published/intervals.py) and their committed coverage."""
from __future__ import annotations

import json
import math
import re

import pytest

from simulator.common.paths import REPO_ROOT
from simulator.engines import host as H
from simulator.engines.collectives import CURVE_US, SIZES, allreduce_s
from simulator.engines.step_cost import kernels
from simulator.scenario.engine_defaults import with_engine_defaults
from simulator.scenario.resolve import resolve_deployment
from simulator.scenario.scenario import load_scenario
from specsight.studies.published import intervals as IV

EAGLE3 = {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3}


def step_cost(kind, version=None, drafter=EAGLE3, tp=1, model="llama-3.1-8b"):
    eng = {"kind": kind, **({"version": version} if version else {})}
    sc = {"name": "t", "seed": 1, "hardware": {"gpu": "h100-sxm", "tp": tp}, "model": model, "drafter": drafter,
          "acceptance": {"model": "iid", "alpha": 0.7}, "engine": eng,
          "workload": {"arrival": {"process": "closed_loop", "concurrency": 1}, "num_requests": 2,
                       "prompt_len": 64, "output_len": 8}}
    return resolve_deployment(with_engine_defaults(load_scenario(sc))).step_cost


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_allreduce_curve_is_sglang_pr_2904_table_at_its_sizes(tp):
    # sizes are float32 elements (4 bytes each): a message of 4 x size bytes takes the table's time
    for size, us in zip(SIZES, CURVE_US[tp]):
        assert allreduce_s(4.0 * size, tp, 1e11) == pytest.approx(us * 1e-6, rel=1e-12)
    # between sizes: linear in log2(size), so the midpoint in log sits halfway
    mid = 4.0 * math.sqrt(SIZES[3] * SIZES[4])
    assert allreduce_s(mid, tp, 1e11) == pytest.approx(0.5e-6 * (CURVE_US[tp][3] + CURVE_US[tp][4]))
    # past the largest size: the largest's time plus the excess bytes at the given rate
    assert allreduce_s(4.0 * SIZES[-1] + 1e6, tp, 1e11) == pytest.approx(CURVE_US[tp][-1] * 1e-6 + 1e-5)


def test_engine_cost_model_prices_tp8_all_reduces_on_the_curve():
    # a 70B decode step at TP 8: 160 all-reduces of 8192 x 2 bytes = 4096 elements: 5.7 us each
    cm = step_cost("sglang", tp=8, model="llama-3.1-70b", drafter=None).cm
    assert cm.allreduce_count == 160
    assert cm.allreduce_pass_s(1) == pytest.approx(160 * 5.7e-6)
    plain = step_cost("ideal", tp=8, model="llama-3.1-70b", drafter=None)
    assert plain is not None      # ideal keeps latency + bytes / bandwidth (the golden cases hold it)


def test_graph_node_launch_is_sglang_issue_29960():
    assert H.GRAPH_NODE_HOST_S == pytest.approx(2.826e-3 / 2876)
    assert H.GRAPH_NODE_HOST_RANGE_S[0] == pytest.approx(0.58e-6)


def test_sglang_v04_round_pays_plans_and_launches_after_syncs():
    c = step_cost("sglang", "v0.4")
    k = 3
    nodes = kernels(c.drafter.draft_cost) * (k - 1) + kernels(c.cm)     # the draft graph (S - 1 steps), the verify
    assert c.round_host_s(1, k) == pytest.approx(nodes * H.GRAPH_NODE_HOST_S + k * H.SGLANG_FLASHINFER_PLAN_S)
    # spec v2 overlaps them: nothing beyond H(B) and its sync
    assert step_cost("sglang", "v0.5-spec-v2").round_host_s(1, k) == 0.0


def test_vllm_v010_constants_are_specdecode_bench_fit():
    assert H.VLLM_V010_DRAFT_STEP_S == pytest.approx(2.135e-3 / 3)
    c = step_cost("vllm", "v1-0.9")
    assert c.engine.host_model(None).work_s(1, 0.0) == pytest.approx(1.207e-3)
    # every draft step of the round takes at least the fitted 0.712 ms
    drafts = [p for p in c.round_passes(1, 3) if p.model == "draft"]
    for p in drafts:
        assert c.pass_s(p, 64.0) / p.count >= H.VLLM_V010_DRAFT_STEP_S - 1e-12


def test_vllm_v014_draft_step_is_pr_32628_slope():
    assert H.VLLM_V014_DRAFT_STEP_S == pytest.approx((4.33 - 3.15) / 5 * 1e-3)


def test_trtllm_020_two_model_draft_step_is_pr_3035():
    c = step_cost("trtllm", "0.20")
    assert H.TRTLLM_TWO_MODEL_DRAFT_STEP_S == pytest.approx(4.7e-3 / 4)
    first = next(p for p in c.round_passes(1, 3) if p.name == "draft_1")
    assert first.graph == "eager" and c.engine.syncs(c.spec) == 1 and not c.engine.overlap(c.spec)
    assert step_cost("trtllm").engine.overlap(step_cost("trtllm").spec)      # 1.1: one-model, overlapped


def _row(name, engine, fam, ids, pub, pred):
    return {"name": name, "engine": engine, "family": fam, "figure": "speedup", "ids": ids, "published": pub,
            "predicted": pred, "residual": math.log(pub / pred)}


def test_interval_leaves_out_every_row_of_the_rows_publication():
    # four rows of publication #1 are far off (residual log 2); four of #2 and #3 are exact. A row of #1
    # is built from #2 / #3 only (a zero-width interval at its prediction), and #2's rows from #3 and #1
    rows = ([_row(f"a{i}", "vllm", "eagle", ["#1"], 2.0, 1.0) for i in range(4)]
            + [_row(f"b{i}", "vllm", "eagle", ["#2"], 1.5, 1.5) for i in range(2)]
            + [_row(f"c{i}", "vllm", "eagle", ["#3", "#9"], 1.2, 1.2) for i in range(2)])
    ivs = IV.loso_intervals(rows)
    assert ivs[0] == pytest.approx([1.0, 1.0])       # #1 never sees its own residuals
    lo, hi = ivs[4]
    assert lo == pytest.approx(1.5) and hi > 1.5 * 1.5               # #2 sees #1's log 2 residuals and #3's zeros
    # a row sharing any one publication id is left out too
    assert IV._pool(rows, None, "vllm", "eagle", "speedup", frozenset(["#9", "#1"])) == [0.0, 0.0]
    assert IV.coverage(rows, ivs)["rows"] == 8


def test_publication_ids_read_from_the_source():
    assert IV.publication_ids("vLLM issue #20780 (TPOT and AL by K); PR #16937") == {"#20780", "#16937"}
    assert IV.publication_ids("SpecDecode-Bench (arXiv 2601.11580)") == {"arXiv 2601.11580"}
    assert IV.publication_ids("SGLang docs") == {"SGLang docs"}


def test_committed_coverage_recomputed_from_the_committed_table():
    doc = json.loads(IV.RESIDUALS_FILE.read_text())
    rows = doc["rows"]
    ivs = IV.loso_intervals(rows)
    for r, iv in zip(rows, ivs):
        assert (r["interval"] is None) == (iv is None)
        if iv is not None:
            assert r["interval"] == pytest.approx(iv, rel=1e-12)
    cov = IV.coverage(rows, ivs)
    assert cov == doc["coverage"]
    page = (REPO_ROOT / "docs" / "validation.md").read_text()
    m = re.search(r"hold the published figure on (\d+) of (\d+) rows", page)
    assert m and (int(m.group(1)), int(m.group(2))) == (cov["inside"], cov["rows"])


def test_ideal_has_no_interval():
    assert IV.interval_for(1.5, "ideal", "eagle3") is None
    assert IV.summary_intervals({"speedup_tpot": 1.5}, "ideal", "eagle3") == {}


def test_moe_layer_fixed_time_reproduces_pr_24700_kernel_times():
    # the fixed part comes from batch 1 alone; the engines' experts op at 2-16 tokens (weight reads of
    # the experts touched + the fixed part) is then a prediction of the PR's other timings
    from simulator.costs.cost_model import CostModel
    from simulator.engines.kernel_floors import MOE_LAYER_FIXED_S, QWEN3_MOE_KERNEL_US
    from simulator.engines.step_cost import engine_profile
    from simulator.hardware.hardware import load_profile
    from simulator.models.catalog import load_model
    assert MOE_LAYER_FIXED_S == pytest.approx(40.44e-6 - 37.748736e6 / 2.68e12)
    m = load_model("qwen3-30b-a3b")
    cm = CostModel(m, engine_profile(load_profile("h100-sxm")), tp=1, dtype="fp8")
    for T, us in QWEN3_MOE_KERNEL_US.items():
        per_layer = cm._pass_terms(float(T), 1.0, per_op=True).experts_s / m.num_moe_layers + MOE_LAYER_FIXED_S
        assert per_layer == pytest.approx(us * 1e-6, rel=0.05 if T > 1 else 1e-3)
