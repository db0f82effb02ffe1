"""Concurrent and interrupted runs: two runs sharing one point store, stale claims of a killed
run, pool workers that die with their parent, whole-file outputs, and the --workers/--dask checks."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from scenario_files import write_scenario

from simulator.common.atomic_files import replacing, write_text
from simulator.common.errors import SpecsightInputError
from specsight.cli import main
from specsight.studies.shared import executors
from specsight.studies.shared.executors import MAX_WORKERS, check_dask_address, check_workers, open_executor
from specsight.studies.shared.point_store import PointStore
from specsight.studies.shared.points import _task, point_key, run_points
from specsight.studies.shared.store_claims import StoreClaims

REPO = Path(__file__).resolve().parents[1]
SPECSIGHT = [sys.executable, "-m", "specsight.cli"]

# Fixed step costs: a few milliseconds per point (SLOW: about a second).
TINY = {
    "name": "tiny-store", "seed": 5,
    "hardware": {"kind": "fixed", "target_step_s": 0.02, "draft_step_s": 0.002},
    "drafter": {"method": "ngram", "num_speculative_tokens": 2},
    "acceptance": {"model": "iid", "alpha": 0.6},
    "workload": {"arrival": "closed_loop", "concurrency": 2, "num_requests": 8, "prompt_len": 16, "output_len": 12},
}
SLOW = {**TINY, "name": "slow-store",
        "workload": {**TINY["workload"], "concurrency": 16, "num_requests": 1500, "output_len": 64}}
POINTS = [{"drafter.num_speculative_tokens": k} for k in (1, 2, 3)]


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


# ---- two runs on one store --------------------------------------------------------------------
def test_points_a_live_run_claimed_are_waited_for_not_recomputed(tmp_path, capsys):
    store = tmp_path / "points.jsonl"
    keys = [point_key(TINY, p) for p in POINTS]
    other = StoreClaims(store).__enter__()             # another run, live: it claims points 1 and 3
    mine, _ = other.claim([keys[0], keys[2]], 2, lambda: None, lambda k: False)
    assert mine == [keys[0], keys[2]]
    theirs = [{"key": keys[i], **_task(TINY, POINTS[i], False), "scenario": "tiny-store"} for i in (0, 2)]

    def other_finishes():
        time.sleep(0.6)
        their_store = PointStore(store)
        for rec in theirs:
            other.append(rec["key"], lambda rec=rec: their_store.put(rec))
        other.__exit__(None, None, None)
    t = threading.Thread(target=other_finishes)
    t.start()
    recs = run_points(TINY, POINTS, store, progress=False)
    t.join()
    assert [r["cached"] for r in recs] == [True, False, True]      # this run computed point 2 only
    assert sorted(r["key"] for r in lines(store)) == sorted(keys)   # each point stored once
    assert [r["summary"]["mean_k"] for r in recs] == [1.0, 2.0, 3.0]
    err = capsys.readouterr().err
    assert err.count("waiting for the points that run pid") == 1 and "stopped without" not in err
    assert os.listdir(tmp_path / ".points.jsonl.claims") == []      # no claim or run file left


def test_two_concurrent_sweeps_on_one_out_compute_each_point_once(tmp_path):
    scen = write_scenario(tmp_path / "slow.yaml", SLOW, "Two sweeps at once on one --out (a test scenario)")
    grid = ["--grid", "drafter.num_speculative_tokens=1,2,3", "--grid", "acceptance.alpha=0.5,0.8"]
    out = tmp_path / "shared"
    argv = SPECSIGHT + ["sweep", str(scen), *grid, "--workers", "1", "--out", str(out), "--json", "--no-progress"]
    runs = [subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    answers = []
    for r in runs:
        stdout, stderr = r.communicate(timeout=300)
        assert r.returncode == 0, stderr
        answers.append(json.loads(stdout))
    stored = lines(out / "points.jsonl")
    assert len(stored) == 6 and len({r["key"] for r in stored}) == 6            # no point computed twice
    assert sum(a["computed"] for a in answers) == 6
    assert all(len(a["points"]) == 6 and a["errors"] == 0 for a in answers)
    assert os.listdir(out / ".points.jsonl.claims") == []
    assert [p.name for p in out.iterdir() if ".tmp" in p.name] == []
    assert main(["sweep", str(scen), *grid, "--workers", "1", "--out", str(tmp_path / "alone"), "--no-progress"]) == 0
    shared = pd.read_csv(out / "sweep.csv").drop(columns=["elapsed_s", "cached"])
    alone = pd.read_csv(tmp_path / "alone" / "sweep.csv").drop(columns=["elapsed_s", "cached"])
    pd.testing.assert_frame_equal(shared, alone)                 # whole, and equal to a single run's


def test_stale_claims_of_a_killed_run_are_reported_and_taken_over(tmp_path, capsys):
    store = tmp_path / "points.jsonl"
    keys = [point_key(TINY, p) for p in POINTS]
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from specsight.studies.shared.store_claims import StoreClaims
        c = StoreClaims({str(store)!r}).__enter__()
        c.claim({keys[:2]!r}, 2, lambda: None, lambda k: False)
        print("claimed", flush=True)
        time.sleep(120)
        """)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "claimed"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    claims = tmp_path / ".points.jsonl.claims"
    assert sorted(p.name for p in claims.iterdir() if not p.name.endswith(".alive")) == sorted(keys[:2])
    recs = run_points(TINY, POINTS, store, progress=False)
    assert [r["cached"] for r in recs] == [False, False, False]     # the dead run's points done here
    err = capsys.readouterr().err
    assert err.count("stopped without finishing") == 1 and f"run pid {holder.pid} on " in err
    assert os.listdir(claims) == []


