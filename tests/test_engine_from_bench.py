"""`specsight calibrate --engine E --from-bench FILE...` (calibrate/engine_fit.py, bench_files.py):
benchmark files in vLLM's and SGLang's formats written from simulations with known host constants
are fitted back within 10 % (the simulated runs are 16 requests; the fitted standard errors are
1-3 % of the values, 11 % for vLLM v1-0.9's per_seq_ms), the engine profile round-trips and
changes the prediction the way its constants say, an absent profile leaves the engine's built-in
constants, and bad files are one input-error line."""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import yaml

from calibrate.bench_files import ACCEPT_KEY, BenchRun, read_bench_file, result_dict
from calibrate.engine_fit import accept_alpha, fit_engine, profile_dict, run_scenario, with_profile, write_candidate
from simulator.common.errors import SpecsightInputError
from simulator.engines import engine_for
from simulator.engines.host import PROFILE_CONSTANTS_MS, VLLM_V1_HOST, load_host_overrides
from simulator.run import simulate
from simulator.scenario.scenario import load_scenario
from specsight.cli import main as calibrate_main

DEPLOYMENT = {"name": "bench", "seed": 1, "hardware": {"gpu": "h100-sxm", "tp": 1}, "model": "llama-3.1-8b",
              "drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3},
              "acceptance": {"model": "iid", "alpha": 0.7},
              "workload": {"arrival": {"process": "closed_loop", "concurrency": 4}, "num_requests": 16,
                           "prompt_len": 256, "output_len": 64}}
# (speculative, concurrency) per file: runs with and without speculation
RUNS = [(True, 1), (True, 4), (False, 4), (True, 8)]
# per (engine, version): the constants the runs can tell apart (the others are kept, see below)
TRUTH = {("vllm", "v1"): {"sync_ms": 0.6}, ("sglang", "v0.5"): {"base_ms": 2.0, "per_seq_ms": 0.06},
         ("vllm", "v1-0.9"): {"base_ms": 2.0, "per_seq_ms": 0.06, "sync_ms": 0.4}}
# vLLM V1 overlaps its scheduler with the GPU: base and per-request host time are hidden (kept);
# SGLang's EAGLE round pays base and two syncs together: sync is not separable (kept); vLLM V1 at
# v0.9 overlaps nothing, so the plain run pays H(B) without the round's two syncs: all three fit
KEPT = {("vllm", "v1"): {"base_ms", "per_seq_ms"}, ("sglang", "v0.5"): {"sync_ms"}, ("vllm", "v1-0.9"): set()}
MAX_STDERR = {("vllm", "v1"): 0.1, ("sglang", "v0.5"): 0.1, ("vllm", "v1-0.9"): 0.15}   # of the true value
TOLERANCE = 0.10


def deployment(engine, version=None):
    return load_scenario({**DEPLOYMENT, "engine": {"kind": engine, "version": version}})


def write_bench_files(tmp: Path, engine: str, truth_ms: dict, version: str | None = None) -> list[str]:
    """One file per run in the engine's documented format, from simulations with `truth_ms`."""
    dep = deployment(engine, version)
    prof = tmp / "truth.yaml"
    write_candidate(prof, engine, engine_for(engine, version).version, truth_ms)
    files = []
    for i, (spec, conc) in enumerate(RUNS):
        run = BenchRun("x", 1, 16, 256, 64, conc, math.inf, 1.0, None, None, 2.0 if spec else None)
        raw = copy.deepcopy(dict(run_scenario(dep, run, engine, str(prof)).source))
        if spec:
            raw["acceptance"] = DEPLOYMENT["acceptance"]
        s = simulate(load_scenario(raw)).summary
        d = result_dict(engine, {"completed": 16, "total_input_tokens": 256 * 16, "total_output_tokens": 64 * 16,
                                 "mean_tpot_ms": s["tpot_ms_mean"], "mean_ttft_ms": s["ttft_ms_mean"],
                                 "output_throughput": s["output_tokens_per_s"],
                                 "request_throughput": s["requests_per_s"], "request_rate": math.inf,
                                 "max_concurrency": conc}, s["mean_accept_length"] if spec else None)
        f = tmp / (f"vllm-{i}.json" if engine == "vllm" else f"sglang-{i}.jsonl")
        f.write_text(json.dumps(d, indent=2) if engine == "vllm" else json.dumps(d) + "\n")
        files.append(str(f))
    return files


