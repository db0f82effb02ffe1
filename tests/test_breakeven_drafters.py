"""`breakeven --axis drafter --metric capacity`: each drafter's capacity within the SLO is the one
`capacity_plan` finds with that drafter set in the scenario (the same search, the same probes),
on the fixed-cost replica of test_saturation.py."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from scenario_files import write_scenario
from test_saturation import SATURATING

from specsight.cli import main
from specsight.studies.breakeven.study import breakeven
from specsight.studies.plan.study import capacity_plan

K = 3
TOL = 0.1
OWN = "draft_model:llama-3.2-1b"                      # the scenario's own drafter (alpha 0.6)
VALUES = [OWN, f"{OWN}@0.3", "ngram@0.8"]
SET = {OWN: [], f"{OWN}@0.3": ["acceptance={model: iid, alpha: 0.3}"],
       "ngram@0.8": ["drafter={method: ngram, num_speculative_tokens: 3}", "acceptance={model: iid, alpha: 0.8}"]}


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return write_scenario(tmp_path_factory.mktemp("drafters") / "sat.yaml", SATURATING,
                          "Which drafter raises the capacity within the SLO? (test)")


@pytest.fixture(scope="module")
def study(path):
    return breakeven(path, axis="drafter", values=",".join(VALUES), ks=[K], metric="capacity", tolerance=TOL,
                     workers=1, progress=False)


def test_each_drafters_capacity_is_capacity_plans_search(path, study):
    df = study.frame.set_index("drafter")
    assert list(df.index) == VALUES and df["error"].eq("").all()
    plain = capacity_plan(path, target_qps=10, policies="off", tolerance=TOL, price_per_gpu_hour=1.0, workers=1,
                          progress=False).rows[0]["max_qps_per_replica"]
    for label, sets in SET.items():
        plan = capacity_plan(path, target_qps=10, policies="static", ks=[K], tolerance=TOL, price_per_gpu_hour=1.0,
                             overrides=sets, workers=1, progress=False)
        assert df.loc[label, "spec_capacity_qps_per_replica"] == plan.rows[0]["max_qps_per_replica"], label
        assert df.loc[label, "base_capacity_qps_per_replica"] == plain      # one plain decoding for every drafter
    # acceptance 0.3 is below the closed-form capacity break-even at K=3 (0.39, test_breakeven_capacity.py)
    assert df.loc[f"{OWN}@0.3", "speedup"] < 1.0 < df.loc[OWN, "speedup"] < df.loc["ngram@0.8", "speedup"]
    assert study.verdict.status == {f"K={K}": "pays with some drafters"}
    assert study.verdict.best_k == {OWN: K, f"{OWN}@0.3": 0, "ngram@0.8": K}
    assert study.verdict.breakeven == {f"K={K}": None}                 # no interpolation between drafters


def test_cli_text_csv_plot_and_json(path, tmp_path, capsys):
    argv = ["breakeven", str(path), "--axis", "drafter", "--values", ",".join(VALUES), "--k", str(K),
            "--metric", "capacity", "--tolerance", str(TOL), "--out", str(tmp_path), "--workers", "1", "--no-progress"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "pays with some drafters" in text and all(v in text for v in VALUES)
    csv = pd.read_csv(tmp_path / "breakeven_drafter.csv")
    assert list(csv["drafter"]) == VALUES and (tmp_path / "breakeven_drafter.png").exists()
    assert main([*argv, "--json"]) == 0                                # from the store
    obj = json.loads(capsys.readouterr().out)
    assert obj["values"] == VALUES and obj["best_k"]["ngram@0.8"] == K


@pytest.mark.parametrize("argv, needle", [
    (["--values", "ngram"], "needs its acceptance: ngram@PRESET or ngram@ALPHA; presets for ngram: pld-"),
    (["--values", "ngram@pld-vicuna"], "pld-vicuna-7b-specbench?"),
    (["--values", "ngram@1.5"], "an acceptance alpha lies in [0, 1]"),
    (["--values", "ngram@"], "name an acceptance after @"),
    (["--values", "eagle3@0.7"], "no eagle3 head for None"),
    (["--values", "nosuch@0.7"], "--values='nosuch@0.7'"),
    ([], "the drafter axis needs --values"),
    (["--values", OWN, "--metric", "tpot_p50"], "the drafter axis needs --metric capacity"),
])
def test_drafter_axis_input_errors(path, tmp_path, capsys, argv, needle):
    full = ["breakeven", str(path), "--axis", "drafter", "--out", str(tmp_path), "--workers", "1", "--no-progress"]
    if "--metric" not in argv:
        full += ["--metric", "capacity"]
    rc = main([*full, *argv])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1, err
