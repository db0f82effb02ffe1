"""Command-line flags and output paths: a bad --out (a path through a file, a folder where a file
belongs) and a number beyond its bound are each one `specsight: error:` line naming the flag, exit
code 2, before any work; never a traceback (robust to any input)."""
from __future__ import annotations

import pytest
from cli_errors import one_error
from scenario_files import write_scenario
from test_cli_flags import FIXED as FLAGS_SCENARIO

from simulator.common.errors import SpecsightInputError
from specsight.cli import main
from specsight.cli.args import check_out_dir, check_out_file

FIXED = {**FLAGS_SCENARIO, "name": "fixed-inputs",
         "workload": {**FLAGS_SCENARIO["workload"], "num_requests": 4, "output_len": 8}}
HUGE = "99999999999999999999"
ANALYTIC = ["breakeven", "--analytic", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "eagle3",
            "--alpha", "0.7", "--no-plot"]


@pytest.fixture
def files(tmp_path):
    """(a scenario, a plain file, a folder)."""
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    sc = write_scenario(tmp_path / "fixed.yaml", FIXED, "Are bad flags one line? (test scenario)")
    return sc, tmp_path / "file", tmp_path / "dir"




def test_helpers_name_the_flag_and_create_nothing_wrong(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(SpecsightInputError) as e:
        check_out_dir(tmp_path / "f" / "x")
    assert e.value.field == "--out" and "NotADirectoryError" in e.value.allowed
    with pytest.raises(SpecsightInputError) as e:
        check_out_file(tmp_path, "--points")
    assert e.value.field == "--points" and "not a folder" in e.value.allowed
    with pytest.raises(SpecsightInputError, match="FileExistsError"):
        check_out_file(tmp_path / "f" / "x.md")
    with pytest.raises(SpecsightInputError, match="1 to 255 bytes"):
        check_out_file(tmp_path / ("y" * 300))
    assert check_out_file(tmp_path / "a" / "b.md") == tmp_path / "a" / "b.md"
    assert (tmp_path / "a").is_dir() and not (tmp_path / "a" / "b.md").exists()


@pytest.mark.parametrize("command", ["analytic", "validate", "validate-published", "calibrate", "groundtruth",
                                     "plan", "sweep", "simulate"])
def test_a_bad_out_is_one_line_before_any_work(command, files, capsys, monkeypatch):
    """`--out FILE/x` or a folder where a file belongs: one line naming --out; the commands that
    run for minutes (calibrate, groundtruth, validate --published) refuse before any work."""
    import calibrate.pipeline
    import specsight.studies.published.study
    for name in ("calibrate_profile", "record_groundtruth", "validate_run", "calibrate_from_vidur"):
        monkeypatch.setattr(calibrate.pipeline, name, lambda *a, **k: pytest.fail("work started"))
    monkeypatch.setattr(specsight.studies.published.study, "validate_published",
                        lambda *a, **k: pytest.fail("work started"))
    sc, f, d = files
    argv = {"analytic": [*ANALYTIC, "--out", str(f / "x")],
            "validate": ["validate", str(sc), "--out", str(f / "x.md")],
            "validate-published": ["validate", "--published", "--out", str(d)],
            "calibrate": ["calibrate", "--device", "cpu", "--out", str(f / "x.yaml")],
            "groundtruth": ["groundtruth", "--device", "cpu", "--out", str(f / "x")],
            "plan": ["plan", str(sc), "--target-qps", "1", "--out", str(f / "x")],
            "sweep": ["sweep", str(sc), "--grid", "seed=1,2", "--out", str(f)],
            "simulate": ["simulate", str(sc), "--out", str(f / "x")]}[command]
    one_error(capsys, argv, "--out=")
    assert main(["validate", str(sc), "--out", str(d)]) == 2
    assert "not a folder" in capsys.readouterr().err
    assert main(["calibrate", "--device", "cpu", "--out", str(d / "p.yaml"), "--points", str(d)]) == 2
    assert "--points=" in capsys.readouterr().err


@pytest.mark.parametrize("argv, flag", [
    (["groundtruth", "--device", "cpu", "--batch", HUGE], "--batch"),
    (["groundtruth", "--device", "cpu", "--k", "0,65"], "--k"),
    (["groundtruth", "--device", "cpu", "--prompt-len", HUGE], "--prompt-len"),
    (["groundtruth", "--device", "cpu", "--temperature", "1e308"], "--temperature"),
    (["calibrate", "--device", "cpu", "--layers", HUGE], "--layers"),
    (["calibrate", "--device", "cpu", "--repeats", HUGE], "--repeats"),
    (["calibrate", "--device", "cpu", "--threads", HUGE], "--threads"),
    (["calibrate", "--device", "cpu", "--scale", HUGE], "--scale"),
    (["plan", "SC", "--target-qps", "1e308"], "--target-qps"),
    (["plan", "SC", "--target-qps", "1", "--slo-tpot-ms-p99", "1e300"], "--slo-tpot-ms-p99"),
    (["plan", "SC", "--target-qps", "1", "--price-per-gpu-hour", "1e300"], "--price-per-gpu-hour"),
    (["plan", "SC", "--target-qps", "1", "--k", HUGE], "--k"),
    (["analytic", "--alpha", "0.7", "--k", "99999999999999999"], "--k"),
    (["analytic", "--alpha", "0.7", "--k", "2", "--c", "1e300"], "--c"),
    (["cost", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "1e30", "--new-tokens", "1",
      "--context", "8"], "--batch"),
    (["cost", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "1", "--new-tokens", "1e30",
      "--context", "8"], "--new-tokens"),
    (["cost", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "1", "--new-tokens", "1",
      "--context", "1e30"], "--context"),
    (["cost", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "1", "--new-tokens", "1",
      "--context", "8", "--tp", HUGE], "--tp"),
    ([*ANALYTIC, "--k", HUGE], "--k"),
])
def test_numbers_beyond_their_bound_are_one_line(argv, flag, files, tmp_path, capsys):
    """One line naming the flag, the value and the range (calibrate and groundtruth before torch)."""
    argv = [str(files[0]) if a == "SC" else a for a in argv]
    if argv[0] in ("calibrate", "groundtruth", "plan"):
        argv += ["--out", str(tmp_path / ("out.json" if argv[0] == "groundtruth" else "out"))]
    line = one_error(capsys, argv, f"{flag}=")
    assert "in [" in line or "lie in" in line, line
    assert "1000000000000000000" not in line.replace(HUGE, ""), line      # the value as given, not rounded


@pytest.mark.parametrize("text", ['{"kind": "specsight-groundtruth", "runs": 3}', '[1, 2]',
                                  '{"kind": "specsight-groundtruth", "provenance": {"device": "cuda"}}'])
def test_validate_a_malformed_run_record_is_one_line(text, tmp_path, capsys):
    """A RUN.json with the right kind but not what groundtruth writes: one line naming the run."""
    (tmp_path / "run.json").write_text(text)
    one_error(capsys, ["validate", str(tmp_path / "run.json"), "--hardware", "h100-sxm"], str(tmp_path / "run.json"))
    one_error(capsys, ["validate", str(tmp_path / "run.json")])
