"""The Python API: examples/python_api.py runs, and each study returns the data it documents."""
from __future__ import annotations

import dataclasses
import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("python_api_example", ROOT / "examples" / "python_api.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.run()


def test_simulation_has_its_baseline_and_a_speedup(example):
    sim = example["simulation"]
    assert sim.baseline is not None and len(sim.requests) == 8
    assert example["speedup"] == pytest.approx(sim.summary["output_tokens_per_s"]
                                               / sim.baseline.summary["output_tokens_per_s"])
    assert example["speedup"] > 1.0


def test_breakeven_returns_a_frame_and_a_frozen_verdict(example):
    be = example["breakeven"]
    assert isinstance(be.frame, pd.DataFrame) and len(be.frame) == 3 * 2
    assert set(be.frame["curve"]) == {"K=2", "K=4"} and be.metric == "throughput"
    assert be.frame["error"].eq("").all() and be.frame["analytic_speedup"].notna().all()
    assert example["table"].shape == (3, 2)
    v = example["verdict"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.breakeven = {}
    assert set(v.breakeven) == {"K=2", "K=4"} and set(v.status) == {"K=2", "K=4"}
    # speedup rises with alpha on every curve: each crossing (if any) is upward, inside the axis
    for label, crossings in v.crossings.items():
        assert all(c["direction"] == "up" and 0.2 < c["at"] < 0.8 for c in crossings), label
    assert set(v.best_k) == {"0.2", "0.5", "0.8"}
    assert be.to_dict()["points_total"] == be.points_total == 3 * 2 + 1   # alpha does not change the baseline


def test_analytic_breakeven_per_k(example):
    from specsight.studies.breakeven.analytic import BATCH_GRID
    an = example["analytic"]
    assert len(an.frame) == 2 * len(BATCH_GRID) and set(an.frame["k"]) == {2, 4}
    d = an.to_dict()
    assert set(d["breakeven_batch"]) == {"2", "4"} and d["gpu"] == "h100-sxm"
    assert all(s > 1.0 for s in d["speedup_at_batch1"].values())


def test_sweep_frame_has_one_row_per_point(example):
    sw = example["sweep"]
    assert len(sw.frame) == 4 and sw.errors == 0 and sw.computed == 4
    assert sorted(zip(sw.frame["workload.arrival.concurrency"], sw.frame["drafter.num_speculative_tokens"])) == \
        [(1, 2), (1, 4), (4, 2), (4, 4)]
    assert sw.frame["speedup_output_tokens_per_s"].notna().all()


def test_capacity_plan_rows_and_fleet_arithmetic(example):
    plan = example["plan"]
    assert [r["config"] for r in plan.rows] == ["off (no speculation)", "static K=3"]
    for r in plan.rows:
        assert r["max_qps_per_replica"] > 0
        assert r["replicas"] == math.ceil(plan.target_qps / r["max_qps_per_replica"])
        assert r["gpus"] == r["replicas"] * r["tp"]
    assert list(plan.frame["config"]) == [r["config"] for r in plan.rows] and "probes" not in plan.frame
    assert plan.to_dict()["slo"] == {"tpot_ms_p99": 50, "ttft_ms_p99": 2000}


def test_configuration_search_ranks_and_chooses(example):
    """Every (GPU, K) configuration ranked by $/M output tokens; rank 1 is the chosen one; each
    configuration is priced at its own profile's price per GPU-hour."""
    from simulator.hardware.hardware import load_profile
    s = example["search"]
    assert len(s.rows) == 4 and s.grid == ["hardware.gpu", "drafter.num_speculative_tokens"]
    costs = [r["cost_per_million_output_tokens_usd"] for r in s.rows if r["rank"] is not None]
    assert costs == sorted(costs) and s.chosen is s.rows[0] and s.chosen["rank"] == 1
    for r in s.rows:
        assert r["price_per_gpu_hour"] == load_profile(r["point"]["hardware.gpu"]).price_usd_per_gpu_hour
        if r["status"] == "meets SLO":
            assert r["gpus"] == r["replicas"] * r["tp"] and r["tpot_ms_p99_at_load"] is not None
    assert list(s.frame["config"]) == [r["config"] for r in s.rows] and "probes" not in s.frame


def test_import_specsight_is_light_and_exports_resolve():
    code = ("import sys, specsight; "
            "heavy = [m for m in ('torch', 'pandas', 'simulator', 'matplotlib') if m in sys.modules];"
            " assert not heavy, heavy; print(len([getattr(specsight, n) for n in specsight.__all__]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    import specsight
    assert int(r.stdout) == len(specsight.__all__)
    with pytest.raises(AttributeError):
        _ = specsight.no_such_thing


def test_the_plans_choice_comes_back_as_serving_commands(example):
    """The cheapest row that meets the SLO, as each engine's argv and files (tests/test_deploy.py
    checks the names against the engines' documentation)."""
    chosen, plan = example["deployment"], example["plan"]
    met = [r for r in plan.rows if r["max_qps_per_replica"]]
    cheapest = min(r["cost_per_million_output_tokens_usd"] for r in met)
    row = next(r for r in met if r["config"] == chosen.config)
    assert row["cost_per_million_output_tokens_usd"] == cheapest
    vllm = chosen.deployment["vllm"]
    assert vllm.argv[:3] == ("vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct")
    assert ("--speculative-config" in vllm.argv) == (chosen.config != "off (no speculation)")
    assert dict(chosen.deployment["trtllm"].files)["trtllm.yaml"].startswith("tensor_parallel_size: 4")



def test_the_searchs_choice_comes_back_as_serving_commands(example):
    """The search's rank-1 configuration is deployed with its own grid point: the GPU count and K
    in the vLLM command are the chosen row's."""
    import json
    s, dep = example["search"], example["search_deployment"]
    assert dep.config == s.chosen["config"]
    argv = dep.deployment["vllm"].argv
    assert argv[argv.index("--tensor-parallel-size") + 1] == str(s.chosen["tp"])
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec["num_speculative_tokens"] == s.chosen["point"]["drafter.num_speculative_tokens"]


def test_saturation_and_capacity_come_back_as_data(example):
    """The same rule judges both: a rate below the capacity the search found (a passing rate, so
    its queue did not grow) is not saturated; 32 requests/s, ten times that capacity, is."""
    flags, load = example["flags"].set_index("qps"), example["load"]
    caps = example["capacities"]
    tp = load.capacity["tp"]
    assert set(caps) == {"plain", "K=3"} and set(example["saturates_from"]) == {"plain", "K=3"}
    for name, col in (("plain", "base_saturated"), ("K=3", "saturated")):
        per_replica = caps[name]["capacity_qps_per_gpu"] * tp
        assert per_replica == caps[name]["capacity_qps_per_replica"] and 2 < per_replica < 32 / 5
        assert not flags.loc[2, col] and flags.loc[32, col]
        assert example["saturates_from"][name] == 32
    cap = example["capacity_breakeven"]
    f = cap.frame.set_index("k")
    assert cap.metric == "capacity" and list(f.index) == [1, 3]
    assert (f["speedup"] == f["spec_capacity_qps_per_gpu"] / f["base_capacity_qps_per_gpu"]).all()
    best = int(f["speedup"].idxmax()) if f["speedup"].max() > 1 else 0
    assert set(cap.verdict.best_k.values()) == {best}
