"""Sweep machinery: the resumable store, failing points, local and dask executors, the `sweep` CLI."""
from __future__ import annotations

import json

import pytest
from scenario_files import write_scenario

from simulator.common.errors import SpecsightInputError
from specsight.cli import main
from specsight.studies.shared.overrides import parse_grid, scenario_source
from specsight.studies.shared.points import PointStore, point_key, run_points

# Fixed step costs keep every point to a few milliseconds of simulation.
TINY = {
    "name": "tiny-sweep", "seed": 11,
    "hardware": {"kind": "fixed", "target_step_s": 0.02, "draft_step_s": 0.002},   # s per pass / draft step
    "drafter": {"method": "ngram", "num_speculative_tokens": 2},
    "acceptance": {"model": "iid", "alpha": 0.6},
    "workload": {"arrival": "closed_loop", "concurrency": 2, "num_requests": 8, "prompt_len": 16, "output_len": 12},
}
POINTS = [{"drafter.num_speculative_tokens": k} for k in (1, 2, 3)]


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_store_resume_recomputes_nothing(tmp_path):
    store = tmp_path / "points.jsonl"
    first = run_points(TINY, POINTS, store, progress=False)
    assert [r["cached"] for r in first] == [False] * 3
    assert len(lines(store)) == 3
    again = run_points(TINY, POINTS + [{"drafter.num_speculative_tokens": 4}], store, progress=False)
    assert [r["cached"] for r in again] == [True, True, True, False]     # only the new point ran
    assert len(lines(store)) == 4
    assert [r["summary"] for r in again[:3]] == [r["summary"] for r in first]
    k_drafted = [r["summary"]["mean_k"] for r in again]
    assert k_drafted == [1.0, 2.0, 3.0, 4.0]


def test_interrupted_write_is_ignored(tmp_path):
    store = tmp_path / "points.jsonl"
    run_points(TINY, POINTS[:1], store, progress=False)
    with store.open("a") as f:
        f.write('{"key": "abc", "overri')          # a write cut short by an interruption
    assert len(PointStore(store)) == 1
    recs = run_points(TINY, POINTS[:2], store, progress=False)
    assert [r["cached"] for r in recs] == [True, False]


def test_failing_point_is_recorded_and_the_sweep_goes_on(tmp_path):
    store = tmp_path / "points.jsonl"
    pts = [{"acceptance.alpha": 0.5}, {"acceptance.alpha": 2.0}, {"drafter.nonsense": 1}, {"acceptance.alpha": 0.9}]
    recs = run_points(TINY, pts, store, progress=False)
    assert recs[0]["error"] is None and recs[3]["error"] is None
    assert recs[1]["summary"] is None and "acceptance.alpha" in recs[1]["error"] and "[0, 1]" in recs[1]["error"]
    assert "drafter.nonsense" in recs[2]["error"]
    stored = {r["key"]: r for r in lines(store)}
    assert stored[recs[1]["key"]]["error"] == recs[1]["error"]
    # errors are kept on resume (no recomputation) unless asked
    assert all(r["cached"] for r in run_points(TINY, pts, store, progress=False))
    retried = run_points(TINY, pts, store, progress=False, retry_errors=True)
    assert [r["cached"] for r in retried] == [True, False, False, True]


def test_key_depends_on_scenario_overrides_and_baseline():
    src = scenario_source(TINY)
    k = point_key(src, {"a.b": 1})
    assert k == point_key(src, {"a.b": 1})
    assert k != point_key(src, {"a.b": 2})
    assert k != point_key(src, {"a.b": 1}, baseline=True)
    assert k != point_key({**src, "seed": 12}, {"a.b": 1})


def test_dask_local_cluster_matches_in_process(tmp_path):
    distributed = pytest.importorskip("distributed")
    local = run_points(TINY, POINTS, None, progress=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cl, \
            distributed.Client(cl) as client:
        recs = run_points(TINY, POINTS + [{"acceptance.alpha": -1}], tmp_path / "p.jsonl", client, progress=False)
    assert [r["summary"] for r in recs[:3]] == [r["summary"] for r in local]   # same seed, same numbers
    assert "acceptance.alpha" in recs[3]["error"]
    assert len(lines(tmp_path / "p.jsonl")) == 4


def test_process_pool(tmp_path):
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(max_workers=2) as pool:
        recs = run_points(TINY, POINTS, tmp_path / "p.jsonl", pool, baseline=True, progress=False)
    assert all(r["error"] is None for r in recs)
    assert all(r["summary"]["speedup_output_tokens_per_s"] > 0 for r in recs)


def test_parse_grid():
    assert parse_grid("drafter.num_speculative_tokens=1,2,3") == ("drafter.num_speculative_tokens", [1, 2, 3])
    assert parse_grid("policy={kind: goodput},{kind: static, k: 1}") == \
        ("policy", [{"kind": "goodput"}, {"kind": "static", "k": 1}])
    assert parse_grid("acceptance=0.5,[0.9, 0.8]")[1] == [0.5, [0.9, 0.8]]
    for bad in ("nokey", "=1,2", "a..b=1", "a=1,,2"):
        with pytest.raises(SpecsightInputError):
            parse_grid(bad)


@pytest.fixture
def tiny_path(tmp_path):
    return write_scenario(tmp_path / "tiny.yaml", TINY, "What does K do on fixed step costs? (a test scenario)")


def test_sweep_cli_json_and_resume(tiny_path, tmp_path, capsys):
    out = tmp_path / "sw"
    argv = ["sweep", str(tiny_path), "--grid", "drafter.num_speculative_tokens=1,2",
            "--grid", "acceptance.alpha=0.3,0.9", "--baseline", "--workers", "1", "--out", str(out), "--json",
            "--no-progress"]
    assert main(argv) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["computed"] == 4 and obj["errors"] == 0 and len(obj["points"]) == 4
    sp = {(p["overrides"]["drafter.num_speculative_tokens"], p["overrides"]["acceptance.alpha"]):
          p["summary"]["speedup_output_tokens_per_s"] for p in obj["points"]}
    assert sp[(2, 0.9)] > sp[(2, 0.3)]
    assert (out / "sweep.csv").exists()
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["computed"] == 0


def test_sweep_cli_table_and_bad_grid(tiny_path, tmp_path, capsys):
    # one point fails as it runs (one 16-token KV block cannot hold a 30-token request): the other
    # is kept, the failure shown, and the exit status is 1
    assert main(["sweep", str(tiny_path), "--grid", "engine.num_gpu_blocks=1,64", "--workers", "1",
                 "--out", str(tmp_path / "s"), "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "error: SpecsightInputError: engine.num_gpu_blocks=1" in out
    assert len((tmp_path / "s" / "points.jsonl").read_text().splitlines()) == 2
    # a value the schema refuses (alpha 7) fails before any point runs, in one line
    assert main(["sweep", str(tiny_path), "--grid", "acceptance.alpha=0.5,7", "--workers", "1",
                 "--out", str(tmp_path / "s7")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specsight: error: --grid acceptance.alpha=7: must be") and err.count("\n") == 1
    assert not (tmp_path / "s7" / "points.jsonl").exists()
    assert main(["sweep", str(tiny_path), "--grid", "acceptance.alpha=0.5", "--workers", "0",
                 "--out", str(tmp_path / "s")]) == 2
    assert "--workers" in capsys.readouterr().err
    assert main(["sweep", str(tiny_path), "--grid", "acceptance.alpha", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specsight: error: --grid") and err.count("\n") == 1
