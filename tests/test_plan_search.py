"""`specsight plan --grid`: the configuration search, its prices, its resumable probes, and the
grids refused before anything runs.

The closed form: on fixed step costs (`hardware.kind: fixed`) plain decoding emits one token per
pass whatever the load, so its TPOT is exactly `target_step_s`: a configuration whose step is
above the TPOT SLO meets it at no rate. Fixed step costs ignore `hardware.tp`, and a price changes
no simulation, so every configuration of one step time has the same capacity C per replica, the
same replicas R = ceil(target / C), and costs R x tp x price: the cheapest is the one with the
smallest tp x price, and the ranking follows tp x price.
"""
from __future__ import annotations

import json
import math
import re

import pytest
from scenario_files import write_scenario

import specsight.studies.shared.points as points_module
from simulator.hardware.hardware import available_profiles, load_profile, profile_from_dict
from specsight.cli import main
from specsight.studies.plan.price import gpu_hour_price
from specsight.studies.plan.search import NO_FIT, plan_search
from specsight.studies.plan.search_outputs import chosen_line

STEP_FAST, STEP_SLOW = 0.01, 0.02      # s per target pass
SLO_TPOT_MS = 15.0                     # between the two: only the fast step can meet it
OUTPUT_TOKENS = 32
TARGET = 40.0                          # requests/s: above one fast replica's capacity (about 27/s)
FIXED = {
    "name": "fixed-search", "seed": 4,
    "hardware": {"kind": "fixed", "target_step_s": STEP_SLOW, "draft_step_s": 0.002},
    "drafter": {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 3},
    "acceptance": {"model": "iid", "alpha": 0.8},
    "workload": {"arrival": {"process": "poisson", "qps": 2}, "num_requests": 120, "prompt_len": 64,
                 "output_len": OUTPUT_TOKENS},
    "engine": {"max_num_seqs": 8, "max_num_batched_tokens": 512},
    "slo": {"tpot_ms_p99": SLO_TPOT_MS, "ttft_ms_p99": 500},
}
GRID = {"hardware.target_step_s": [STEP_FAST, STEP_SLOW], "hardware.tp": [1, 2],
        "pricing.usd_per_gpu_hour": [1.0, 3.0]}


def search(store, grid=GRID, **kw):
    return plan_search(FIXED, TARGET, grid, policies="off", tolerance=0.1, store=store, workers=1, progress=False,
                       **kw)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tmp_path_factory.mktemp("search") / "points.jsonl"


@pytest.fixture(scope="module")
def result(store):
    return search(store)


def test_the_search_finds_the_configuration_the_closed_form_predicts(result):
    rows = {(r["point"]["hardware.target_step_s"], r["point"]["hardware.tp"], r["point"]["pricing.usd_per_gpu_hour"]):
            r for r in result.rows}
    slow = [r for k, r in rows.items() if k[0] == STEP_SLOW]
    fast = [r for k, r in rows.items() if k[0] == STEP_FAST]
    for r in slow:                    # TPOT = 20 ms at every rate: no rate meets 15 ms
        assert r["status"] == "no rate meets SLO" and r["rank"] is None and r["cost_per_hour_usd"] is None
        assert r["limited_by"].startswith(f"TPOT p99 {STEP_SLOW * 1e3:.1f} ms")
    capacity = {r["max_qps_per_replica"] for r in fast}
    assert len(capacity) == 1                        # tp and price change no simulation
    c = capacity.pop()
    replicas = math.ceil(TARGET / c)
    assert replicas >= 2                             # the fleet arithmetic is exercised, not one replica
    for (step, tp, price), r in rows.items():
        if step == STEP_FAST:
            assert r["status"] == "meets SLO" and r["replicas"] == replicas and r["gpus"] == replicas * tp
            assert r["cost_per_million_output_tokens_usd"] == pytest.approx(
                replicas * tp * price / (TARGET * OUTPUT_TOKENS * 3600) * 1e6)
            assert r["qps_per_replica_at_load"] == pytest.approx(TARGET / replicas, abs=1e-6)
            assert r["tpot_ms_p99_at_load"] == pytest.approx(STEP_FAST * 1e3)    # one token per 10 ms pass
    ranked = [(r["point"]["hardware.tp"], r["point"]["pricing.usd_per_gpu_hour"]) for r in result.rows[:4]]
    assert ranked == [(1, 1.0), (2, 1.0), (1, 3.0), (2, 3.0)]       # tp x price: 1, 2, 3, 6
    assert [r["rank"] for r in result.rows] == [1, 2, 3, 4, None, None, None, None]
    chosen = result.chosen
    assert chosen is result.rows[0] and chosen["point"] == {"hardware.target_step_s": STEP_FAST, "hardware.tp": 1,
                                                            "pricing.usd_per_gpu_hour": 1.0}
    assert chosen["pareto"] and "cheapest: target_step_s=0.01 tp=1 usd_per_gpu_hour=1.0" in chosen_line(result)
    d = result.to_dict()
    assert d["chosen"]["config"] == chosen["config"] and len(d["configurations"]) == 8
    assert list(result.frame["rank"][:4]) == [1, 2, 3, 4] and "probes" not in result.frame
    chosen_sc = result.scenario_for(chosen)          # the chosen configuration as a scenario, to deploy
    assert chosen_sc["hardware"]["target_step_s"] == STEP_FAST and chosen_sc["hardware"]["tp"] == 1
    assert chosen_sc["policy"] == {"kind": "off"} and chosen_sc["pricing"] == {"usd_per_gpu_hour": 1.0}


