"""`specsight simulate`: JSON and table output, --set, --baseline, --out, and input errors."""
from __future__ import annotations

import json
import textwrap

import pandas as pd
import pytest

from specsight.cli import main

SCENARIO = textwrap.dedent("""\
    # What speedup does K = 3 give a single user on fixed step costs?
    name: cli-demo
    seed: 3
    hardware: {kind: fixed, target_step_s: 0.02, draft_step_s: 0.001}   # s per pass, s per draft step
    drafter: {method: draft_model, model: llama-3.2-1b, num_speculative_tokens: 3}
    acceptance: {model: iid, alpha: 0.7}
    policy: {kind: static}
    workload: {arrival: closed_loop, concurrency: 2, num_requests: 20, prompt_len: 64, output_len: 64}
    slo: {tpot_ms_p99: 50, ttft_ms_p99: 2000}
    """)
REQUIRED = ("num_iterations", "output_tokens_per_s", "tpot_ms_p50", "tpot_ms_p99", "ttft_ms_p50",
            "ttft_ms_p99", "mean_tokens_per_round")


@pytest.fixture
def scenario_path(tmp_path):
    p = tmp_path / "cli.yaml"
    p.write_text(SCENARIO)
    return p


def test_json_summary_is_one_object(scenario_path, capsys):
    assert main(["simulate", str(scenario_path), "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    s = json.loads(out)
    for key in REQUIRED:
        assert isinstance(s[key], (int, float)), key
    assert s["num_requests"] == 20 and s["scenario"] == "cli-demo"
    assert "speedup_output_tokens_per_s" not in s


def test_baseline_adds_speedups_and_set_overrides(scenario_path, capsys):
    assert main(["simulate", str(scenario_path), "--json", "--baseline",
                 "--set", "workload.num_requests=10", "--set", "acceptance.alpha=0.8"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["num_requests"] == 10
    assert s["speedup_output_tokens_per_s"] > 1.5
    assert s["baseline_tpot_ms_p50"] == pytest.approx(20.0)


def test_table_output(scenario_path, capsys):
    assert main(["simulate", str(scenario_path)]) == 0
    out = capsys.readouterr().out
    assert "output_tokens_per_s" in out and "[latency (ms)]" in out


def test_out_writes_tables_and_summary(scenario_path, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", str(scenario_path), "--baseline", "--out", str(out), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert json.loads((out / "summary.json").read_text()) == s
    req = pd.read_parquet(out / "requests.parquet")
    it = pd.read_parquet(out / "iterations.parquet")
    assert len(req) == 20 and len(it) == s["num_iterations"]
    assert (out / "baseline" / "requests.parquet").exists() and (out / "scenario.yaml").exists()


@pytest.mark.parametrize("extra, needle", [
    (["--set", "engine.max_num_seq=3"], "engine.max_num_seq"),
    (["--set", "acceptance.alpha=2"], "acceptance.alpha"),
    (["--set", "nonsense"], "--set"),
])
def test_bad_input_is_one_line_and_exit_2(scenario_path, capsys, extra, needle):
    assert main(["simulate", str(scenario_path)] + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("specsight: error: ") and err.count("\n") == 1 and needle in err


def test_missing_file_is_exit_2(tmp_path, capsys):
    assert main(["simulate", str(tmp_path / "nope.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_roofline_prints_the_profile_on_stderr(tmp_path, capsys):
    p = tmp_path / "roof.yaml"
    p.write_text(textwrap.dedent("""\
        hardware: {gpu: h100-sxm, tp: 1}
        model: llama-3.1-8b
        workload: {arrival: {process: poisson, qps: 5}, num_requests: 20, prompt_len: 200, output_len: 50}
        """))
    assert main(["simulate", str(p), "--json"]) == 0
    cap = capsys.readouterr()
    assert "hardware profile h100-sxm" in cap.err
    assert json.loads(cap.out)["hardware_profile"].startswith("hardware profile h100-sxm")


def test_a_reader_that_leaves_early_gets_no_traceback():
    """`specsight ... | head`: the reader closes the pipe (here `true`, which never reads); the
    command stops quietly with 141 (128 + SIGPIPE), as cat does, instead of a BrokenPipeError."""
    import subprocess
    import sys
    r = subprocess.run(f"'{sys.executable}' -m specsight.cli profiles | true; exit ${{PIPESTATUS[0]}}",
                       shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=120)
    assert "Traceback" not in r.stderr and r.returncode in (0, 141), (r.returncode, r.stderr)


def test_a_request_longer_than_the_kv_cache_names_the_workload_and_its_length(capsys):
    """With the KV capacity derived from memory, the error's value is the longest request's
    tokens (what the user can change), not the block count."""
    from simulator.common.paths import REPO_ROOT
    sc = str(REPO_ROOT / "scenarios" / "llama8b-h100-eagle3-chat.yaml")
    assert main(["simulate", sc, "--set", "hardware.gpu=rtx-4090", "--set", "workload.prompt_len=100000",
                 "--set", "workload.num_requests=4"]) == 2
    err = capsys.readouterr().err
    line = err.splitlines()[-1]           # (the line before names the hardware profile)
    assert line.startswith("specsight: error: workload (longest prompt_len + output_len + K, tokens)=100"), err
    assert "KV cache" in line


def test_a_request_longer_than_the_models_context_window_is_refused(capsys):
    """Llama-3.1-8B's config.json says max_position_embeddings 131072: a 131,000-token prompt with
    500 output tokens is refused (an engine would), whatever memory there is; 130,000 + 500 is not."""
    from simulator.common.paths import REPO_ROOT
    from simulator.models.catalog import load_model
    assert load_model("llama-3.1-8b").max_position_embeddings == 131072
    sc = str(REPO_ROOT / "scenarios" / "llama8b-h100-eagle3-chat.yaml")
    base = ["simulate", sc, "--set", "hardware.gpu=h200-sxm", "--set", "workload.output_len=500",
            "--set", "workload.num_requests=2", "--set", "workload.arrival=closed_loop",
            "--set", "workload.concurrency=1"]
    assert main([*base, "--set", "workload.prompt_len=131000"]) == 2
    line = capsys.readouterr().err.splitlines()[-1]
    assert line.startswith("specsight: error: workload (longest prompt_len + output_len, tokens)=131500: exceeds "
                           "llama-3.1-8b's context window of 131072 tokens"), line
    assert main([*base, "--set", "workload.prompt_len=130000", "--json"]) == 0
