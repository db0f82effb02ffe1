"""Work and memory are estimated before they are spent and refused past their limits naming the
override (simulator/scenario/work_limits.py, calibrate/memory_estimate.py); long work is announced; a dask
scheduler without workers is refused after a bounded wait; validate and --from-bench refuse
nonsense (robust to any input)."""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from cli_errors import one_error
from scenario_files import write_scenario
from test_cli_flags import FIXED

from calibrate.run_record import check_run_record
from simulator.common.errors import SpecsightInputError
from simulator.scenario.work_limits import ANNOUNCE_S, TOKENS_PER_S, check_study_work

ROOT = Path(__file__).resolve().parent.parent
SMALL = {**FIXED, "workload": {**FIXED["workload"], "num_requests": 2, "output_len": 4}}
RUN = json.loads((ROOT / "tests/data/calibration_cpu/groundtruth_AH.json").read_text())




@pytest.fixture
def sc(tmp_path):
    return write_scenario(tmp_path / "sc.yaml", SMALL, "Is work bounded before it starts? (test scenario)")


def test_kernel_acceptance_set_up_past_its_limit_is_refused_before_drawing(sc, capsys, monkeypatch):
    import calibrate.acceptance_source as src
    monkeypatch.setattr(src, "_alpha_draws", lambda *a, **k: pytest.fail("drew before the check"))
    one_error(capsys, ["simulate", str(sc), "--set", "acceptance={model: kernel, vocab_size: 262144, alpha: 0.7}"],
               "acceptance.vocab_size=262144", "limits.max_kernel_elements", "--set limits.max_kernel_elements=N")


def test_a_study_past_its_tokens_is_refused_and_a_long_one_announced(sc, tmp_path, capsys):
    one_error(capsys, ["breakeven", str(ROOT / "scenarios/llama8b-h100-eagle3-chat.yaml"), "--requests-per-user",
                        "1000000", "--no-plot", "--workers", "1", "--no-progress", "--out", str(tmp_path / "o")],
               "limits.max_study_tokens = 100,000,000,000", "--set limits.max_study_tokens=N")
    one_error(capsys, ["breakeven", str(sc), "--set", "limits.max_study_tokens=100", "--no-plot", "--workers", "1",
                        "--no-progress", "--out", str(tmp_path / "o2")], "limits.max_study_tokens = 100")
    seconds = check_study_work({}, [TOKENS_PER_S * 2 * ANNOUNCE_S], slots=1)
    assert seconds == pytest.approx(2 * ANNOUNCE_S)
    assert "specsight: note: 1 points" in capsys.readouterr().err
    check_study_work({}, [1.0], slots=1)
    assert capsys.readouterr().err == ""
    with pytest.raises(SpecsightInputError, match="max_study_tokens"):
        check_study_work({"limits": {"max_study_tokens": 10}}, [6.0, 6.0], slots=1)


def test_requests_past_the_free_memory_are_refused_with_the_estimate(sc, capsys):
    one_error(capsys, ["simulate", str(sc), "--set", "workload.num_requests=1000000000", "--set",
                        "limits={max_requests: 1000000000, max_tokens: 1000000000000000}"],
               "needs about 5e+03 GB", "GB free")


def test_groundtruth_and_calibrate_past_free_memory_are_refused_before_torch_builds(tmp_path, capsys, monkeypatch):
    import calibrate.groundtruth
    import calibrate.microbench
    monkeypatch.setattr(calibrate.groundtruth, "run_groundtruth", lambda *a, **k: pytest.fail("work started"))
    monkeypatch.setattr(calibrate.microbench, "BenchConfig", lambda *a, **k: pytest.fail("work started"))
    one_error(capsys, ["groundtruth", "--device", "cpu", "--batch", "65536", "--k", "64", "--out",
                        str(tmp_path / "gt.json")], "needs about", "lower --batch")
    one_error(capsys, ["calibrate", "--device", "cpu", "--scale", "1", "--model", "llama-3.1-405b", "--out",
                        str(tmp_path / "p.yaml")], "needs about", "raise --scale")


