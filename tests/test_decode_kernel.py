"""Uneventful decode rounds in compiled code (simulator/serving/decode_kernel.py): the pass times are the
cost model's bit for bit, and every trajectory is the Python path's (`Replica.KERNEL = False`)."""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
import yaml
from same_run import assert_same_run

from simulator.costs.cost_model import CostModel
from simulator.costs.pass_time import from_row, pass_time_s, steps_time_s, timing_constants
from simulator.hardware.hardware import HARDWARE_DIR, load_profile
from simulator.models.catalog import load_model
from simulator.run import simulate
from simulator.scenario.scenario import load_scenario
from simulator.serving import decode_kernel as dk
from simulator.serving.replica import Replica

pytest.importorskip("numba")
KERNEL = dk.kernel()
# Skipped only when switched off on purpose: with numba installed a kernel that fails to compile
# (kernel() warns and returns None) fails these tests instead of skipping them.
pytestmark = pytest.mark.skipif(os.environ.get("SPECSIGHT_KERNEL", "1") == "0",
                                reason="SPECSIGHT_KERNEL=0: the kernel is switched off")


def test_the_kernel_compiles():
    assert KERNEL is not None, "simulator/serving/decode_kernel.py did not compile (see the warning)"


def test_the_kernels_disk_cache_is_keyed_on_the_physics_sources():
    """numba keys its cache on this module's file and the compiled function's closure: the closure
    holds a hash of pass_time.py and pass_shape.py, so editing either recompiles."""
    assert [c.cell_contents for c in KERNEL.py_func.__closure__] == [dk._source_key()]


def _terms(cm: CostModel, shapes) -> np.ndarray:
    return np.array([cm.terms_row(t, lg) for t, lg in shapes])


def _cost_models():
    h100 = load_profile("h100-sxm")
    eff = h100.efficiency
    yield "soft", CostModel(load_model("llama-3.1-8b"), h100)
    yield "sharp", CostModel(load_model("llama-3.1-8b"), h100,
                             efficiency=dataclasses.replace(eff, roofline_sharpness=float("inf")))
    yield "gemv", CostModel(load_model("llama-3.1-8b"), h100, efficiency=dataclasses.replace(eff, memory_gemv=0.5))
    yield "kv-rate", CostModel(load_model("llama-3.1-8b"), h100,
                               efficiency=dataclasses.replace(eff, memory_gemv=0.5, memory_attention=0.9))
    yield "tp4", CostModel(load_model("llama-3.1-70b"), h100, tp=4)
    yield "moe-fp8", CostModel(load_model("deepseek-v3"), load_profile("h200-sxm"), tp=8, dtype="fp8",
                               kv_dtype="bf16")
    # attention in waves over the multiprocessors (the calibrated H200: one block per sequence and KV head)
    yield "waves", CostModel(load_model("llama-3.1-8b"), load_profile("h200-sxm.calibrated"))
    yield "waves-tp2", CostModel(load_model("llama-3.1-70b"), load_profile("h200-sxm.calibrated"), tp=2)
    # attention by layer type: sliding layers (per-batch constants), linear layers (in the terms),
    # a hybrid of full and sliding layers with MXFP4 experts
    yield "sliding", CostModel(load_model("mistral-7b"), h100)
    yield "sliding-waves", CostModel(load_model("mistral-7b"), load_profile("h200-sxm.calibrated"))
    yield "hybrid-linear", CostModel(load_model("tests/data/layer_types/qwen3-next-80b-a3b.json"), h100, tp=4)
    yield "gpt-oss-mxfp4", CostModel(load_model("tests/data/layer_types/gpt-oss-120b.json"), h100, tp=2)
    # DeepSeek Sparse Attention: the indexer on the full group, the top-k MLA on the windowed one
    yield "dsa-fp8", CostModel(load_model("deepseek-v3.2"), load_profile("h200-sxm"), tp=8, dtype="fp8")


@pytest.fixture(scope="module")
def compiled():
    """pass_time_s and steps_time_s as the compiled rounds run them: on PassConstants read from
    the kernel's row (CostModel.kernel_constants)."""
    import numba

    @numba.njit
    def pass_s(rec, terms, T, ctx, pairs):
        return pass_time_s(from_row(rec), dk.row(terms, 0), T, ctx, pairs)

    @numba.njit
    def steps_s(rec, terms, first, ctx, B, k, nb):
        return steps_time_s(from_row(rec), dk.row(terms, 1), dk.row(terms, 0), first, ctx, B, k, nb)
    return pass_s, steps_s


