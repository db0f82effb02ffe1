"""The explorer without a browser: the controls as overrides and back (URL, YAML), the closed
forms it draws against the simulator's own (simulator.speculation.analytic, the engines' round
times), the round timeline adding up to the step it explains, the capacity table's batch, and
`specsight explore` as a process: it prints its URL, serves the page, and stops cleanly on
Ctrl-C."""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from simulator.common.errors import SpecsightInputError
from specsight.explore.capacity_table import CAPACITY_BATCHES, capacity_rows
from specsight.explore.priced import BATCHES, Priced, curves
from specsight.explore.settings import from_query, from_scenario, scenario_yaml
from specsight.explore.timeline import PLAIN, SPEC, round_timeline, row_total_s
from specsight.explore.view import build_view, checked_source
from specsight.studies.shared.overrides import scenario_source

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "scenarios/llama8b-h100-eagle3-chat.yaml"
START_TIMEOUT_S = 120       # a bound for a busy machine, not a speed check


@pytest.fixture(scope="module")
def base():
    return scenario_source(SCENARIO)


def test_settings_round_trip_through_the_url_and_the_yaml(base, tmp_path):
    from simulator.scenario.scenario import load_scenario
    s = from_scenario(base).replace(k="5", tp="2", engine="vllm", prompt="700", tpot_ms="", load="rate", rate="3.5")
    assert from_query(s.to_query(), from_scenario(base)) == s
    src = checked_source(base, s)
    path = tmp_path / "back.yaml"
    path.write_text(scenario_yaml(src))
    sc = load_scenario(path)
    assert sc.drafter.num_speculative_tokens == 5 and sc.hardware.tp == 2 and sc.engine.kind == "vllm"
    assert sc.source["workload"]["prompt_len"] == {**base["workload"]["prompt_len"], "median": 700}
    assert sc.workload.arrival == "poisson" and sc.workload.qps == 3.5 and sc.slo.tpot_ms_p99 is None
    assert dataclasses.replace(from_scenario(src), batch=s.batch) == s      # a Poisson scenario holds no batch


def test_a_bad_control_is_the_command_lines_error(base, capsys):
    from specsight.cli import main
    for field, text, key in (("tp", "0", "hardware.tp"), ("k", "-1", "drafter.num_speculative_tokens"),
                             ("rate", "abc", "workload.arrival"), ("tpot_ms", "-5", "slo.tpot_ms_p99")):
        s = from_scenario(base).replace(**{field: text}, load="rate" if field == "rate" else "batch")
        with pytest.raises(SpecsightInputError) as page:
            build_view(base, s, with_serve=False)
        over = f"workload.arrival={{process: poisson, qps: {text}}}" if field == "rate" else f"{key}={text}"
        assert main(["simulate", SCENARIO, "--set", over]) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == f"specsight: error: {page.value}"


def test_ideal_curves_are_the_analytic_model(base):
    from simulator.speculation.analytic import speedup
    s = from_scenario(base).replace(acceptance="alpha", alpha="0.6")
    pr = Priced(checked_source(base, s))
    c = curves(pr, 32.0)
    for k, y in c.by_batch.items():
        np.testing.assert_allclose(y, speedup(pr.cm, pr.drafter, BATCHES, pr.context, k, 0.6), rtol=1e-12)
    assert c.at_point == pytest.approx(float(speedup(pr.cm, pr.drafter, 32.0, pr.context, pr.k, 0.6)), rel=1e-12)


@pytest.mark.parametrize("engine", ["ideal", "vllm", "sglang", "trtllm"])
def test_timeline_adds_up_to_the_step_it_explains(base, engine):
    """Each row's bars sum to the closed-form time the curves use: the engine's round_time_s
    (or the analytic model's step under ideal), at K and at K = 0."""
    s = from_scenario(base).replace(engine=engine)
    pr = Priced(checked_source(base, s))
    for batch in (1, 48, 300):
        bars = round_timeline(pr, batch, pr.alpha(pr.k))
        assert row_total_s(bars, PLAIN) == pytest.approx(float(pr.plain_s([batch])[0]), rel=1e-12)
        assert row_total_s(bars, SPEC) == pytest.approx(float(pr.spec_s([batch], pr.k, pr.alpha(pr.k))[0]), rel=1e-12)
        assert all(b.duration_s >= 0 for b in bars)
        spec = [b for b in bars if b.row == SPEC]
        assert all(a.start_s + a.duration_s == pytest.approx(b.start_s) for a, b in zip(spec, spec[1:]))
    if engine == "vllm":
        names = [b.name for b in bars if b.row == SPEC]
        assert names[0] == "verify" and any(n.startswith("draft") for n in names)