def test_a_price_changes_no_probe(store, result, monkeypatch):
    """The pricing block is not part of a probe: another price reuses every stored point."""
    monkeypatch.setattr(points_module, "evaluate_point", lambda *a, **k: pytest.fail("simulated again"))
    again = search(store, {**GRID, "pricing.usd_per_gpu_hour": [7.0]})
    assert {r["max_qps_per_replica"] for r in again.rows} == {r["max_qps_per_replica"] for r in result.rows}


def test_an_interrupted_search_loses_no_finished_probe(tmp_path, monkeypatch):
    """Stopped (Ctrl-C) after N simulations, a rerun simulates exactly the rest and answers the same."""
    grid = {"hardware.target_step_s": [STEP_FAST, STEP_SLOW]}
    real = points_module.evaluate_point
    calls: list[int] = []

    def counting(stop_after):
        def evaluate(*a, **k):
            if stop_after is not None and len(calls) >= stop_after:
                raise KeyboardInterrupt
            calls.append(1)
            return real(*a, **k)
        return evaluate

    monkeypatch.setattr(points_module, "evaluate_point", counting(None))
    whole = search(tmp_path / "whole.jsonl", grid, price_per_gpu_hour=1.0)
    total, calls[:] = len(calls), []
    stop_after = total // 2
    monkeypatch.setattr(points_module, "evaluate_point", counting(stop_after))
    with pytest.raises(KeyboardInterrupt):
        search(tmp_path / "cut.jsonl", grid, price_per_gpu_hour=1.0)
    assert len((tmp_path / "cut.jsonl").read_text().splitlines()) == stop_after
    calls[:] = []
    monkeypatch.setattr(points_module, "evaluate_point", counting(None))
    resumed = search(tmp_path / "cut.jsonl", grid, price_per_gpu_hour=1.0)
    assert total >= 8 and len(calls) == total - stop_after
    assert resumed.to_dict()["configurations"] == whole.to_dict()["configurations"]


def test_a_process_pool_and_a_dask_cluster_answer_as_this_process(tmp_path):
    """The probes are points: wherever they run (workers=2, a dask LocalCluster), the same seeds
    give the same table."""
    distributed = pytest.importorskip("distributed")
    grid = {"hardware.target_step_s": [STEP_FAST, STEP_SLOW], "pricing.usd_per_gpu_hour": [1.0]}
    local = search(None, grid).to_dict()["configurations"]
    pool = plan_search(FIXED, TARGET, grid, policies="off", tolerance=0.1, store=tmp_path / "pool.jsonl",
                       workers=2, progress=False)
    assert pool.to_dict()["configurations"] == local
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cl, \
            distributed.Client(cl) as client:
        on_dask = plan_search(FIXED, TARGET, grid, policies="off", tolerance=0.1, store=tmp_path / "dask.jsonl",
                              executor=client, progress=False)
    assert on_dask.to_dict()["configurations"] == local


