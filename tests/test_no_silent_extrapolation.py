"""No silent extrapolation: a preset measured at K = k used at a larger K warns once, naming the
preset and its K; a best K at the edge of the K grid is flagged; a failure that repeats for every
point of a study is said once; a drafter head trained for another target is named in a warning."""
from __future__ import annotations

import warnings

import pytest

from simulator.common.errors import SpecsightWarning
from simulator.models.catalog import head_target_mismatch
from simulator.run import simulate
from simulator.speculation.acceptance_presets import PRESETS, k_extrapolation
from specsight.cli.breakeven_text import format_text
from specsight.studies.breakeven.study import breakeven
from specsight.studies.shared.points import run_points

FIXED = {
    "name": "extrapolation", "seed": 3,
    "hardware": {"kind": "fixed", "target_step_s": 0.02, "draft_step_s": 0.002},
    "drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 4},
    "acceptance": {"model": "preset", "name": "minimax-m3-eagle3"},          # measured at K = 3
    "workload": {"arrival": {"process": "closed_loop", "concurrency": 1}, "num_requests": 4,
                 "prompt_len": 8, "output_len": 16},
}


def _specsight_warnings(caught: list) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, SpecsightWarning)]


def test_a_preset_past_its_k_is_named_with_its_k():
    assert PRESETS["minimax-m3-eagle3"].k == 3
    text = k_extrapolation("minimax-m3-eagle3", 4)
    assert text.startswith("acceptance preset minimax-m3-eagle3 was measured at K=3")
    assert k_extrapolation("minimax-m3-eagle3", 3) is None          # at its own K: a measurement
    assert k_extrapolation("lamda-8b-137b", 8) is None              # a per-token alpha holds at any K
    with pytest.warns(SpecsightWarning, match="minimax-m3-eagle3 was measured at K=3"):
        simulate(FIXED)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        simulate({**FIXED, "drafter": {**FIXED["drafter"], "num_speculative_tokens": 3}})
    assert not _specsight_warnings(caught)


@pytest.mark.parametrize("workers", [None, 2])
def test_a_study_warns_once_however_many_points_and_workers(workers):
    """Four points at K = 4..7, in this process or in two pool workers: one warning."""
    from specsight.studies.shared.executors import open_executor
    points = [{"drafter.num_speculative_tokens": k} for k in (4, 5, 6, 7)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if workers is None:
            run_points(FIXED, points, progress=False)
        else:
            with open_executor(workers) as ex:
                run_points(FIXED, points, executor=ex, progress=False)
    said = _specsight_warnings(caught)
    assert len(said) == 1 and "measured at K=3" in said[0]


def test_a_failure_every_point_repeats_is_said_once(capsys):
    """A real engine refuses fixed step costs: every point fails with the same error."""
    points = [{"acceptance": {"model": "iid", "alpha": a}, "engine.kind": "vllm"} for a in (0.2, 0.4, 0.6)]
    recs = run_points(FIXED, points, progress=False)
    assert all(r["error"] for r in recs)
    err = capsys.readouterr().err.splitlines()
    assert sum("failed:" in line for line in err) == 1
    assert "2 more point(s) failed with the same error" in err


def test_curves_that_fail_alike_under_an_engine_are_one_line():
    """Requests longer than Llama-2-7B's 4,096-token window: every K curve fails with the same
    error under the engine, said once for all of them."""
    long = {**FIXED, "hardware": {"gpu": "h100-sxm"}, "model": "llama-2-7b",
            "drafter": {"method": "ngram", "num_speculative_tokens": 2},
            "acceptance": {"model": "iid", "alpha": 0.6},
            "workload": {**FIXED["workload"], "prompt_len": 4096, "output_len": 16}}
    res = breakeven(long, axis="alpha", values="0.5,0.8", ks="1,2", engines="ideal", workers=1, progress=False)
    failed = [s for s in res.skipped if "every point failed" in s]
    assert len(failed) == 1 and failed[0].startswith("K=1, K=2 under engine ideal: every point failed, e.g. ")
    assert "context window of 4096 tokens" in failed[0]


def test_a_best_k_at_the_grids_edge_is_flagged():
    """At alpha 0.9 and near-free drafts the largest K tried is the best: say so, and how to try more."""
    src = {**FIXED, "acceptance": {"model": "iid", "alpha": 0.9}}
    res = breakeven(src, axis="alpha", values="0.3,0.9", ks="1,2", workers=1, progress=False)
    assert res.verdict.best_k["0.9"] == 2
    text = format_text(res, {}, 0.0)
    assert "best K at alpha = 0.9 is the largest K tried (K=2): a larger K may pay more; extend --k" in text
    res = breakeven(src, axis="k", values="1,2", ks="1", workers=1, progress=False)
    assert "best K over the whole axis is the largest K tried (K=2)" in format_text(res, {}, 0.0)
    assert "extend --values" in format_text(res, {}, 0.0)


def test_a_head_trained_for_another_target_is_named():
    text = head_target_mismatch("eagle3-llama-3.1-70b", "llama-3.1-70b")
    assert "meta-llama/Llama-3.3-70B-Instruct" in text and "meta-llama/Llama-3.1-70B-Instruct" in text
    assert head_target_mismatch("eagle3-llama-3.1-8b", "llama-3.1-8b") is None
    sc = {**FIXED, "hardware": {"gpu": "h100-sxm", "tp": 4}, "model": "llama-3.1-70b",
          "drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-70b", "num_speculative_tokens": 3},
          "workload": {**FIXED["workload"], "num_requests": 2, "output_len": 4}}
    with pytest.warns(SpecsightWarning, match="was trained for meta-llama/Llama-3.3-70B-Instruct"):
        simulate(sc)


def test_a_command_over_several_studies_warns_once(tmp_path, capsys):
    """`breakeven --engines ideal,vllm` runs one study per engine (each resetting Python's own
    once-only registry): the command still prints the preset's warning once."""
    from scenario_files import write_scenario

    from specsight.cli import main
    roof = {**FIXED, "hardware": {"gpu": "h100-sxm"}, "model": "llama-3.1-8b"}
    path = write_scenario(tmp_path / "roof.yaml", roof, "Does K=4 pay past the preset's K? (test scenario)")
    assert main(["breakeven", str(path), "--axis", "batch", "--values", "1,2", "--k", "4", "--workers", "1",
                 "--out", str(tmp_path / "be"), "--no-progress", "--engines", "ideal,vllm"]) == 0
    err = capsys.readouterr().err
    assert err.count("was measured at K=3") == 1
