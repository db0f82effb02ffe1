"""A real engine's runs predicted (calibrate/engine_groundtruth.py) and its host time fitted from them
(calibrate/engine_host_fit.py): vLLM's counters as conditional rates, the fit recovering known
constants from runs made by the closed form, crossovers, and docs/validation.md's real-engine table."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from calibrate.engine_groundtruth import (
    REPEATED_FILE,
    REPEATED_PROFILE,
    RESULTS_FILE,
    conditional_rates,
    crossovers,
    load_results,
    match_probability,
    request_rounds,
)
from calibrate.engine_host_fit import fit_host, passes_s, tokens_per_round
from simulator.common.errors import SpecsightInputError

ROOT = Path(__file__).resolve().parents[1]
CPU_YAML = "tests/data/calibration_cpu/cpuAR.yaml"


def test_vllm_counters_become_conditional_rates():
    """c_i (drafts accepting >= i + 1 tokens) -> alpha_i = c_i / c_{i-1}; their running products give
    back c_j / drafts, so the expected tokens a round is 1 + accepted / drafts exactly."""
    acc = {"num_drafts": 100, "num_draft_tokens": 300, "num_accepted_tokens": 170, "accepted_per_pos": [80, 60, 30]}
    rates = conditional_rates(acc, 3)
    assert rates == pytest.approx([0.8, 0.75, 0.5])
    tokens = 1 + sum(np.prod(rates[:j + 1]) for j in range(3))
    assert tokens == pytest.approx(1 + 170 / 100)
    assert conditional_rates(acc, 5)[3:] == [0.0, 0.0]                  # positions no draft had
    assert conditional_rates({**acc, "accepted_per_pos": [0, 0, 0]}, 3) == [0.0, 0.0, 0.0]
    with pytest.raises(SpecsightInputError, match="accepted_per_pos"):
        conditional_rates({**acc, "accepted_per_pos": [50, 60, 30]}, 3)


def test_request_rounds_and_match_probability_from_the_counters():
    run = {"method": "ngram", "batch": 4, "output_len": 33, "repeats": [{}, {}],
           "acceptance": {"num_drafts": 100, "num_accepted_tokens": 56, "accepted_per_pos": [40, 16]}}
    # 2 repeats x 4 requests x 32 decode tokens = 256 tokens; 56 came as accepted drafts: 200 rounds
    assert request_rounds(run) == 200.0
    assert match_probability(run) == pytest.approx(0.5)
    assert tokens_per_round(run) == pytest.approx(256 / 200)
    # EAGLE drafts every round: its drafts are its rounds (K = 4, everything accepted, 63 tokens a
    # request: 13 rounds each, the last one's accepted tokens past the output counted, not emitted)
    eagle = {**run, "method": "eagle", "batch": 1, "output_len": 64, "repeats": [{}, {}, {}],
             "acceptance": {"num_drafts": 39, "num_accepted_tokens": 156, "accepted_per_pos": [39] * 4}}
    assert request_rounds(eagle) == 39.0 and tokens_per_round(eagle) == pytest.approx(189 / 39)


def _run(name, method, B, k, tpot_ms, acc=None, model="tiny-s"):
    d = {"name": name, "model": model, "method": method, "k": k, "batch": B, "prompt_len": 32, "output_len": 33,
         "target_config": f"models/groundtruth/{model}/config.json",
         "draft_config": f"models/groundtruth/{model}-eagle/config.json" if method == "eagle" else None,
         "repeats": [{}], "tpot_ms": tpot_ms, "acceptance": acc, "env": {"vllm": "0.32.0", "dtype": "fp32"}}
    return d


def test_the_host_fit_recovers_constants_from_runs_made_by_the_closed_form():
    """Runs whose step is exactly the predicted passes + a + b B (plain) and whose round adds
    P(B, K) = r + s K B (EAGLE, one token accepted a round; its speedup against that plain step):
    the fit returns a, b, r, s and held-out errors of zero."""
    a, b, r, s = 1.5e-3, 0.08e-3, 0.6e-3, 0.03e-3
    runs = []
    for B in (1, 2, 4, 8, 16):
        run = _run(f"p{B}", "plain", B, 0, 0.0)
        run["tpot_ms"] = 1e3 * (passes_s(run, CPU_YAML) + a + b * B)
        runs.append(run)
    for B in (1, 4, 16):
        for k in (1, 2, 4):
            rounds = B * 32 / 2                      # each round emits 2 tokens: one accepted
            acc = {"num_drafts": rounds, "num_draft_tokens": rounds * k, "num_accepted_tokens": rounds,
                   "accepted_per_pos": [rounds] + [0] * (k - 1)}
            run = _run(f"e{B}-{k}", "eagle", B, k, 0.0, acc)
            run["tpot_ms"] = 1e3 * (passes_s(run, CPU_YAML) + a + b * B + r + s * k * B) / 2
            plain_ms = 1e3 * (passes_s({**run, "method": "plain", "k": 0}, CPU_YAML) + a + b * B)
            run["speedup"] = plain_ms / run["tpot_ms"]
            runs.append(run)
    runs.append({**_run("m1", "plain", 1, 0, 99.0, model="tiny-m")})      # another model's: not fitted
    fit = fit_host(runs, "tiny-s", CPU_YAML)
    it, p = fit["iteration"], fit["proposer"]["eagle"]
    assert (it["a_s"], it["b_s"]) == (pytest.approx(a, rel=1e-6), pytest.approx(b, rel=1e-6))
    assert p["round_s"] == pytest.approx(r, rel=1e-5) and p["step_per_seq_s"] == pytest.approx(s, rel=1e-5)
    assert p["round_per_seq_s"] == pytest.approx(0, abs=1e-9) and p["step_s"] == pytest.approx(0, abs=1e-9)
    assert it["heldout"]["max_error"] < 1e-6 and p["heldout"]["max_error"] < 1e-6
    assert len(it["points"]) == 5 and p["runs"] == 9


def test_crossovers_are_found_and_judged_within_one_grid_step():
    rows = [{"model": "m", "method": "eagle", "acceptance_design": "agree", "k": 4, "batch": B,
             "measured_speedup": ms, "predicted_speedup": ps}
            for B, ms, ps in ((1, 1.7, 1.8), (4, 1.3, 1.2), (8, 1.05, 0.98), (16, 0.97, 0.9))]
    (c,) = [c for c in crossovers(rows) if c["axis"] == "batch"]
    assert (c["measured"], c["predicted"], c["reproduced"]) == (16, 8, True)
    rows[2]["predicted_speedup"] = rows[3]["predicted_speedup"] = 1.2       # never crosses: past the grid's end
    (c,) = [c for c in crossovers(rows) if c["axis"] == "batch"]
    assert (c["predicted"], c["reproduced"]) == (None, True)
    rows[3]["measured_speedup"] = 1.2
    rows[1]["measured_speedup"] = 0.9
    (c,) = [c for c in crossovers(rows) if c["axis"] == "batch"]
    assert (c["measured"], c["reproduced"]) == (4, False)
    # a miss says why from the two runs either side: resolved (no spread given: the medians) ...
    assert c["resolved"] and c["why"] == ("the prediction crosses elsewhere: measured batch 1: 1.70 [1.70, 1.70] "
                                          "then batch 4: 0.90 [0.90, 0.90]; predicted 1.80 and 1.20")
    rows[1]["speedup_spread"] = [0.8, 1.1]        # ... or within its repeats' noise
    (c,) = [c for c in crossovers(rows) if c["axis"] == "batch"]
    assert not c["resolved"] and c["why"].startswith("within its repeats' noise: measured batch 1: 1.70")
    assert "batch 4: 0.90 [0.80, 1.10], the repeats straddle 1" in c["why"]


def test_a_bad_results_file_is_one_line():
    with pytest.raises(SpecsightInputError, match="FILE"):
        load_results(ROOT / "no-such-file.jsonl")


@pytest.mark.timeout(1200)      # it simulates every committed run of both files (seconds on a quiet machine)
@pytest.mark.parametrize("marker, path, profile", [("engine-groundtruth", None, None),
                                                   ("engine-groundtruth-repeated", REPEATED_FILE, REPEATED_PROFILE)])
def test_docs_real_engine_table_is_what_validate_prints(capsys, marker, path, profile):
    """docs/validation.md's real-engine tables are `specsight validate --engine-groundtruth [FILE]`'s
    output on the committed results files (the full grid's, the many-repeat set's), character for
    character."""
    from specsight.cli import main
    args = ["validate", "--engine-groundtruth"] + ([str(path)] if path else [])
    assert main(args + (["--hardware", str(profile)] if profile else [])) == 0
    out = capsys.readouterr().out
    doc = (ROOT / "docs" / "validation.md").read_text()
    m = re.search(f"<!-- {marker}:begin -->\n(.*?)<!-- {marker}:end -->", doc, re.S)
    assert m is not None, f"docs/validation.md has no {marker} table markers"
    assert m.group(1) == out
    if path == REPEATED_FILE:                  # the README quotes the goals' figures from this table
        med, mx = re.search(r"Speedup error: median (\S+) % .*?, max (\S+) %", out).groups()
        side = re.search(r"side of 1 wrong on 0 of (\d+) runs", out)
        readme = " ".join((ROOT / "README.md").read_text().split())
        assert f"speedup error median {med} % and max {mx} %" in readme
        assert side is not None and f"right on all {side.group(1)} runs outside 0.95-1.05" in readme
        held = re.search(r"Held out .*?: (\d+) runs, speedup error median (\S+) %, max (\S+) %", out).groups()
        assert f"the {held[0]} runs of the model the host constants were not fitted on: {held[1]} % and {held[2]} %" \
            in readme
        assert main(["validate", "--engine-groundtruth", str(path)]) == 0     # ... and the full grid's profile's max
        day_old = re.search(r"Speedup error: median \S+ % .*?, max (\S+) %", capsys.readouterr().out).group(1)
        assert f"Priced with the full grid's profile, calibrated on an earlier day, the max is {day_old} %" in readme


def test_validate_json_has_the_keys_the_issue_names(tmp_path, capsys):
    """--json on a file of three of the committed runs (one speculative run and its plain baseline
    among them): rows with name, method, batch, k, measured and predicted speedup, error, side_ok
    and TPOTs; median_error and max_error over the rows."""
    header, runs = load_results(RESULTS_FILE)
    spec = next(r for r in runs if r["method"] != "plain")
    base = next(r for r in runs if r["name"] == spec["baseline"])
    f = tmp_path / "runs.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in (header, spec, base)) + "\n")
    from specsight.cli import main
    assert main(["validate", "--engine-groundtruth", str(f), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = out["rows"]
    assert {"name", "method", "batch", "k", "measured_speedup", "predicted_speedup", "error", "side_ok",
            "measured_tpot_ms", "predicted_tpot_ms", "measured_plain_tpot_ms", "predicted_plain_tpot_ms"} <= set(row)
    assert row["name"] == spec["name"] and out["median_error"] == out["max_error"] == row["error"]
    assert row["error"] == pytest.approx(abs(row["predicted_speedup"] - row["measured_speedup"])
                                         / row["measured_speedup"])
    groups = out["coverage_groups"]              # the fitted-on model's runs and the held-out runs apart
    assert set(groups) == {"fitted_on", "held_out"}
    assert groups["fitted_on"]["rows"] + groups["held_out"]["rows"] == out["coverage"]["rows"]


def test_the_calibration_bf16_cpu_linear_is_onednn_prepacked_and_computes_x_w():
    """bf16 on a CPU the calibration's linear layer runs oneDNN's GEMM on a prepacked weight (the
    kernel vLLM's CPU build uses), with the same result as x @ W up to bf16 rounding."""
    import torch

    from calibrate.layers import Linear
    if not torch.backends.mkldnn.is_available():
        pytest.skip("torch without oneDNN")
    torch.manual_seed(0)
    lin = Linear(64, 96, False, torch.bfloat16, torch.device("cpu"))
    with torch.no_grad():
        lin.weight.normal_(0.0, 0.02)
    x = torch.randn(2, 3, 64, dtype=torch.bfloat16)
    plain = lin(x)
    lin.prepack()
    assert getattr(lin, "packed", None) is not None
    assert torch.allclose(lin(x).float(), plain.float(), atol=2e-2, rtol=2e-2)
    assert torch.allclose(lin(x).float(), x.float() @ lin.weight.float(), atol=2e-2, rtol=2e-2)


def test_host_file_records_the_load_range_of_the_fitted_models_repeats_only():
    from calibrate.engine_host_fit import runs_load
    runs = [{"model": "tiny-s", "repeats": [{"load_1m": 2.5}, {"load_1m": 0.75}]},
            {"model": "tiny-s", "repeats": [{"load_1m": 3.0}, {"load_1m": None}]},
            {"model": "tiny-m", "repeats": [{"load_1m": 9.0}]}]
    assert runs_load(runs, "tiny-s") == [0.75, 3.0]
    assert runs_load(runs, "tiny-x") is None


def test_a_crossover_is_resolved_only_when_the_repeats_either_side_stay_clear_of_one():
    from calibrate.engine_groundtruth import crossovers

    def row(b, s, spread, pred):
        return {"model": "m", "method": "eagle", "acceptance_design": "a", "k": 2, "batch": b,
                "measured_speedup": s, "speedup_spread": spread, "predicted_speedup": pred}
    clear = [row(1, 1.4, [1.2, 1.6], 1.3), row(2, 1.2, [1.05, 1.3], 1.1), row(4, 0.8, [0.7, 0.9], 0.9)]
    blurred = [row(1, 1.4, [1.2, 1.6], 1.3), row(2, 1.1, [0.95, 1.3], 1.1), row(4, 0.9, [0.8, 1.05], 0.9)]
    (c,) = crossovers(clear)
    assert (c["measured"], c["resolved"], c["reproduced"]) == (4, True, True)
    (c,) = crossovers(blurred)
    assert (c["measured"], c["resolved"]) == (4, False)
