"""The constants' ranges in every interval (simulator/engines/sourced.py, specsight/studies/published/
spread.py) and the coverage of the two validation tables' intervals (docs/validation.md).

The spread's propagation is checked against closed forms: a constant that enters the round as a
count times itself (SGLang v0.4's FlashInfer host plans, k of them a round; the CPU build's
measured per-iteration host time, once in the plain step and once in the round); the widening
against the quadrature it states; the real-engine interval's leave-one-cell-out construction on
made-up rows; and each coverage figure recomputed from the committed page's own table.
"""
from __future__ import annotations

import json
import math
import re

import pytest

from simulator.common.paths import REPO_ROOT
from simulator.engines.sourced import SOURCED, SourcedConstant, measured_ranges, ranges_markdown
from specsight.studies.published.engine_intervals import leave_cell_out
from specsight.studies.published.intervals import conformal_interval
from specsight.studies.published.spread import priced_scenario, repriced_total, spread

DOC = (REPO_ROOT / "docs" / "validation.md").read_text()
SGLANG_V04 = {"name": "spread-sglang-v04", "seed": 0, "model": "llama-3.1-8b",
              "hardware": {"gpu": "h100-sxm", "tp": 1, "dtype": "bf16"},
              "drafter": {"method": "eagle", "model": "eagle-llama-3.1-8b", "num_speculative_tokens": 4},
              "acceptance": {"model": "iid", "alpha": 0.7}, "policy": {"kind": "static"},
              "workload": {"arrival": {"process": "closed_loop", "concurrency": 1}, "num_requests": 4,
                           "prompt_len": 128, "output_len": 64},
              "engine": {"kind": "sglang", "version": "v0.4"}}


def _moves(sp):
    return {name: (lo, hi) for name, lo, hi in sp.moves}


def test_a_constant_counted_k_times_a_round_moves_the_speedup_by_its_closed_form():
    """FlashInfer's host plans: k a round at v0.4, none in the plain step, so at plan time x the
    speedup moves by -ln(1 + k (x - x0) / round) exactly."""
    p = priced_scenario(SGLANG_V04)
    k, ctx = 4, p.mean_context
    rnd = p.cost.round_terms(1, k, ctx, p.cost.drafter.verify_tokens_per_seq(k))
    c = next(c for c in SOURCED if c.name == "sglang_flashinfer_plan_s")
    assert rnd["plans"] == pytest.approx(k * c.value, rel=1e-12)
    lo, hi = _moves(p.spread("speedup", 1, k))[c.name]
    assert lo == pytest.approx(-math.log(1 + k * (c.low - c.value) / rnd["total"]), rel=1e-9)
    assert hi == pytest.approx(-math.log(1 + k * (c.high - c.value) / rnd["total"]), rel=1e-9)
    assert lo > 0 > hi                   # a cheaper plan raises the speedup, a dearer one lowers it


def test_the_measured_iteration_constant_enters_plain_step_and_round_alike():
    """On the CPU build, a_s +- its standard error adds d to the plain step P and the round R: the
    speedup moves by ln((P + d) / P) - ln((R + d) / R), and its spread is the root-sum-of-squares of
    every constant's largest move each way."""
    from calibrate.engine_groundtruth import RESULTS_FILE, load_results, scenario_for_run
    run = next(r for r in load_results(RESULTS_FILE)[1] if r["method"] == "eagle" and r["k"] == 2)
    p = priced_scenario(scenario_for_run(run))
    B, k = int(run["batch"]), 2
    plain = p.cost.round_terms(B, 0, p.mean_context, 1)["total"]
    rnd = p.cost.round_terms(B, k, p.mean_context, p.cost.drafter.verify_tokens_per_seq(k))["total"]
    sp = p.spread("speedup", B, k)
    a = next(c for c in measured_ranges("vllm-0.32.0-cpu", "eagle") if c.name == "measured_iteration_a_s")
    for end, move in zip((a.low, a.high), _moves(sp)[a.name]):
        d = end - a.value
        assert move == pytest.approx(math.log((plain + d) / plain) - math.log((rnd + d) / rnd), rel=1e-9)
    ups = [max(0.0, lo, hi) for _, lo, hi in sp.moves]
    downs = [max(0.0, -lo, -hi) for _, lo, hi in sp.moves]
    assert sp.up == pytest.approx(math.sqrt(sum(u * u for u in ups)))
    assert sp.down == pytest.approx(math.sqrt(sum(d * d for d in downs)))
    assert {c.name for c in measured_ranges("vllm-0.32.0-cpu", "eagle")} == {
        "measured_iteration_a_s", "measured_iteration_b_s", "measured_proposer_eagle"}


def test_linear_repricing_is_the_term_scaled():
    """A term that is a count times its constant (syncs) re-prices to total + (x / x0 - 1) term."""
    p = priced_scenario(SGLANG_V04)
    t = p.cost.round_terms(1, 4, p.mean_context, p.cost.drafter.verify_tokens_per_seq(4))
    c = next(c for c in SOURCED if c.name == "sync_s")
    assert t["syncs"] == pytest.approx(7 * c.value, rel=1e-12)          # v0.4: seven syncs a round
    assert repriced_total(p.cost, t, c, c.high, 1, 4, p.mean_context) == pytest.approx(
        t["total"] + 7 * (c.high - c.value), rel=1e-12)


def test_ideal_has_no_spread_and_the_figure_must_be_known():
    assert priced_scenario({**SGLANG_V04, "engine": {"kind": "ideal"}}) is None
    with pytest.raises(ValueError, match="figure"):
        spread(priced_scenario(SGLANG_V04).cost, "latency", 1, 4, 100.0)


