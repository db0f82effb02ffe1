"""`breakeven --metric capacity` and the qps axis's capacity line, on the fixed-cost replica of
test_saturation.py, whose plain decoding serves at most MU requests/s.

At saturation every one of the SEQS slots is busy, so capacity is tokens per slot-second: plain
decoding emits 1 token per TARGET_S, a K-draft round E(alpha, K) = (1 - alpha^(K+1)) / (1 - alpha)
tokens per TARGET_S + K x DRAFT_S. The capacity speedup is then E x TARGET_S / (TARGET_S + K x
DRAFT_S), which crosses 1 where the decode speedup of Leviathan et al. does (the prefill
iteration each request also spends is the same with and without speculation).
"""
from __future__ import annotations

import json

import pytest
from scenario_files import write_scenario
from scipy.optimize import brentq
from test_saturation import DRAFT_S, MU, SATURATING, TARGET_S

from specsight.cli import main
from specsight.studies.breakeven.study import breakeven
from specsight.studies.plan.study import capacity_plan

K = 3


def closed_form_alpha(k: int) -> float:
    return brentq(lambda a: (1 - a ** (k + 1)) / (1 - a) * TARGET_S / (TARGET_S + k * DRAFT_S) - 1.0, 1e-9, 0.999)


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return write_scenario(tmp_path_factory.mktemp("cap") / "sat.yaml", SATURATING,
                          "How many requests/s within the SLO, with and without drafts? (test)")


def test_capacity_breakeven_alpha_is_the_closed_form(path):
    res = breakeven(path, axis="alpha", values=[0.3, 0.5, 0.7, 0.9], ks=[K], metric="capacity", workers=1,
                    progress=False)
    assert res.metric == "capacity" and res.frame["error"].eq("").all()
    be = res.verdict.breakeven[f"K={K}"]
    assert be == pytest.approx(closed_form_alpha(K), abs=0.03)       # 0.390
    plain = res.frame["base_capacity_qps_per_gpu"]
    assert plain.nunique() == 1                                     # alpha does not change plain decoding
    # below MU the queue is stable, above 1.1 MU it grows by > 1.25 requests/s (test_saturation.py)
    assert 0.7 * MU < plain.iloc[0] < 1.1 * MU
    assert list(res.frame.sort_values("alpha")["speedup"]) == sorted(res.frame["speedup"])   # rises with alpha
    assert res.verdict.best_k == {"0.3": 0, "0.5": K, "0.7": K, "0.9": K}


def test_the_qps_axis_line_is_plans_search(path, capsys, tmp_path):
    """The capacities beside a qps study come from capacity_plan's search: the same probes give
    the same rate."""
    res = breakeven(path, axis="qps", values=[6, 12], ks=[K], workers=1, progress=False)
    cap = res.capacity
    assert cap["tolerance"] == 0.1 and cap["slo"] == {"tpot_ms_p99": 30, "ttft_ms_p99": None}
    plan = capacity_plan(path, target_qps=10, policies=["off", "static"], tolerance=0.1, price_per_gpu_hour=1.0,
                         workers=1, progress=False)
    assert cap["capacities"]["plain"]["capacity_qps_per_replica"] == plan.rows[0]["max_qps_per_replica"]
    assert cap["capacities"][f"K={K}"]["capacity_qps_per_replica"] == plan.rows[1]["max_qps_per_replica"]
    assert cap["capacities"][f"K={K}"]["vs_plain"] == pytest.approx(plan.rows[1]["capacity_vs_off"])
    assert cap["best_k"] == (K if plan.rows[1]["capacity_vs_off"] > 1 else 0)
    rc = main(["breakeven", str(path), "--axis", "qps", "--values", "6,12", "--k", str(K), "--out", str(tmp_path),
               "--workers", "1", "--no-progress", "--json"])
    obj = json.loads(capsys.readouterr().out)
    assert rc == 0 and obj["capacity"]["capacities"]["plain"]["capacity_qps_per_gpu"] == pytest.approx(
        plan.rows[0]["max_qps_per_replica"])


@pytest.mark.parametrize("argv, needle", [
    (["--axis", "qps", "--metric", "capacity"],
     "--axis='qps': with --metric capacity, one of batch, context, alpha, k"),
    (["--axis", "alpha", "--metric", "capacity", "--set", "slo=null"], "needs an SLO"),
    (["--axis", "alpha", "--metric", "capacity", "--axis2", "k", "--values2", "1"], "--axis2"),
    (["--axis", "alpha", "--metric", "capacity", "--tolerance", "0"], "--tolerance"),
])
def test_capacity_input_errors(path, tmp_path, capsys, argv, needle):
    rc = main(["breakeven", str(path), "--out", str(tmp_path), "--workers", "1", "--no-progress", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_capacity_text_and_batch_cap(path, tmp_path, capsys):
    """On the batch axis the value caps the running batch: plain capacity grows with the cap
    (MU = cap / (OUTPUT x TARGET_S)) until something else limits it."""
    rc = main(["breakeven", str(path), "--axis", "batch", "--values", "4,8", "--k", str(K), "--metric", "capacity",
               "--out", str(tmp_path), "--workers", "1", "--no-progress", "--tolerance", "0.1"])
    text = capsys.readouterr().out
    assert rc == 0 and "plain/GPU" in text and "max Poisson requests/s per GPU within the SLO" in text
    import pandas as pd
    df = pd.read_csv(tmp_path / "breakeven_batch.csv").set_index("batch")
    assert df.loc[8, "base_capacity_qps_per_gpu"] > 1.5 * df.loc[4, "base_capacity_qps_per_gpu"]
    assert (tmp_path / "breakeven_batch.png").exists() and not (tmp_path / "latency_throughput_batch.png").exists()