@pytest.mark.parametrize("name,cm", list(_cost_models()), ids=lambda v: v if isinstance(v, str) else "")
def test_pass_and_draft_step_times_are_the_cost_models_bit_for_bit(name, cm, compiled):
    """The one pass_time_s, compiled, on the kernel's rows gives CostModel.time_s's seconds;
    the rounds' draft steps (compiled and in Python) give steps_time_s's. (Without sliding layers
    the Python path's constants carry no sliding group and the rows carry window 0: both skip it.)"""
    pass_s, steps_s = compiled
    rng = np.random.default_rng(7)
    for _ in range(200):
        B = int(rng.integers(1, 129))
        rec = cm.kernel_constants(B)      # (the replica's constants for B sequences)
        c = cm.pass_constants(B)         # (no sliding layers: () in pass_time_s's form, zeros in the row)
        assert from_row(rec) == (*c[:10], c[10:])
        assert timing_constants(c) == (*c[:10], c[10:] if c.window else ())
        T = B * int(rng.integers(1, 9))
        ctx = int(rng.integers(0, 4096)) * B
        pairs = int(rng.integers(0, 10 ** 9))
        terms = _terms(cm, [(T, T)])
        assert pass_s(rec, terms, T, ctx, pairs) == cm.time_s(T, ctx, pairs, T, B)
        k, branches = int(rng.integers(1, 8)), int(rng.integers(1, 4))
        first = int(rng.integers(B, B * (k + 1) + 1))
        nb = B * branches
        terms = _terms(cm, [(nb, nb), (first, B)])
        want = cm.steps_time_s(first, ctx, B, k, nb)
        assert steps_s(rec, terms, first, ctx, B, k, nb) == want
        c = timing_constants(cm.pass_constants(B))
        assert steps_time_s(c, dk.row(terms, 1), dk.row(terms, 0), first, ctx, B, k, nb) == want


# ---- trajectories ----------------------------------------------------------------------------
def _profile(tmp_path, name, **efficiency):
    raw = yaml.safe_load((HARDWARE_DIR / "h100-sxm.yaml").read_text())
    raw["efficiency"].update(efficiency)
    raw["sources"].update({f"efficiency.{k}": "a test variant" for k in efficiency})
    raw["name"] = name
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(raw))
    return str(p)


def _fixed_ties(arrival):
    # exact binary step costs: 0.625 s rounds; at 0.5 requests/s some end exactly when a request
    # arrives (12 in the open-loop case), where the compiled stretch must stop (t >= peek)
    return {"name": "ties", "seed": 3,
            "hardware": {"kind": "fixed", "target_step_s": 0.25, "draft_step_s": 0.125},
            "model": "llama-3.1-8b",
            "drafter": {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 3},
            "acceptance": {"model": "iid", "alpha": 0.6},
            "workload": {"arrival": arrival, "num_requests": 60, "prompt_len": 4,
                         "output_len": {"dist": "uniform", "low": 1, "high": 200}}}


def _hybrid_linear():
    # Qwen3-Next's shape (36 linear, 12 full layers) drafting for itself: verify passes of K + 1
    # positions whose linear-state traffic is in the terms
    qnext = "tests/data/layer_types/qwen3-next-80b-a3b.json"
    return {"name": "hybrid", "seed": 5, "hardware": {"gpu": "h200-sxm", "tp": 4}, "model": qnext,
            "drafter": {"method": "draft_model", "model": qnext, "num_speculative_tokens": 3},
            "acceptance": {"model": "iid", "alpha": 0.7},
            "workload": {"arrival": {"process": "closed_loop", "concurrency": 16}, "num_requests": 60,
                         "prompt_len": 500, "output_len": 100}}