def test_configurations_that_do_not_fit_are_listed_with_the_reason(tmp_path, capsys):
    """70B weights (141 GB in bf16) on one 48 GB L40S leave no room for a KV cache; TP 3 does not
    divide its 64 heads; one KV block of 16 tokens cannot hold a 96-token request. All are listed,
    with the reason, not dropped."""
    big = {"name": "too-big", "seed": 1, "model": "llama-3.1-70b", "hardware": {"gpu": "l40s", "tp": 1},
           "workload": {"arrival": {"process": "poisson", "qps": 1}, "num_requests": 4, "prompt_len": 64,
                        "output_len": 16}, "slo": {"tpot_ms_p99": 100}}
    res = plan_search(big, 1.0, {"hardware.tp": [3, 1]}, policies="off", store=tmp_path / "p.jsonl", workers=1,
                      progress=False)
    row, odd = res.rows                                          # does not fit, then cannot run
    assert row["status"] == "does not fit" and NO_FIT[0] in row["limited_by"] and row["rank"] is None
    assert odd["status"] == "cannot run" and "must divide" in odd["limited_by"] and odd["point"]["hardware.tp"] == 3
    assert all(len(r["probes"]) == 1 for r in res.rows) and res.chosen is None   # one refusal ends a search
    assert "failed" not in capsys.readouterr().err          # expected refusals: listed, not also printed
    tiny = write_scenario(tmp_path / "tiny.yaml", FIXED, "Which configurations fit? (test scenario)")
    argv = ["plan", str(tiny), "--target-qps", "5", "--policies", "off", "--grid", "engine.num_gpu_blocks=1,64",
            "--grid", "hardware.target_step_s=0.01", "--price-per-gpu-hour", "2", "--workers", "1",
            "--no-progress", "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "num_gpu_blocks=1 target_step_s=0.01; off (no speculation): does not fit:" in text and NO_FIT[1] in text
    assert "cheapest: num_gpu_blocks=64" in text
    md = (tmp_path / "out" / "search.md").read_text()
    assert "| does not fit |" in md and NO_FIT[1] in md
    assert main(argv + ["--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert [c["status"] for c in obj["configurations"]] == ["meets SLO", "does not fit"]
    assert obj["chosen"]["point"] == {"engine.num_gpu_blocks": 64, "hardware.target_step_s": 0.01}
    for f in ("csv", "markdown", "plot"):
        assert (tmp_path / "out" / obj["files"][f].rsplit("/", 1)[1]).stat().st_size > 200


def test_run_points_prints_unexpected_errors_only(tmp_path, capsys, monkeypatch):
    """A point whose exception the caller lists as expected is recorded quietly; any other error
    still prints its `point ... failed` line."""
    from simulator.common.errors import SpecsightInputError

    def evaluate(source, overrides, baseline=False):
        if overrides["hardware.tp"] == 3:
            raise SpecsightInputError("hardware.tp", 3, "must divide the heads")
        raise RuntimeError("a bug")
    monkeypatch.setattr(points_module, "evaluate_point", evaluate)
    recs = points_module.run_points(FIXED, [{"hardware.tp": 3}, {"hardware.tp": 5}], None, None, progress=False,
                                    expected=(SpecsightInputError,))
    assert [r["error"].split(":")[0] for r in recs] == ["SpecsightInputError", "RuntimeError"]
    err = capsys.readouterr().err
    assert "RuntimeError: a bug" in err and "must divide" not in err
    points_module.run_points(FIXED, [{"hardware.tp": 3}], None, None, progress=False)  # not listed: loud
    assert "must divide" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["plan", "sweep"])
@pytest.mark.parametrize("grid, needle", [
    ("drafter.num_speculative_tokenz=1,2", "did you mean num_speculative_tokens"),
    ("drafter.num_speculative_tokens=1,99", "--grid drafter.num_speculative_tokens=99: must be an integer in [0, 64]"),
    ("hardware.gpu=h100-sxm,h100-sx", "--grid hardware.gpu='h100-sx': did you mean h100-sxm"),
    ("drafterr.method=eagle", "--grid drafterr"),
])
def test_a_bad_grid_fails_up_front_in_one_line(command, grid, needle, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(points_module, "evaluate_point", lambda *a, **k: pytest.fail("a point ran"))
    sc = write_scenario(tmp_path / "sc.yaml", dict(FIXED, hardware={"gpu": "h100-sxm"}, model="llama-3.1-8b"),
                        "Is a bad grid refused? (test scenario)")
    extra = ["--target-qps", "1"] if command == "plan" else []
    assert main([command, str(sc), "--grid", grid, *extra, "--workers", "1", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specsight: error: --grid ") and err.count("\n") == 1 and needle in err, err
    assert not (tmp_path / "o" / "points.jsonl").exists()


def test_the_price_comes_from_the_flag_the_scenario_or_the_profile():
    roof = {"hardware": {"gpu": "h100-sxm"}}
    price, where = gpu_hour_price(roof)
    assert price == load_profile("h100-sxm").price_usd_per_gpu_hour and where.startswith("profile h100-sxm: ")
    assert gpu_hour_price({**roof, "pricing": {"usd_per_gpu_hour": 1.5, "source": "our contract"}}) == \
        (1.5, "scenario: our contract")
    assert gpu_hour_price({**roof, "pricing": {"usd_per_gpu_hour": 1.5}}, 0.9) == (0.9, "--price-per-gpu-hour")
    with pytest.raises(ValueError, match="--price-per-gpu-hour=None: fixed step costs"):
        gpu_hour_price(FIXED)


def test_every_shipped_profile_carries_a_sourced_dated_price():
    for name in available_profiles():
        prof = load_profile(name)
        assert prof.price_usd_per_gpu_hour is not None and prof.price_usd_per_gpu_hour > 0, name
        src = prof.sources["price_usd_per_gpu_hour"]
        assert re.search(r"\b20\d\d\b", src) and re.search(r"[a-z0-9-]+\.(io|com|app|ai)\b", src), (name, src)
    raw = load_profile("l4").to_dict()
    del raw["sources"]["price_usd_per_gpu_hour"]
    with pytest.raises(ValueError, match="numbers without a source string under sources: price_usd_per_gpu_hour"):
        profile_from_dict(raw, "l4-edited.yaml")
