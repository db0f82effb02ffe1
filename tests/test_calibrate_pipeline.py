"""The calibration jobs as library calls (calibrate.pipeline): data back, nothing printed, and the
same results as the CLI that prints them."""
import contextlib
import io
import json

import pandas as pd
import pytest

import calibrate.ceilings
from calibrate.machine import MachineConfig
from calibrate.pipeline import CalibrationConfig, GroundTruthConfig, calibrate_profile, record_groundtruth, validate_run
from simulator.common.errors import SpecsightInputError
from simulator.hardware.hardware import load_profile

TINY = dict(model="llama-3.1-8b", draft="llama-3.2-1b", layers=2, draft_layers=1, passes="cpu-tiny", repeats=3)
CPU = MachineConfig(device="cpu", scale=32)
PEAKS = {"read_bytes_s": 1.2e10, "read_buffer_bytes": 10 ** 8, "read_kernel": "x W", "matmul_size": 512,
         "read_bytes_s_by_kernel": {"x W": 1.2e10}, "matmul_flops_s": 9e10}
DISPATCH = {"pass_s": 1.1e-4, "layers": 2, "kernels": 22, "kernel_launch_us": 5.0}


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    d = tmp_path_factory.mktemp("api")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        res = calibrate_profile(CalibrationConfig(out=d / "cpu-api.yaml", machine=CPU, **TINY))
    return d, res, buf.getvalue()


def test_calibrate_profile_returns_the_profile_the_fit_and_prints_nothing(calibration):
    d, res, printed = calibration
    assert printed == ""
    assert res.profile.name == "cpu-api" and res.path == d / "cpu-api.yaml"
    assert load_profile(str(res.path)).efficiency == res.profile.efficiency
    assert isinstance(res.fit.points, pd.DataFrame) and {"pred_s", "ape", "heldout"} <= set(res.fit.points)
    assert res.fit.points["heldout"].any() and (~res.fit.points["heldout"]).any()
    assert res.summary["fitted"] is res.fit.params
    for k, v in res.fit.params.items():
        assert res.profile.calibration["fitted"][k] == (None if v is None else pytest.approx(v, rel=1e-5)), k
    assert res.summary["n_points"] == len(res.fit.points) and (d / "cpu-api.points.jsonl").exists()
    assert len(res.points) > len(res.fit.points)              # the host-work points too


def test_the_cli_prints_what_the_library_returns(calibration, monkeypatch):
    """On the same points (resumed, nothing re-timed) and the same measured ceilings, `specsight
    calibrate --json` prints the summary calibrate_profile returns, and writes the same profile."""
    from specsight.cli import main
    from specsight.cli.emit import dumps
    d, _, _ = calibration
    monkeypatch.setattr(calibrate.ceilings, "measure_peaks", lambda *a, **k: PEAKS)
    monkeypatch.setattr(calibrate.ceilings, "measure_dispatch", lambda *a, **k: DISPATCH)
    lib = calibrate_profile(CalibrationConfig(out=d / "lib.yaml", points=d / "cpu-api.points.jsonl", machine=CPU,
                                              **TINY))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["calibrate", "--device", "cpu", "--scale", "32", "--model", "llama-3.1-8b", "--draft",
                     "llama-3.2-1b", "--layers", "2", "--draft-layers", "1", "--grid", "cpu-tiny", "--repeats", "3",
                     "--points", str(d / "cpu-api.points.jsonl"), "--out", str(d / "cli.yaml"), "--json"]) == 0
    cli = json.loads(buf.getvalue())
    ours = json.loads(dumps(lib.summary))
    for k in ("profile", "profile_name", "elapsed_s", "loadavg_1m"):
        cli.pop(k, None), ours.pop(k, None)
    assert cli == ours
    assert load_profile(str(d / "cli.yaml")).efficiency == lib.profile.efficiency


def test_bad_inputs_are_refused_before_any_work(tmp_path):
    for cfg, field in ((dict(passes="cpu-nope"), "--passes"), (dict(stat="mean"), "--stat"),
                       (dict(holdout=1.0), "--holdout"), (dict(repeats=0), "--repeats")):
        with pytest.raises(SpecsightInputError) as e:
            calibrate_profile(CalibrationConfig(out=tmp_path / "x.yaml", machine=CPU, **cfg))
        assert e.value.field == field
    with pytest.raises(SpecsightInputError, match="--batch"):
        record_groundtruth(GroundTruthConfig(batches=(), machine=CPU))
    with pytest.raises(SpecsightInputError, match="--draft"):
        record_groundtruth(GroundTruthConfig(draft=None, ks=(0, 2), machine=CPU))
    assert not list(tmp_path.iterdir())


HUGE = 99999999999999999999