def test_the_widening_is_the_quadrature_it_states():
    """Pool quantiles q_lo, q_hi; centre m, half-width w: low = m - sqrt(w^2 + down^2), high = m +
    sqrt(w^2 + up^2) in log space; no spread: the residual interval itself."""
    pool = [-0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3, 0.4, 0.5]     # n = 9: ranks 1 and 9, the ends
    assert conformal_interval(2.0, pool) == pytest.approx([2.0 * math.exp(-0.3), 2.0 * math.exp(0.5)])
    assert conformal_interval(2.0, pool, [0.0, 0.0]) == conformal_interval(2.0, pool)
    m, w = 0.1, 0.4
    lo, hi = conformal_interval(2.0, pool, [0.3, 0.1])
    assert math.log(lo / 2.0) == pytest.approx(m - math.sqrt(w * w + 0.09))
    assert math.log(hi / 2.0) == pytest.approx(m + math.sqrt(w * w + 0.01))


def test_a_runs_interval_leaves_its_own_cell_out():
    """Changing a cell's residuals leaves that cell's intervals alone and moves the others'."""
    rows = [{"model": mo, "method": me, "predicted_speedup": 1.0, "measured_speedup": math.exp(x)}
            for mo, me, xs in (("s", "eagle", (0.1, 0.2, 0.3)), ("s", "ngram", (-0.2, 0.0, 0.2)),
                               ("m", "eagle", (-0.1, 0.4, 0.5)))
            for x in xs]
    before = leave_cell_out(rows)
    rows[0]["measured_speedup"] = math.exp(3.0)          # a wild run in cell (s, eagle)
    after = leave_cell_out(rows)
    assert after[:3] == before[:3] and after[3:] != before[3:]
    assert before[0] == conformal_interval(1.0, [-0.2, 0.0, 0.2, -0.1, 0.4, 0.5])


def test_every_declared_range_holds_its_value_and_docs_engines_has_the_table():
    assert len(SOURCED) >= 10 and len({c.name for c in SOURCED}) == len(SOURCED)
    for c in SOURCED:
        assert c.low <= c.value <= c.high and c.source and c.low < c.high, c.name
    with pytest.raises(ValueError, match="outside its range"):
        SourcedConstant("x", "syncs", 2.0, 0.0, 1.0, "s", "made up")
    assert ranges_markdown() in (REPO_ROOT / "docs" / "engines.md").read_text(), \
        "docs/engines.md's ranges table is stale: python -m simulator.engines.sourced"


def _coverage_claim(pattern: str) -> tuple[int, int]:
    m = re.search(pattern, DOC)
    assert m is not None, pattern
    return int(m.group(1)), int(m.group(2))


def test_the_published_tables_coverage_recomputed_from_the_page():
    """Each row of the page's published table: its published figure inside its 80 % interval
    column, counted, is the page's coverage line and residuals.json's."""
    inside = rows = 0
    for line in DOC.split("\n## Goals")[0].splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) != 10 or not re.match(r"[\d.]+ tok/s$|[\d.]+x$", cells[3]) or cells[5] == "-":
            continue
        num = [float(re.sub(r"[^\d.]", "", v)) for v in [cells[3], *cells[5].split(" - ")]]
        rows += 1
        inside += num[1] <= num[0] <= num[2]
    claim = _coverage_claim(r"hold the published figure on (\d+) of (\d+) rows")
    assert (inside, rows) == claim and rows >= 35
    assert inside / rows >= 0.8            # issue 25's goal
    res = json.loads((REPO_ROOT / "data" / "published" / "residuals.json").read_text())
    assert (res["coverage"]["inside"], res["coverage"]["rows"]) == claim


def test_the_real_engine_tables_coverage_recomputed_from_the_page():
    inside = rows = 0
    table = DOC.split("<!-- engine-groundtruth:begin -->")[1]
    for line in table.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) != 14 or not re.match(r"[sm]-", cells[0]):
            continue
        measured = float(cells[8])
        lo, hi = (float(v) for v in cells[10].split(" - "))
        rows += 1
        inside += lo <= measured <= hi
    claim = _coverage_claim(r"hold the measured speedup on (\d+) of (\d+) runs")
    assert (inside, rows) == claim and rows >= 100
    assert inside / rows >= 0.8


@pytest.mark.parametrize("kw", [dict(mean_context=math.nan), dict(mean_context=math.inf), dict(mean_context=-5.0),
                                dict(batch=math.nan), dict(batch=math.inf), dict(batch=-3), dict(k=-1)])
def test_a_spread_at_a_non_finite_or_negative_point_is_refused_not_a_silent_zero(kw):
    """A NaN move would be dropped by max(0, ...) and give a zero widening: the point is refused."""
    args = {"batch": 1, "k": 4, "mean_context": 100.0, **kw}
    with pytest.raises(ValueError, match=next(iter(kw))):
        spread(priced_scenario(SGLANG_V04).cost, "speedup", **args)


@pytest.mark.parametrize("sp", [[math.nan, 0.0], [0.0, math.inf], [-0.1, 0.1], [0.1]])
def test_a_widening_by_a_non_finite_negative_or_short_spread_is_refused(sp):
    with pytest.raises(ValueError, match="spread"):
        conformal_interval(2.0, [-0.3, -0.1, 0.0, 0.1, 0.3], sp)


def test_a_non_finite_residual_or_a_non_positive_prediction_gives_no_silent_interval():
    with pytest.raises(ValueError, match="residual"):
        conformal_interval(2.0, [math.nan, 0.1, 0.2, 0.3])
    assert conformal_interval(0.0, [-0.1, 0.0, 0.1]) is None
    assert conformal_interval(-2.0, [-0.1, 0.0, 0.1]) is None