def test_capacity_batch_is_the_largest_within_tpot_and_memory(base):
    s = from_scenario(base).replace(tpot_ms="12", acceptance="alpha", alpha="0.7")
    pr = Priced(checked_source(base, s))
    for row, k in zip(capacity_rows(pr, 0.7, 12.0, None), (0, pr.k)):
        t = pr.plain_s(CAPACITY_BATCHES) if k == 0 else pr.spec_s(CAPACITY_BATCHES, k, 0.7)
        tpot = t / (1.0 if k == 0 else pr.expected_tokens(k, 0.7)) * 1e3
        fits = (tpot <= 12.0) & (CAPACITY_BATCHES <= min(pr.kv_batch_limit(k), pr.max_num_seqs))
        assert row.batch == int(CAPACITY_BATCHES[np.nonzero(fits)[0][-1]])
        assert row.tokens_per_s == pytest.approx(row.batch * 1e3 / row.tpot_ms, rel=1e-12)
        price = pr.cm.hw.price_usd_per_gpu_hour
        assert row.usd_per_m_tokens == pytest.approx(price / 3600 / row.tokens_per_s * 1e6, rel=1e-12)


def test_accepted_distribution_sums_to_one_and_gives_the_mean(base):
    from simulator.speculation.spec_math import expected_tokens
    pr = Priced(checked_source(base, from_scenario(base)))
    p = pr.accepted_distribution()
    assert p.sum() == pytest.approx(1.0, abs=1e-12) and len(p) == pr.k + 1
    assert 1 + np.dot(np.arange(len(p)), p) == pytest.approx(expected_tokens(pr.scenario.acceptance.alphas(pr.k)))