N = "workload.num_requests=200"
CASES = {
    "eagle3-open-2rep": ("scenarios/llama8b-h100-eagle3-chat.yaml",
                         [N, "workload.arrival={process: poisson, qps: 6}", "hardware.replicas=2",
                          "engine.router=least_outstanding"]),
    "eagle3-tree-branches": ("scenarios/llama8b-h100-eagle3-chat.yaml",
                             [N, "drafter.tree=true", "drafter.tree_branches=2"]),
    "draft-model-closed-loop": ("scenarios/llama8b-h100-draft1b-chat.yaml", [N]),
    "batch-schedule": ("scenarios/llama8b-h100-policies.yaml", [N, "acceptance={model: iid, alpha: 0.75}"]),
    # K = 0 past 6 sequences: plain-decode rounds while the drafter must catch up afterwards
    "batch-schedule-k0": ("scenarios/llama8b-h100-policies.yaml",
                          [N, "acceptance={model: iid, alpha: 0.75}", "policy.schedule=[[6, 2]]"]),
    "speculation-off": ("scenarios/llama8b-h100-eagle3-chat.yaml", [N, "policy.kind=off"]),
    "self-spec-layer-skip": ("scenarios/llama8b-h200-longctx-selfspec.yaml",
                             ["workload.num_requests=40", "drafter.kv_budget_tokens=0", "drafter.layer_fraction=0.5"]),
    "mtp-moe-tp8": ("scenarios/deepseek-v3-h200-mtp.yaml", [N]),
    "kv-pressure": ("scenarios/llama8b-h200-eagle3-batch.yaml", [N, "engine.num_gpu_blocks=600"]),
    # (a profile cannot hold the sharp max() roofline, p = inf: the cost-function test covers it)
    "gemv-and-kv-rates": ("scenarios/llama8b-h100-eagle3-chat.yaml", [N, "hardware.profile={rates}"]),
    # chunked prefill under a small token budget and a tight cache: the admission check's budget
    "chunked-tight-kv": ("scenarios/llama8b-h100-eagle3-chat.yaml",
                         ["workload.num_requests=300", "workload.arrival={process: poisson, qps: 8}",
                          "engine.max_num_batched_tokens=512", "engine.num_gpu_blocks=1000",
                          "workload.prompt_len={dist: lognormal, median: 3000, sigma: 0.5, max: 8000}",
                          "workload.output_len={dist: lognormal, median: 300, sigma: 0.5, max: 1000}"]),
    # attention in waves (the calibrated H200 profile): per-batch KV constants, draft model and EAGLE
    "waves-draft-model": ("scenarios/llama8b-h100-draft1b-chat.yaml", [N, "hardware.profile=h200-sxm.calibrated"]),
    "waves-eagle3-open": ("scenarios/llama8b-h100-eagle3-chat.yaml",
                          [N, "hardware.profile=h200-sxm.calibrated", "workload.arrival={process: poisson, qps: 6}"]),
    # attention by layer type: every layer sliding (W = 4096) past the window, draft and target alike
    "sliding-window-draft": ("scenarios/llama8b-h100-draft1b-chat.yaml",
                             [N, "model=mistral-7b", "drafter.model=mistral-7b", "workload.prompt_len=5000"]),
    # DeepSeek Sparse Attention past its top-k (2048), target and MTP head
    "dsa-mtp": ("scenarios/deepseek-v3-h200-mtp.yaml", [N, "model=deepseek-v3.2", "workload.prompt_len=5000"]),
    "hybrid-linear-draft": (_hybrid_linear(), []),
    "fixed-ties-open": (_fixed_ties({"process": "constant", "qps": 0.5}), []),
    "fixed-ties-closed": (_fixed_ties({"process": "closed_loop", "concurrency": 6, "think_time_s": 0.5}), []),
}


def _run(spec, overrides, kernel, monkeypatch, baseline=True):
    monkeypatch.setattr(Replica, "KERNEL", kernel)
    rounds = [0]
    run_rounds = Replica._kernel_rounds

    def counted(self, start, peek_s, stop_at_finish=False):
        m = run_rounds(self, start, peek_s, stop_at_finish)
        rounds[0] += m
        return m
    monkeypatch.setattr(Replica, "_kernel_rounds", counted)
    sc = load_scenario(spec, overrides) if isinstance(spec, str) else load_scenario(spec)
    return simulate(sc, baseline=baseline, trace=True), rounds[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_rounds_give_the_python_trajectory(case, monkeypatch, tmp_path):
    spec, overrides = CASES[case]
    rates = _profile(tmp_path, "h100-rates", memory_gemv=0.5, memory_attention=0.9)
    overrides = [o.replace("{rates}", rates) for o in overrides]
    a, rounds = _run(spec, overrides, True, monkeypatch)
    b, none = _run(spec, overrides, False, monkeypatch)
    assert none == 0
    # the kernel ran a real share of the rounds (else this test would compare Python with itself;
    # with two replicas a replica's inline stretch ends where the other's iteration does)
    assert rounds > 0.1 * a.summary["num_decode_rounds"], (rounds, a.summary["num_decode_rounds"])
    assert_same_run(a, b)


def test_the_kernel_stays_out_where_it_does_not_apply(monkeypatch):
    # n-gram matches drawn per round, adaptive and goodput policies (they observe every round): the
    # Python path runs every round (the K = 0 baselines would use the kernel: not run here)
    eagle3 = "scenarios/llama8b-h100-eagle3-chat.yaml"
    for path, overrides in (("scenarios/llama70b-tp4-h100-chat-ngram.yaml", ["workload.num_requests=50"]),
                            (eagle3, ["workload.num_requests=50", "policy.kind=adaptive"]),
                            (eagle3, ["workload.num_requests=50", "policy.kind=goodput"])):
        _, rounds = _run(path, overrides, True, monkeypatch, baseline=False)
        assert rounds == 0, path