@pytest.mark.parametrize("engine,version", list(TRUTH))
def test_fit_recovers_the_constants_the_files_were_written_with(tmp_path, engine, version):
    truth_ms = TRUTH[engine, version]
    files = write_bench_files(tmp_path, engine, truth_ms, version)
    out = tmp_path / "profile.yaml"
    scen = tmp_path / "deployment.yaml"
    scen.write_text(yaml.safe_dump({**DEPLOYMENT, "engine": {"kind": engine, "version": version}}))
    assert calibrate_main(["calibrate", "--engine", engine, "--from-bench", *files, "--scenario", str(scen),
                           "--out", str(out)]) == 0
    prof = yaml.safe_load(out.read_text())
    assert (prof["engine"], prof["version"]) == (engine, version)
    assert set(prof["constants"]) == set(truth_ms)                # the identifiable ones, no more
    for name, truth in truth_ms.items():
        c = prof["constants"][name]
        assert c["value"] == pytest.approx(truth, rel=TOLERANCE), (name, c)
        assert c["stderr"] is not None and c["stderr"] < MAX_STDERR[engine, version] * truth
        assert abs(c["value"] - truth) < 3 * c["stderr"], (name, c)
    assert prof["error"]["heldout_median"] < 0.02
    assert prof["provenance"]["files"] == files and prof["provenance"]["date"]
    assert set(prof["kept"]) == KEPT[engine, version]
    # the profile applies at the version it was fitted on: the engine's host is the fitted one
    ov = load_host_overrides(out, engine, version)
    host = ov.apply(engine_for(engine, version).host(None))
    for name, field in PROFILE_CONSTANTS_MS.items():
        expect = prof["constants"][name]["value"] if name in truth_ms else prof["kept"][name]["value"]
        assert getattr(host, field) == pytest.approx(expect * 1e-3, rel=1e-5)


def test_the_profile_round_trips_and_changes_the_prediction(tmp_path):
    dep = deployment("vllm")
    path = tmp_path / "p.yaml"
    write_candidate(path, "vllm", "v1", {"sync_ms": 0.5})
    ov = load_host_overrides(path, "vllm", "v1")
    assert ov.sync_s == pytest.approx(0.5e-3) and ov.base_s is None
    host = ov.apply(VLLM_V1_HOST)
    assert (host.base_s, host.per_seq_s) == (VLLM_V1_HOST.base_s, VLLM_V1_HOST.per_seq_s)
    # one sync a round at B = 1: 0.5 ms - 0.0513 ms more per round
    assert host.exposed_s(1, 1.0, True, 1) - VLLM_V1_HOST.exposed_s(1, 1.0, True, 1) == pytest.approx(0.4487e-3)
    builtin = simulate(with_profile(dep, "vllm", None)).summary
    slower = simulate(with_profile(dep, "vllm", str(path))).summary
    rounds_per_token = 1 / builtin["mean_accept_length"]
    assert slower["tpot_ms_mean"] > builtin["tpot_ms_mean"] + 0.3 * 0.4487 * rounds_per_token
    # the written profile (fit output) reads back through the scenario's engine.profile
    files = write_bench_files(tmp_path, "vllm", {"sync_ms": 0.5})
    from calibrate.bench_files import read_bench_files
    fit = fit_engine(dep, read_bench_files(files[:2], "vllm"), "vllm")
    written = tmp_path / "fit.yaml"
    written.write_text(yaml.safe_dump(profile_dict(fit, "deployment.yaml")))
    assert load_host_overrides(written, "vllm", "v1").sync_s == pytest.approx(fit.fitted_ms["sync_ms"] * 1e-3, rel=1e-5)
    assert simulate(with_profile(dep, "vllm", str(written))).summary["tpot_ms_mean"] > builtin["tpot_ms_mean"]