def test_store_refresh_sees_appends_and_skips_a_torn_tail(tmp_path):
    path = tmp_path / "p.jsonl"
    reader = PointStore(path)
    writer = PointStore(path)
    writer.put({"key": "a", "v": 1})
    with path.open("a") as f:
        f.write('{"key": "b", "v"')                  # a writer killed mid-line
    reader.refresh()
    assert len(reader) == 1 and reader.get("a")["v"] == 1
    writer.put({"key": "c", "v": 3})                 # the torn tail is cut first
    reader.refresh()
    assert sorted(reader.records) == ["a", "c"]
    assert [r["key"] for r in lines(path)] == ["a", "c"]


# ---- workers die with their parent ------------------------------------------------------------
def _children(pid: int) -> list[int]:
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(d.name))
    return kids


def _running(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_pool_workers_exit_when_the_sweep_is_killed(tmp_path, capsys):
    scen = write_scenario(tmp_path / "slow.yaml", SLOW, "A sweep killed mid-run (a test scenario)")
    parent = subprocess.Popen(SPECSIGHT + ["sweep", str(scen), "--grid", "acceptance.alpha=0.5,0.6,0.7,0.8",
                                           "--workers", "2", "--out", str(tmp_path / "o"), "--no-progress"],
                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    workers: list[int] = []
    while len(workers) < 2 and time.monotonic() < deadline and parent.poll() is None:
        time.sleep(0.2)
        workers = _children(parent.pid)
    assert len(workers) >= 2, "the sweep never started its pool"
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    # each worker's watcher sees the parent gone within PARENT_POLL_S; the bound is for a busy machine
    # (a hang guard, not a speed check: the loop ends as soon as the workers are gone)
    deadline = time.monotonic() + 60 + 2 * executors.PARENT_POLL_S
    while any(_running(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    survivors = [w for w in workers if _running(w)]
    for w in survivors:                              # (do not leave them behind if the check fails)
        os.kill(w, signal.SIGKILL)
    assert survivors == []
    # the rerun resumes: it takes over the killed run's claims (and says so), stores each point once
    assert main(["sweep", str(scen), "--grid", "acceptance.alpha=0.5,0.6,0.7,0.8", "--workers", "1",
                 "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    assert "stopped without finishing" in capsys.readouterr().err
    keys = [r["key"] for r in lines(tmp_path / "o" / "points.jsonl")]
    assert len(keys) == 4 == len(set(keys))


# ---- whole-file outputs -----------------------------------------------------------------------
def test_replacing_writes_whole_files_or_none(tmp_path):
    target = write_text(tmp_path / "plan.md", "first\n")
    with pytest.raises(RuntimeError):
        with replacing(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed mid-write")
    assert target.read_text() == "first\n" and os.listdir(tmp_path) == ["plan.md"]
    with replacing(tmp_path / "a.png") as tmp:
        assert tmp.suffix == ".png" and tmp.parent == tmp_path
        tmp.write_bytes(b"png")
    assert sorted(os.listdir(tmp_path)) == ["a.png", "plan.md"]


def test_unusable_store_and_output_paths_are_one_error(tmp_path):
    (tmp_path / "afile").write_text("")
    (tmp_path / "d" / "points.jsonl").mkdir(parents=True)
    for store in (tmp_path / "afile" / "points.jsonl", tmp_path / "d" / "points.jsonl"):
        with pytest.raises(SpecsightInputError) as e:
            run_points(TINY, POINTS[:1], store, progress=False)
        assert e.value.field == "store"
    (tmp_path / "plan.md").mkdir()
    with pytest.raises(SpecsightInputError) as e:
        write_text(tmp_path / "plan.md", "x")
    assert e.value.field == "output file" and [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []


# ---- --workers and --dask ---------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -1, MAX_WORKERS + 1, 99999999999999999999, "99999999999999999999", "1.5",
                                 "abc", "", True, 2.5, None])
def test_bad_worker_counts(bad):
    with pytest.raises(SpecsightInputError) as e:
        check_workers(bad)
    assert e.value.field == "--workers" and "[1, 1024]" in e.value.allowed


def test_good_worker_counts():
    assert [check_workers(v) for v in (1, "8", " 3 ", 4.0, MAX_WORKERS)] == [1, 8, 3, 4, MAX_WORKERS]


@pytest.mark.parametrize("bad", ["not-an-address", "tcp://host", "tcp://host:0", "tcp://host:70000", "http://h:1",
                                 "tcp://:8786", "", " ", "a b:1", 8786])
def test_bad_dask_addresses(bad):
    with pytest.raises(SpecsightInputError) as e:
        check_dask_address(bad)
    assert e.value.field == "--dask" and "tcp://" in e.value.allowed


def test_good_dask_addresses():
    for ok in ("tcp://10.0.0.5:8786", "10.0.0.5:8786", "tls://sched.example.org:8786", "tcp://[::1]:8786",
               "inproc://10.0.0.5/1234/1"):
        assert check_dask_address(ok) == ok


def test_unreachable_dask_scheduler_is_one_error(monkeypatch):
    pytest.importorskip("distributed")
    monkeypatch.setattr(executors, "DASK_CONNECT_TIMEOUT_S", 0.25)
    with socket.socket() as s:                       # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SpecsightInputError) as e:
        with open_executor(dask_address=f"tcp://127.0.0.1:{port}"):
            pass
    assert e.value.field == "--dask" and "within 0.25 s" in e.value.allowed


@pytest.mark.parametrize("command,flags", [
    ("sweep", ["--grid", "acceptance.alpha=0.5", "--workers", "99999999999999999999"]),
    ("sweep", ["--grid", "acceptance.alpha=0.5", "--workers", "many"]),
    ("sweep", ["--grid", "acceptance.alpha=0.5", "--dask", "not-an-address"]),
    ("sweep", ["--grid", "acceptance.alpha=0.5", "--dask", "tcp://127.0.0.1:8786", "--workers", "2"]),
    ("breakeven", ["--axis", "batch", "--values", "1,2", "--k", "1", "--workers", "0"]),
    ("plan", ["--target-qps", "1", "--dask", "tcp://host"]),
])
def test_cli_reports_bad_executor_flags_in_one_line(tmp_path, capsys, command, flags):
    scen = write_scenario(tmp_path / "tiny.yaml", TINY, "Bad executor flags (a test scenario)")
    assert main([command, str(scen), *flags, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("specsight: error: --")


def test_stored_points_key_on_every_simulator_source_subpackages_included():
    """A change confined to a sub-package (simulator/engines/) must not reuse stored points: every
    .py under simulator/ is hashed into the points' key (points.code_files)."""
    from specsight.studies.shared.points import REPO_ROOT, code_files
    hashed = set(code_files())
    sources = set((REPO_ROOT / "simulator").rglob("*.py"))
    assert any(p.parent.name == "engines" for p in sources)
    assert sources <= hashed