@pytest.mark.parametrize("cfg, field", [
    (dict(layers=HUGE), "--layers"), (dict(draft_layers=0), "--draft-layers"), (dict(repeats=HUGE), "--repeats"),
    (dict(warmup=-1), "--warmup"), (dict(sweeps=HUGE), "--sweeps"), (dict(holdout=1e30), "--holdout"),
    (dict(machine=MachineConfig(device="cpu", scale=HUGE)), "--scale"),
    (dict(machine=MachineConfig(device="cpu", threads=HUGE)), "--threads"),
    (dict(machine=MachineConfig(device="cpu", seed=-1)), "--seed"),
])
def test_calibration_numbers_are_bounded_before_torch(cfg, field, tmp_path, monkeypatch):
    """Every number of a calibration has an upper bound, checked before the machine is set up."""
    import calibrate.pipeline as pipeline
    monkeypatch.setattr(pipeline, "prepare_machine", lambda m: pytest.fail("the machine was set up"))
    with pytest.raises(SpecsightInputError) as e:
        calibrate_profile(CalibrationConfig(out=tmp_path / "x.yaml", **{"machine": CPU, **cfg}))
    assert e.value.field == field and ("in [" in e.value.allowed or "lie in" in e.value.allowed), str(e.value)


@pytest.mark.parametrize("cfg, field", [
    (dict(batches=(1, HUGE)), "--batch"), (dict(ks=(0, 65)), "--k"), (dict(layers=HUGE), "--layers"),
    (dict(prompt_len=10 ** 9), "--prompt-len"), (dict(steps=HUGE), "--steps"), (dict(warmup=HUGE), "--warmup"),
    (dict(temperature=1e30), "--temperature"), (dict(batches=tuple(range(1, 2000))), "--batch"),
])
def test_groundtruth_numbers_are_bounded_before_torch(cfg, field, monkeypatch):
    import calibrate.pipeline as pipeline
    monkeypatch.setattr(pipeline, "prepare_machine", lambda m: pytest.fail("the machine was set up"))
    with pytest.raises(SpecsightInputError) as e:
        record_groundtruth(GroundTruthConfig(**{"machine": CPU, **cfg}))
    assert e.value.field == field, str(e.value)


def test_record_and_validate_a_ground_truth_in_memory():
    """record_groundtruth with no `out` writes nothing and returns the run; validate_run takes the
    record itself and gives the table, summary and the report `specsight validate` prints."""
    from calibrate.validate import report_markdown
    res = record_groundtruth(GroundTruthConfig(layers=1, draft_layers=1, batches=(1, 2), ks=(0, 1), steps=2, warmup=0,
                                               prompt_len=8, machine=CPU))
    assert res.path is None and res.run["kind"] == "specsight-groundtruth"
    assert list(res.configs[["batch", "k"]].itertuples(index=False, name=None)) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert (res.configs["rounds"] == 2).all()
    assert res.run["provenance"]["arguments"]["ks"] == [0, 1] and res.run["provenance"]["scale"] == 32
    v = validate_run(res.run, hardware="a100-80gb-sxm.vidur", dtype="bf16")
    assert len(v.table) == 4 and v.markdown == report_markdown(v.table, v.summary)
    with pytest.raises(SpecsightInputError, match="--hardware"):
        validate_run(res.run)                  # a CPU run has no datasheet profile to default to


@pytest.mark.parametrize("flag", ["--hardware", "--gpu", "--profile"])
def test_hardware_flag_and_its_aliases(flag, tmp_path):
    from calibrate.groundtruth import write_run
    from specsight.cli import main
    run = record_groundtruth(GroundTruthConfig(layers=1, batches=(1,), ks=(0,), steps=1, warmup=0, prompt_len=8,
                                               machine=CPU)).run
    path = write_run(run, tmp_path / "run.json")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["validate", str(path), flag, "a100-80gb-sxm.vidur", "--dtype", "bf16", "--json"]) == 0
    assert "a100-80gb-sxm.vidur" in json.loads(buf.getvalue())["profile"]


def test_grid_is_an_alias_of_passes_only_for_a_name(tmp_path):
    """--grid NAME picks a pass grid; --grid KEY=V1,V2 (the scenario-override grid of other
    commands) is refused with one line, before any work."""
    from specsight.cli import build_parser
    args = build_parser().parse_args(["calibrate", "--grid", "cpu-tiny", "--out", "x.yaml"])
    assert args.passes == "cpu-tiny"
    from specsight.cli import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["calibrate", "--device", "cpu", "--grid", "workload.rate=1,2",
                     "--out", str(tmp_path / "x.yaml")]) == 2
    assert err.getvalue().startswith("specsight: error: --grid=") and err.getvalue().count("\n") == 1
    assert not list(tmp_path.iterdir())