def test_absent_profile_is_the_builtin_constants_bit_for_bit(tmp_path):
    dep = deployment("sglang")
    a = simulate(dep).summary
    b = simulate(with_profile(dep, "sglang", None)).summary
    assert a["tpot_ms_mean"] == b["tpot_ms_mean"] and a["duration_s"] == b["duration_s"]


def test_profile_refused_for_another_engine_or_version(tmp_path):
    path = tmp_path / "p.yaml"
    write_candidate(path, "sglang", "v0.5", {"base_ms": 1.0})
    with pytest.raises(SpecsightInputError, match="fitted on vllm v1"):
        load_host_overrides(path, "vllm", "v1")
    with pytest.raises(SpecsightInputError, match="engine.profile"):
        simulate(load_scenario({**DEPLOYMENT, "engine": {"kind": "vllm", "version": "v0", "profile": str(path)}}))
    # vLLM V1's two versions share the built-in host constants but not what a fit sees (docs/engines.md)
    for fitted, other in (("v1", "v1-0.9"), ("v1-0.9", "v1")):
        write_candidate(path, "vllm", fitted, {"sync_ms": 0.5})
        with pytest.raises(SpecsightInputError, match=f"fitted on vllm {other}"):
            simulate(load_scenario({**DEPLOYMENT, "engine": {"kind": "vllm", "version": other, "profile": str(path)}}))
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"engine": "vllm", "version": "v1", "constants": {"launch_ms": {"value": 1}}}))
    with pytest.raises(SpecsightInputError, match="launch_ms"):
        load_host_overrides(bad, "vllm", "v1")


def test_accept_alpha_inverts_the_chain_accept_length():
    a = accept_alpha(1 + 0.7 + 0.49 + 0.343, 3)
    assert a == pytest.approx(0.7, abs=1e-9)
    assert accept_alpha(1.0, 4) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("text, field", [
    ("", "--from-bench"),
    ("not json\n", "f.json:1"),
    (json.dumps({"completed": 3}), "missing"),
    (json.dumps({"completed": 0, "total_input_tokens": 1, "total_output_tokens": 1, "mean_tpot_ms": 1.0}), "completed"),
    (json.dumps({"completed": 2, "total_input_tokens": 1, "total_output_tokens": 1, "mean_tpot_ms": "x"}),
     "mean_tpot_ms"),
    (json.dumps([1, 2]), "f.json:1"),
])
def test_bad_files_are_one_input_error_line(tmp_path, capsys, text, field):
    f = tmp_path / "f.json"
    f.write_text(text)
    with pytest.raises(SpecsightInputError, match=field):
        read_bench_file(f, "vllm")
    scen = tmp_path / "d.yaml"
    scen.write_text(yaml.safe_dump(DEPLOYMENT))
    assert calibrate_main(["calibrate", "--engine", "vllm", "--from-bench", str(f), "--scenario", str(scen),
                           "--out", str(tmp_path / "o.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("specsight: error:") and "\n" not in err


def test_the_documented_field_names_are_read():
    # vLLM writes request_rate as "inf" and the spec-decode acceptance under spec_decode_*;
    # SGLang's JSONL carries accept_length (null without speculation)
    assert ACCEPT_KEY == {"vllm": "spec_decode_acceptance_length", "sglang": "accept_length"}
    d = result_dict("vllm", {"completed": 4, "total_input_tokens": 40, "total_output_tokens": 80, "mean_tpot_ms": 5.0,
                             "mean_ttft_ms": 9.0, "output_throughput": 1.0, "request_throughput": 1.0,
                             "request_rate": math.inf, "max_concurrency": None}, 2.5)
    assert d["request_rate"] == "inf" and d["spec_decode_acceptance_length"] == 2.5
