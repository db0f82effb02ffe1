"""Every output goes through one checked writer (simulator/common/atomic_files.py): only regular files,
never through a symlink or into a device; distinct grid points get distinct folders; a path that
is not UTF-8 is refused before any work; stdout on /dev/full or an ASCII-only stdout does not end
in a traceback (robust to any input)."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cli_errors import one_error
from scenario_files import write_scenario
from test_cli_flags import FIXED

from simulator.common.atomic_files import check_target, out_file, write_text
from simulator.common.errors import SpecsightInputError
from simulator.common.jsonl import open_append, read_records
from specsight.cli import main
from specsight.cli.args import point_folder

ROOT = Path(__file__).resolve().parent.parent
SMALL = {**FIXED, "name": "outputs", "workload": {**FIXED["workload"], "num_requests": 2, "output_len": 4}}


@pytest.fixture
def scenario(tmp_path):
    return write_scenario(tmp_path / "sc.yaml", SMALL, "Are outputs written safely? (test scenario)")




def test_devices_fifos_and_symlinks_are_refused_as_targets(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    (tmp_path / "link").symlink_to(victim)
    for target, words in (("/dev/null", "character device"), (tmp_path / "fifo", "FIFO"),
                          (tmp_path / "link", "symlink")):
        with pytest.raises(SpecsightInputError, match=words):
            check_target(target)
        with pytest.raises(SpecsightInputError, match=words):
            out_file(target)
        with pytest.raises(SpecsightInputError, match=words):
            write_text(target, "x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert victim.read_text() == "keep\n"


def test_validate_out_dev_null_leaves_the_device(capsys):
    run = ROOT / "tests/data/calibration_cpu/groundtruth_AH.json"
    one_error(capsys, ["validate", str(run), "--hardware", str(ROOT / "tests/data/calibration_cpu/cpuAH.yaml"),
                        "--out", "/dev/null"], "--out=", "character device")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_points_symlink_is_never_followed(tmp_path, scenario, capsys):
    victim = tmp_path / "victim.jsonl"
    victim.write_text('{"a": 1}\n{"torn')
    out = tmp_path / "out"
    out.mkdir()
    (out / "points.jsonl").symlink_to(victim)
    with pytest.raises(SpecsightInputError, match="symlink"):
        open_append(out / "points.jsonl")
    with pytest.raises(SpecsightInputError, match="symlink"):
        list(read_records(out / "points.jsonl"))
    one_error(capsys, ["breakeven", str(scenario), "--axis", "batch", "--values", "1", "--k", "1", "--no-plot",
                        "--workers", "1", "--no-progress", "--out", str(out)], "symlink")
    assert victim.read_text() == '{"a": 1}\n{"torn'


def test_distinct_grid_points_get_distinct_folders(tmp_path, scenario, capsys):
    names = {point_folder({"name": v}) for v in ("run 1", "run_1", "run/1", "run:1")}
    assert len(names) == 4 and "name=run_1" in names
    assert all(len(point_folder({"name": "x" * n}).encode()) <= 255 for n in (10, 300, 3000))
    assert main(["breakeven", str(scenario), "--grid", "name=run 1,run_1", "--axis", "batch", "--values", "1",
                 "--k", "1", "--no-plot", "--workers", "1", "--no-progress", "--out", str(tmp_path / "o")]) == 0
    capsys.readouterr()
    assert len([p for p in (tmp_path / "o").iterdir() if p.is_dir()]) == 2


def test_a_non_utf8_out_is_refused_before_any_work(tmp_path, scenario, capsys):
    bad = os.fsdecode(str(tmp_path).encode() + b"/o\xff")
    one_error(capsys, ["simulate", str(scenario), "--out", bad], "--out=", "UTF-8")
    one_error(capsys, ["validate", str(ROOT / "tests/data/calibration_cpu/groundtruth_AH.json"), "--out",
                        os.fsdecode(b"\xff")], "--out=", "UTF-8")         # a file name (campaign seed 20261202)
    assert not any(tmp_path.glob("o*"))


def test_calibrate_out_in_proc_is_one_line(capsys, monkeypatch):
    import calibrate.pipeline
    monkeypatch.setattr(calibrate.pipeline, "prepare_machine", lambda *a, **k: pytest.fail("work started"))
    one_error(capsys, ["calibrate", "--device", "cpu", "--out", "/proc/x.yaml"], "/proc/x")


def _cli(args, **env):
    return subprocess.run([sys.executable, "-m", "specsight.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env}, timeout=600)


def test_stdout_on_dev_full_and_an_ascii_stdout_end_in_one_line_not_a_traceback(tmp_path, scenario):
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "specsight.cli", "profiles"], stdout=full, stderr=subprocess.PIPE,
                           text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "stdout: cannot be written" in p.stderr, p.stderr
    p = _cli(["simulate", str(scenario), "--set", "name=café", "--out", str(tmp_path / "café")],
             PYTHONIOENCODING="ascii")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "caf\\xe9" in p.stdout and (tmp_path / "café" / "summary.json").is_file()