# SIGINT as a terminal's Ctrl-C sends it, and as a process started by `cmd &` in a script (or CI)
# receives it: inherited ignored (bash sets SIGINT to SIG_IGN for a background job without job
# control; exec keeps it), where Python installs no KeyboardInterrupt handler of its own
IGNORING_SIGINT = ["-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                   "os.execv(sys.executable, [sys.executable] + sys.argv[1:])"]


@pytest.mark.parametrize("sig, launcher", [(signal.SIGINT, []), (signal.SIGTERM, []), (signal.SIGINT, IGNORING_SIGINT)],
                         ids=["SIGINT", "SIGTERM", "SIGINT-inherited-ignored"])
def test_explore_command_prints_its_url_serves_and_stops_cleanly(tmp_path, sig, launcher):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONFAULTHANDLER": "1"}    # SIGABRT dumps every thread
    command = ["-m", "specsight.cli", "explore", "--port", "0", "--out", str(tmp_path)]
    proc = subprocess.Popen([sys.executable, *launcher, *command],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.startswith("specsight explore: http://127.0.0.1:"), line + proc.stderr.read()
        url = line.split()[2]
        with urllib.request.urlopen(url, timeout=START_TIMEOUT_S) as r:
            assert r.status == 200 and b"specsight explore" in r.read()
        proc.send_signal(sig)
        try:            # communicate, not wait: both pipes drained while it stops
            out, err = proc.communicate(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            out, err = proc.communicate()
            pytest.fail(f"not stopped {START_TIMEOUT_S} s after signal {sig}; its threads:\n{err}")
        assert proc.returncode == 0 and err.strip() == "specsight explore: stopped", err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_explore_refuses_a_bad_port_in_one_line(capsys):
    from specsight.cli import main
    assert main(["explore", "--port", "70000"]) == 2
    assert capsys.readouterr().err.strip() == ("specsight: error: --port=70000: a TCP port in [0, 65535] "
                                               "(0: any free port)")


def test_simulated_rows_carry_their_interval_and_its_band_is_drawn():
    """An interval column of the breakeven study's frame ([low, high] as a list, tuple or array)
    reaches the page's rows, and the simulated figure draws its band: a closed polygon along the
    highs, back along the lows. Without intervals (engine.kind ideal: None) no band."""
    import pandas as pd

    from specsight.explore.figures import simulated_figure
    from specsight.explore.sim_jobs import shown_rows
    frame = pd.DataFrame({"batch": [1, 4, 16], "speedup": [1.5, 1.2, 0.9], "saturated": [False, False, True],
                          "speedup_interval": [(1.4, 1.6), np.array([1.1, 1.3]), [0.8, 1.0]],
                          "spec_time_s": [1.0, 2.0, 3.0]})
    rows = shown_rows(frame)
    assert [r["speedup_interval"] for r in rows] == [[1.4, 1.6], [1.1, 1.3], [0.8, 1.0]]
    assert all("spec_time_s" not in r for r in rows)
    band = next(t for t in simulated_figure(None, rows, 3, None)["data"] if t["name"] == "interval")
    assert band["x"] == [1.0, 4.0, 16.0, 16.0, 4.0, 1.0]
    assert band["y"] == [1.6, 1.3, 1.0, 0.8, 1.1, 1.4] and band["fill"] == "toself"
    ideal = shown_rows(frame.assign(speedup_interval=[None, None, np.nan]))
    assert all(r["speedup_interval"] is None for r in ideal)
    assert "interval" not in [t["name"] for t in simulated_figure(None, ideal, 3, None)["data"]]


def test_tree_control_sets_the_drafters_tree_keys(base):
    from simulator.scenario.scenario import load_scenario
    s = from_scenario(base)
    assert s.tree == ""                                                  # the scenario's drafter is a chain
    tree = s.replace(tree="{tree: true, tree_nodes: 59, tree_branches: 4}")
    src = checked_source(base, tree)
    assert {k: src["drafter"][k] for k in ("tree", "tree_nodes", "tree_branches")} == \
        {"tree": True, "tree_nodes": 59, "tree_branches": 4}
    back = from_scenario(src)
    assert back.tree == "tree: true, tree_nodes: 59, tree_branches: 4"
    assert from_query(back.to_query(), s) == back
    p = Priced(src)
    assert p.drafter.spec.branches == 4 and p.drafter.verify_tokens_per_seq(3) == 60   # 59 nodes + the root
    assert load_scenario(src).drafter.tree
    chain = checked_source(src, back.replace(tree=""))                  # cleared: a chain again
    assert Priced(chain).drafter.spec.branches == 1
    for bad, line in (("tree: maybe", "drafter.tree='maybe'"), ("nodes: 5", "tree='nodes': a drafter tree key"),
                      ("tree", "tree='tree': KEY: VALUE pairs")):
        with pytest.raises(SpecsightInputError, match=line.replace("(", r"\(")):
            checked_source(base, s.replace(tree=bad))


@pytest.mark.parametrize("engine", ["ideal", "vllm"])
def test_browser_tables_hold_the_closed_forms_factors(base, engine):
    """closed_form's tables are Priced's step times and expected tokens, exactly: t_spec tabled at
    each alpha where it depends on alpha (ideal: the drafter ingests the tokens emitted last round),
    once where it does not (an engine's round); their speedup arithmetic is Priced.speedup's."""
    import base64

    from specsight.explore.closed_form import ALPHA_GRID
    from specsight.explore.view import closed_form_tables

    def f64(text):
        return np.frombuffer(base64.b64decode(text), dtype="<f8")
    s = from_scenario(base).replace(engine=engine, acceptance="alpha", batch="24")
    d = closed_form_tables(base, s)
    p = Priced(checked_source(base, s))
    cols = np.append(BATCHES, 24.0)
    na, nb = len(d["alphas"]), len(cols)
    assert set(ALPHA_GRID.tolist()) <= set(d["alphas"]) and d["spec_alpha_free"] == (engine != "ideal")
    spec = f64(d["spec"]).reshape(len(d["ks"]), 1 if d["spec_alpha_free"] else na, nb)
    etok, plain = f64(d["etok"]).reshape(len(d["ks"]), na), f64(d["plain"])
    assert np.array_equal(plain, p.plain_s(cols))
    for ki, k in enumerate(d["ks"]):
        for ai in (0, 37, na - 1):
            a = d["alphas"][ai]
            t = spec[ki, 0 if d["spec_alpha_free"] else ai]
            assert np.array_equal(t, p.spec_s(cols, k, a)) and etok[ki, ai] == p.expected_tokens(k, a)
            assert np.array_equal(etok[ki, ai] * plain / t, p.speedup(cols, k, a))