def test_a_dask_scheduler_without_workers_is_refused_after_the_wait(monkeypatch):
    from distributed import LocalCluster

    import specsight.studies.shared.executors as ex
    monkeypatch.setattr(ex, "DASK_WORKER_WAIT_S", 0.25)
    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        with pytest.raises(SpecsightInputError, match="none joined within 0.25 s"):
            with ex.open_executor(None, cluster.scheduler_address):
                pytest.fail("an executor without workers")


@pytest.mark.parametrize("edit, words", [
    (lambda r: r["runs"][0].__setitem__("k", -1), "runs[0].k=-1"),
    (lambda r: r["runs"][0].__setitem__("batch", 0), "runs[0].batch=0"),
    (lambda r: r["runs"][1]["rounds"][3].__setitem__("wall_s", math.nan), "runs[1].rounds[3].wall_s=nan"),
    (lambda r: r.pop("draft"), "draft"),
    (lambda r: r.__setitem__("draft", None), "draft"),
    (lambda r: r["runs"][-1]["rounds"][0].__setitem__("accepted", [99] * r["runs"][-1]["batch"]), "accepted[0]=99"),
])
def test_validate_refuses_a_nonsense_run_record_naming_the_key(edit, words, tmp_path, capsys):
    run = copy.deepcopy(RUN)
    edit(run)
    assert any(r["k"] > 0 for r in run["runs"])          # the draft section is needed
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    one_error(capsys, ["validate", str(path), "--hardware", str(ROOT / "tests/data/calibration_cpu/cpuAH.yaml")],
               str(path), words)
    assert check_run_record(RUN) is RUN


def test_from_bench_refuses_an_accept_length_past_k_plus_one():
    from calibrate.bench_files import BenchRun
    from calibrate.engine_fit import run_scenario
    from simulator.scenario.scenario import load_scenario
    dep = load_scenario({"name": "bench", "seed": 1, "hardware": {"gpu": "h100-sxm"}, "model": "llama-3.1-8b",
                         "drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3},
                         "acceptance": {"model": "iid", "alpha": 0.7},
                         "workload": {"arrival": {"process": "closed_loop", "concurrency": 4}, "num_requests": 16,
                                      "prompt_len": 256, "output_len": 64}, "engine": {"kind": "vllm"}})
    run = BenchRun("b.json", 1, 16, 256, 64, 4, math.inf, 10.0, None, None, 100.0)
    with pytest.raises(SpecsightInputError, match=r"at most K \+ 1 = 4"):
        run_scenario(dep, run, "vllm", None)


def test_a_loose_fit_warns():
    from calibrate.engine_fit import UPPER_MS, warn_loose_fit
    from simulator.common.errors import SpecsightWarning
    with pytest.warns(SpecsightWarning, match="sync_ms = 50 \\+- 2.2e\\+02"):
        warn_loose_fit({"sync_ms": 50.0}, {"sync_ms": 220.0})
    with pytest.warns(SpecsightWarning, match="bound"):
        warn_loose_fit({"base_ms": UPPER_MS}, {"base_ms": 1.0})


def test_validate_of_a_run_without_speculation_says_there_is_nothing_to_compare(tmp_path, capsys):
    """A run of K = 0 only has no speedup: the report says so in one line, never "nan %"."""
    from specsight.cli import main
    run = copy.deepcopy(RUN)
    run["runs"] = [r for r in run["runs"] if r["k"] == 0]
    run["draft"] = None
    assert run["runs"]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    assert main(["validate", str(path), "--hardware", str(ROOT / "tests/data/calibration_cpu/cpuAH.yaml")]) == 0
    out = capsys.readouterr().out
    sign = [ln for ln in out.splitlines() if "speedup" in ln and ln.startswith("- ")]
    assert "nan" not in out.lower() and len(sign) == 1 and "nothing to compare" in sign[0], out
