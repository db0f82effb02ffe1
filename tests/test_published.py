"""Published engine results as a validation table (specsight/studies/published/study.py,
data/published/engine_results.yaml, docs/validation.md, `specsight validate --published`).

What is asserted is what is true and stable: every row loads with its source, each row's scenario has
the row's setup, the error and side arithmetic, the predictions reproduce exactly, the docs page is
current, and the CLI's JSON keys. Whether the issue's goals are met is reported, not asserted."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from simulator.common.errors import SpecsightInputError
from simulator.run import simulate
from simulator.scenario.scenario import load_scenario
from simulator.speculation.acceptance_presets import PRESETS
from specsight.studies.published.report import goals, goals_lines, report_json, validation_markdown
from specsight.studies.published.study import (
    ENGINE_VERSIONS,
    NOT_MODELLED,
    PublishedRow,
    engine_for,
    lacks,
    load_published,
    misses,
    predict,
    relative_error,
    scenario_for,
    side_ok,
    stated_alpha,
    unpriced,
    validate_published,
)

ROOT = Path(__file__).resolve().parent.parent
CAT = load_published()
ROW4 = next(r for r in CAT.rows if r.name == "vllm-v1-llama3.1-8b-h100-eagle3-k4")


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return validate_published()


def test_every_row_loads_with_a_source_and_its_setup():
    assert len(CAT.rows) == 36          # issue 25: at least 35
    for r in CAT.rows:
        assert r.source and r.version and r.engine in ("vllm", "sglang", "trtllm"), r.name
        assert {"model", "gpu", "tp", "batch", "dataset", "precision"} <= set(r.setup), r.name
        assert r.figure > 0
        if r.checks == "speedup":
            assert r.acceptance in ("stated", "assumed") and r.acceptance_source, r.name
            assert r.acceptance_preset is None or r.acceptance_preset in PRESETS
        else:
            assert r.acceptance == "n/a"
    # the rows the catalog cannot express yet, and the ones that are not rows, each with a reason
    assert {w["ref"] for w in CAT.waiting} == {"1", "7", "14"}
    assert all(w["needs"] for w in CAT.waiting)
    assert {"5", "9", "12", "13"} <= {e["ref"] for e in CAT.excluded}
    assert all(e["why"] for e in CAT.excluded)
    assert "derived" in next(e["why"] for e in CAT.excluded if e["ref"] == "5")


def test_a_row_without_its_checked_figure_is_refused():
    with pytest.raises(SpecsightInputError, match="checked figure"):
        PublishedRow(name="x", ref="4", engine="vllm", version="v1", setup={"dataset": "mt-bench"},
                     published={"tpot_ms": 7.0}, checks="tokens_per_s", source="s")


@pytest.mark.parametrize("row", CAT.rows, ids=lambda r: r.name)
def test_the_scenario_has_the_rows_setup(row):
    sc = load_scenario(scenario_for(row, CAT.datasets))
    s = row.setup
    assert sc.model == s["model"] and sc.hardware.tp == s["tp"] and sc.hardware.gpu == s["gpu"]
    assert sc.hardware.dtype == s["precision"] and sc.engine.kind == "ideal"
    assert sc.workload.arrival == "closed_loop" and sc.workload.concurrency == s["batch"]
    out = s.get("output_tokens", CAT.datasets[s["dataset"]]["output_tokens"])
    assert scenario_for(row, CAT.datasets)["workload"]["output_len"] == out
    d = row.drafter
    if d is None:
        assert sc.drafter is None
        return
    assert sc.drafter.method == d["method"] and sc.drafter.model == d.get("model")
    assert sc.drafter.num_speculative_tokens == d["k"]
    assert sc.drafter.tree == bool(d.get("tree"))
    if d.get("tree"):
        assert sc.drafter.tree_nodes == d["tree"]["nodes"] and sc.drafter.tree_branches == d["tree"]["branches"]


def test_a_row_runs_at_its_publications_engine_version():
    """Under its own engine a row runs the version its publication ran where specsight models it
    (vLLM's Apr-Jul 2025 measurements: V1 at v0.9.x); under ideal, and for other rows, no version."""
    versions = set()
    for row in CAT.rows:
        own = scenario_for(row, CAT.datasets, row.engine)["engine"]
        assert own.get("version") == ENGINE_VERSIONS.get(row.version)
        assert "version" not in scenario_for(row, CAT.datasets)["engine"]
        versions.add(own.get("version"))
    assert "v1-0.9" in versions and ROW4.version in ENGINE_VERSIONS


def test_engine_args_reach_the_scenario_under_the_rows_own_engine_only():
    """A publication's benchmark arguments (setup.engine_args) set the engine's keys when the row runs
    under its own engine, and override that engine's defaults; under ideal they are absent."""
    row = next(r for r in CAT.rows if r.engine == "sglang" and r.drafter is not None)
    setup = {**row.setup, "engine_args": {"max_num_seqs": 64}}
    r = PublishedRow(**{**row.__dict__, "setup": setup})
    from simulator.scenario.engine_defaults import with_engine_defaults
    assert with_engine_defaults(load_scenario(scenario_for(r, CAT.datasets, "sglang"))).engine.max_num_seqs == 64
    assert with_engine_defaults(load_scenario(scenario_for(row, CAT.datasets, "sglang"))).engine.max_num_seqs == 48
    assert "max_num_seqs" not in scenario_for(r, CAT.datasets)["engine"]


def test_a_rows_own_lacks_text_replaces_its_groups():
    row = next(r for r in CAT.rows if r.checks == "tokens_per_s" and not r.lacks)
    assert lacks(row).startswith("lacks: ") and "unknown thing" not in lacks(row)
    own = PublishedRow(**{**row.__dict__, "lacks": "the unknown thing"})
    assert lacks(own) == "lacks: the unknown thing"


def test_unpriced_is_the_published_step_and_round_less_the_predicted():
    pred = {"plain_tpot_ms": 6.0, "spec_tpot_ms": 3.0, "accept_length": 3.0}
    # ROW4: plain 7.07 ms, speculative 4.05 ms at AL 3.08, K = 4
    plain, rnd = 7.07 - 6.0, 4.05 * 3.08 - 9.0
    assert unpriced(ROW4, pred) == (f"unpriced: {plain:+.2f} ms a plain step, {rnd:+.2f} ms a round "
                                    f"({(rnd - plain) / 4:+.2f} ms per draft token beyond the plain step's)")
    plain_row = next(r for r in CAT.rows if r.checks == "tokens_per_s")
    assert unpriced(plain_row, pred) == f"unpriced: {1000 / plain_row.figure - 6.0:+.2f} ms a plain step"
    loaded = next(r for r in CAT.rows if r.basis == "throughput")
    assert unpriced(loaded, pred) == ""


def test_the_engine_column_falls_back_to_ideal_while_an_engine_is_not_priced():
    """The switch point: resolve_deployment decides. Where it accepts the row's engine the row runs
    under it; where it refuses engine.kind the row runs as ideal, labelled so."""
    from simulator.scenario.resolve import resolve_deployment
    for row in CAT.rows:
        kind, label = engine_for(row, CAT.datasets)
        try:
            resolve_deployment(load_scenario(scenario_for(row, CAT.datasets, row.engine)))
            priced = True
        except SpecsightInputError as e:
            assert e.field == "engine.kind"
            priced = False
        assert (kind, label) == ((row.engine, row.engine) if priced else ("ideal", NOT_MODELLED))


def test_a_priced_engine_is_used_with_no_change_here(monkeypatch):
    """When resolve_deployment accepts a real engine, its rows run under it."""
    import simulator.scenario.resolve
    monkeypatch.setattr(simulator.scenario.resolve, "resolve_deployment", lambda scenario, *a, **k: None)
    assert engine_for(ROW4, CAT.datasets) == ("vllm", "vllm")


def test_a_stated_tree_accept_length_converts_exactly():
    """Row 3 states AL 5.88 on a depth-8, top-8 tree: the per-token alpha's tree rule gives the
    per-depth alpha whose 1 + a + ... + a^8 is 5.88."""
    a = stated_alpha(5.88, 8, 8)
    per_depth = 1 - (1 - a) ** 8
    assert sum(per_depth ** i for i in range(9)) == pytest.approx(5.88, abs=1e-12)
    a = stated_alpha(2.39, 4)                     # a chain: the tau rule itself
    assert sum(a ** i for i in range(5)) == pytest.approx(2.39, abs=1e-12)


def test_error_and_side_are_computed_right_on_a_synthetic_row():
    assert relative_error(2.5, 2.0) == pytest.approx(0.25)
    assert relative_error(1.5, 2.0) == pytest.approx(0.25)
    assert side_ok(1.2, 1.75) and side_ok(0.8, 0.93) and not side_ok(1.1, 0.9) and not side_ok(1.0, 1.2)
    row = PublishedRow(name="synthetic", ref="0", engine="vllm", version="v1",
                       setup={**ROW4.setup}, published={"speedup": 0.9}, checks="speedup", source="s",
                       acceptance="stated", acceptance_preset=ROW4.acceptance_preset, acceptance_source="s")
    assert misses(row, 0.10, side=False)          # outside 0.95-1.05: the side counts
    assert not misses(row, 0.10, side=True)
    assert misses(row, 0.16, side=True)           # past the 15 % goal
    inside = PublishedRow(**{**row.__dict__, "published": {"speedup": 0.97}})
    assert not misses(inside, 0.05, side=False)   # inside the band the side does not count
    df = pd.DataFrame([{"figure": "speedup", "published": 0.9, "predicted": 1.1, "error": relative_error(1.1, 0.9),
                        "side_ok": side_ok(1.1, 0.9), "acceptance": "stated"},
                       {"figure": "speedup", "published": 2.0, "predicted": 2.2, "error": 0.1, "side_ok": True,
                        "acceptance": "stated"},
                       {"figure": "tokens_per_s", "published": 100.0, "predicted": 90.0, "error": 0.1,
                        "side_ok": None, "acceptance": "n/a"}])
    g = goals(df)["stated"]
    assert g["speedup_median_error"] == pytest.approx((2 / 9 + 0.1) / 2)
    assert g["speedup_max_error"] == pytest.approx(2 / 9) and g["speedup_max_met"] is True
    assert g["side_rows"] == 2 and g["side_met"] is False and g["tokens_per_s_met"] is True
    # by how much: each figure less its limit, the rows past a per-row limit, the rows on the wrong side
    assert g["speedup_median_over"] == pytest.approx((2 / 9 + 0.1) / 2 - 0.15)
    assert g["speedup_max_over"] == pytest.approx(2 / 9 - 0.30) and g["speedup_rows_over"] == 0
    assert g["tokens_per_s_over"] == pytest.approx(0.1 - 0.15) and g["tokens_per_s_rows_over"] == 0
    assert g["side_wrong_rows"] == 1
    assert "7.8 points within the limit" in "\n".join(goals_lines(goals(df)))   # 22.2 % against 30 %
    assert goals(df)["assumed"]["speedup_rows"] == 0 and goals(df)["assumed"]["side_met"] is None


def _one_row_per_kind(table: pd.DataFrame) -> set[str]:
    """One row of each (engine, figure, basis): every path through predict, a few seconds to rerun."""
    return set(table.drop_duplicates(["engine", "figure", "basis"])["name"])


def test_the_table_checks_its_arithmetic(table):
    """Every row's arithmetic is checked; that one row of each engine, figure and basis predicted
    again equals the table's (every path through predict without rerunning all rows) is
    test_cli_json_keys's: its CLI run predicts those rows again."""
    assert list(table["name"]) == [r.name for r in CAT.rows]
    assert {t["engine"] for _, t in table.iterrows() if t["name"] in _one_row_per_kind(table)} == set(table["engine"])
    for row, (_, t) in zip(CAT.rows, table.iterrows()):
        assert t["published"] == row.figure
        assert t["error"] == pytest.approx(abs(t["predicted"] - row.figure) / row.figure, rel=1e-12)
        if row.checks == "speedup":
            assert t["side_ok"] == ((t["predicted"] > 1) == (row.figure > 1))
        assert bool(t["why"]) == (not t["ok"])


def test_row4_under_ideal_is_the_quoted_baseline():
    """Row 4 on h100-sxm under the ideal engine: plain TPOT 7.79 ms, and with i.i.d. alpha 0.755
    (accept length 3.06) a speculative TPOT near 3.06 ms, a round of 9.3 ms: the cost model's
    passes alone, without the engine's host work and extra passes."""
    ideal = predict(ROW4, CAT.datasets, "ideal")
    assert round(ideal["plain_tpot_ms"], 2) == 7.79
    sc = scenario_for(ROW4, CAT.datasets, "ideal")
    sc["acceptance"] = 0.755
    res = simulate(sc, baseline=True)
    assert round(res.baseline.summary["tpot_ms_mean"], 2) == 7.79
    assert 3.0 < res.summary["tpot_ms_mean"] < 3.1
    assert round(ideal["spec_tpot_ms"] * ideal["accept_length"], 1) == 9.3


def test_row4_under_vllm_against_the_ideal_engine(table):
    """The same row under vLLM V1 at v0.9.x (its table row): CUDA graphs and a host time of 0.97 ms
    make both the plain step and the round cheaper than the ideal engine's (which charges the
    profile's eager launches and 1 ms of host time per iteration), but the round's extra passes and
    syncs keep more of their cost, so the predicted speedup is lower than the ideal engine's."""
    t = table.set_index("name").loc[ROW4.name]
    assert t["engine"] == "vllm"
    ideal = predict(ROW4, CAT.datasets, "ideal")
    # issue 25: v1-0.9 pays SpecDecode-Bench's 1.207 ms a step and a 0.712 ms floor per draft forward,
    # so its round costs more than the ideal engine's, and its speedup stays below ideal's
    assert t["spec_tpot_ms"] * t["accept_length"] > ideal["spec_tpot_ms"] * ideal["accept_length"]
    assert t["predicted"] < ideal["predicted"]


def test_docs_validation_is_current(table):
    """The page around the real-engine table (which tests/test_engine_groundtruth.py checks)."""
    doc = (ROOT / "docs" / "validation.md").read_text()
    engine = re.search(r"<!-- engine-groundtruth:begin -->\n(.*?)<!-- engine-groundtruth:end -->", doc, re.S)
    repeated = re.search(r"<!-- engine-groundtruth-repeated:begin -->\n(.*?)<!-- engine-groundtruth-repeated:end -->",
                         doc, re.S)
    assert engine is not None and repeated is not None, "docs/validation.md has no real-engine table markers"
    assert doc == validation_markdown(table, engine_table=engine.group(1), repeated_table=repeated.group(1)), \
        "docs/validation.md is stale: python -m specsight.studies.published.report > docs/validation.md"


def test_cli_json_keys(capsys, table, tmp_path, monkeypatch):
    """The CLI on a results file of one row per engine, figure and basis (the full table is the
    `table` fixture's): its JSON keys, and its numbers are the table's for those rows (predicted
    again: every path through predict reproduces exactly); its text form on one row."""
    import yaml

    import specsight.studies.published.study as published
    from specsight.cli import main
    names = _one_row_per_kind(table)
    raw = yaml.safe_load(published.RESULTS_FILE.read_text())
    raw["rows"] = [r for r in raw["rows"] if r["name"] in names]
    path = tmp_path / "rows.yaml"
    path.write_text(yaml.safe_dump(raw))
    monkeypatch.setattr(published, "RESULTS_FILE", path)
    assert main(["validate", "--published", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"rows", "median_error", "goals", "coverage"} <= set(out)
    assert {"rows", "inside", "coverage", "level"} <= set(out["coverage"]) and out["coverage"]["level"] == 0.8
    assert {r["name"] for r in out["rows"]} == names
    assert all("interval" in r and (r["interval"] is None or len(r["interval"]) == 2) for r in out["rows"])
    predicted = table.set_index("name")["predicted"]
    for r in out["rows"]:
        assert {"name", "engine", "published", "predicted", "error", "side_ok", "acceptance", "why"} <= set(r)
        assert r["predicted"] == pytest.approx(predicted[r["name"]], rel=1e-9)
    assert out["median_error"] == pytest.approx(report_json(table[table["name"].isin(names)])["median_error"])
    assert math.isfinite(out["median_error"])
    one = next(r for r in raw["rows"] if r["name"] in names)
    path.write_text(yaml.safe_dump({**raw, "rows": [one]}))
    assert main(["validate", "--published"]) == 0
    text = capsys.readouterr().out
    assert "| row | engine |" in text and f"| {one['name']} (" in text


def test_cli_published_refuses_a_run_and_a_run_is_needed_without_it(capsys):
    from specsight.cli import main
    assert main(["validate", "run.json", "--published"]) == 2
    assert "not with --published" in capsys.readouterr().err
    assert main(["validate"]) == 2
    assert "--published" in capsys.readouterr().err


def test_a_row_an_engine_refuses_is_shown_as_not_run(tmp_path, monkeypatch):
    """An engine that refuses a row's setup (an input error) leaves the row in the table, unpriced,
    with the reason, and the row counts as a miss."""
    import yaml

    import specsight.studies.published.study as published
    raw = yaml.safe_load(published.RESULTS_FILE.read_text())
    raw["rows"] = [r for r in raw["rows"] if r["name"] == ROW4.name]
    path = tmp_path / "rows.yaml"
    path.write_text(yaml.safe_dump(raw))

    def refuse(row, datasets, kind):
        raise SpecsightInputError("engine.version", "v0", "a version this engine models")
    monkeypatch.setattr(published, "predict", refuse)
    t = validate_published(path).iloc[0]
    assert math.isnan(t["predicted"]) and not t["ok"] and t["side_ok"] is None
    assert t["why"].startswith("not run: engine.version='v0'")
    assert report_json(validate_published(path))["rows"][0]["predicted"] is None
