"""What a break-even plot draws answers what its text prints: the analytic curve passes through
every printed analytic value (one function prices both; under a real engine too)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from plot_checks import assert_labels_clear

from specsight.studies.breakeven.outputs import dense_analytic
from specsight.studies.breakeven.study import breakeven

ROOT = Path(__file__).resolve().parents[1]
EAGLE3 = str(ROOT / "scenarios/llama8b-h100-eagle3-chat.yaml")


@pytest.mark.parametrize("engine", ["ideal", "vllm"])
def test_the_analytic_curve_passes_through_the_printed_values(engine, tmp_path, saved_figures):
    """vLLM's cost model quantizes a scalar token count into tiles and not an array of batches:
    K=4 at batch 1 was plotted 2.51 beside a printed 2.42. Now the plotted curve, read at each
    simulated batch, is the printed value."""
    res = breakeven(EAGLE3, axis="batch", values="1,16", ks="1,4", overrides=[f"engine.kind={engine}"],
                    progress=False, workers=1)
    dense = dense_analytic(res)
    res.write(tmp_path)
    ax = saved_figures[0].axes[0]
    for _, row in res.frame.iterrows():
        d = dense[(dense["curve"] == row["curve"]) & (dense["batch"] == row["batch"])]
        assert d["speedup"].tolist() == pytest.approx([row["analytic_speedup"]], rel=1e-12)
        drawn = [ln for ln in ax.lines if ln.get_label() == f"{row['curve']} (analytic)"]
        assert len(drawn) == 1
        x, y = drawn[0].get_xdata(), drawn[0].get_ydata()
        assert float(np.interp(row["batch"], x, y)) == pytest.approx(row["analytic_speedup"], rel=1e-12)


def _legend(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_engines_plot_draws_every_k_and_each_crossing_per_engine(tmp_path, saved_figures, capsys):
    """The issue's command: under SGLang K=1 and K=4 fall below 1 near 11.7 requests/s (its best
    of K=1..4 never does, so a best-K line alone hid them); the plot has one panel per engine with
    each K's curve, its crossing marked and named, the hollow points and the saturation band in
    the legend (values 9, 12, 18 of the command's 1.5..24: the crossings lie between 9 and 12,
    saturation from 18)."""
    from specsight.cli import main
    out = tmp_path / "eng"
    assert main(["breakeven", str(ROOT / "scenarios/llama70b-tp4-h100-chat-draft.yaml"), "--axis", "qps",
                 "--values", "9,12,18", "--k", "1,4", "--engines", "sglang,vllm", "--no-capacity",
                 "--no-progress", "--out", str(out), "--workers", "1", "--json"]) == 0
    import json
    obj = json.loads(capsys.readouterr().out)
    sg = obj["verdict"]["sglang"]
    for k in ("K=1", "K=4"):
        assert 11.0 < sg[k]["breakeven"] < 12.0, (k, sg[k])
        assert sg[k]["crossings"][0]["direction"] == "down"
    fig = saved_figures[-1]
    assert len(fig.axes) == 2
    assert [ax.get_title() for ax in fig.axes] == ["engine sglang v0.5", "engine vllm v1"]
    ax = fig.axes[0]
    legend = _legend(ax)
    for k in ("K=1", "K=4"):
        assert any(s.startswith(f"{k} (simulated): speedup 1 at {sg[k]['breakeven']:.3g}") for s in legend), legend
        xs = [ln.get_xdata()[0] for ln in ax.lines if ln.get_marker() == "X"]
        assert any(abs(x - sg[k]["breakeven"]) < 1e-9 for x in xs)
    for panel in fig.axes:
        legend = _legend(panel)
        assert {"K=1 (simulated)", "K=4 (simulated)"} <= {s.split(":")[0] for s in legend}
        assert any(s.startswith("hollow: saturated") for s in legend)
        assert any(s.startswith("plain decoding saturated") for s in legend)
    assert assert_labels_clear(fig) >= 2                  # sglang's two crossings labelled on the plot


def test_engines_study_searches_each_engines_capacity_and_draws_it(tmp_path, saved_figures, capsys):
    """With an SLO, each engine's capacities within it: printed per engine, in the JSON, and on
    the engine's panel plain decoding's and the highest curve's as vertical lines at one
    replica's rate (requests/s on the qps axis; the main job: one replica of TP4)."""
    res = breakeven(str(ROOT / "scenarios/llama70b-tp4-h100-chat-ngram.yaml"), axis="qps", values="2,8", ks="2",
                    engines="ideal,vllm", progress=False, workers=1)
    assert set(res.capacity) == {"ideal", "vllm"}
    assert res.to_dict()["capacity"]["vllm"]["capacities"].keys() == {"plain", "K=2"}
    res.write(tmp_path / "out")
    fig = saved_figures[-1]
    for ax, e in zip(fig.axes, ("ideal", "vllm")):
        caps = res.capacity[e]["capacities"]
        drawn = {ln.get_label(): ln.get_xdata()[0] for ln in ax.lines if "capacity within the SLO" in ln.get_label()}
        for who, lab in (("plain decoding", "plain"), ("K=2 (the highest)", "K=2")):
            q = caps[lab]["capacity_qps_per_replica"]
            assert 2 < q < 8
            assert drawn[f"capacity within the SLO, {who}: {q:.3g} requests/s"] == pytest.approx(q)


def test_the_batch_axis_shows_the_batch_asked_and_the_batch_ran(tmp_path, saved_figures, capsys):
    """Batch B is the closed-loop users asked for; the engine runs fewer where prefill, its
    scheduler or the KV cache keep the batch down (Llama-3.1-8B with a 1B draft: 256 users run
    about 110). The text says which the break-even is against and what ran at the crossing; the
    plot carries the batch ran along its top; the CSV both (batch, base_mean_batch)."""
    import math

    import pandas as pd

    from specsight.cli import main
    from specsight.cli.breakeven_text import ran_at
    out = tmp_path / "b"
    assert main(["breakeven", str(ROOT / "scenarios/llama8b-h100-draft1b-chat.yaml"), "--axis", "batch",
                 "--values", "16,128,256", "--k", "1", "--no-progress", "--workers", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    df = pd.read_csv(out / "breakeven_batch.csv")
    ran = df.groupby("batch")["base_mean_batch"].first()
    assert ran[256] < 0.6 * 256 and ran[16] < 16                  # the engine ran fewer than asked
    assert "batch: the closed-loop users asked for, what the break-even is against" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("  break-even K=1"))
    be = float(line.split("batch = ")[1].split()[0])
    assert 128 < be < 256
    lo, hi = 128, 256                                           # the crossing's neighbours, in log batch
    w = (math.log(be) - math.log(lo)) / (math.log(hi) - math.log(lo))
    expect = (1 - w) * ran[lo] + w * ran[hi]
    assert f"plain decoding ran a mean batch of about {expect:.3g} there" in line
    assert ran_at(df, be) == pytest.approx(expect)
    ax = saved_figures[0].axes[0]
    (top,) = ax.child_axes
    assert [float(t) for t in top.get_xticks()] == [16.0, 128.0, 256.0]
    assert [t.get_text() for t in top.get_xticklabels()] == [f"{ran[b]:.3g}" for b in (16, 128, 256)]
    assert "mean batch plain decoding ran" in top.get_xlabel()
    assert assert_labels_clear(saved_figures[0]) >= 0


# ---- what each plot draws, beside tests/test_plot_answers.py (issue 26 item 9) --------------------
def test_no_latency_throughput_plot_along_k(tmp_path):
    """Along K plain decoding is one point and the speculative curve folds back on itself."""
    res = breakeven(EAGLE3, axis="k", values="1,2", progress=False, workers=1,
                    overrides=["workload.num_requests=8"])
    files = res.write(tmp_path)
    assert "plot" in files and "latency_plot" not in files
    assert not list(tmp_path.glob("latency_throughput_*.png"))


def test_identical_series_are_told_apart(tmp_path, saved_figures):
    """Two curves with the same points (static K=3 and goodput choosing 3 everywhere) are both
    visible: the second in another marker, its legend entry naming its twin."""
    import pandas as pd

    from specsight.studies.shared.breakeven_plot import plot_breakeven
    rows = [{"x": x, "curve": c, "speedup": 1.5 - 0.1 * x} for c in ("K=3", "policy=goodput") for x in (1, 2, 3)]
    plot_breakeven(pd.DataFrame(rows), x="x", breakeven={}, title="t", xlabel="x", ylabel="s", path=tmp_path / "b.png")
    ax = saved_figures[-1].axes[0]
    k3, good = (next(ln for ln in ax.lines if ln.get_label().startswith(n)) for n in ("K=3", "policy=goodput"))
    assert list(k3.get_ydata()) == list(good.get_ydata())
    assert k3.get_marker() != good.get_marker() and good.get_markerfacecolor() == "none"
    assert "the same as K=3" in good.get_label()


def test_plan_probes_name_both_slos_and_their_log_axes(tmp_path, saved_figures):
    from specsight.studies.plan.probes_plot import plot_plan_probes
    probes = [{"qps": q, "pass": q < 4, "tpot_ms_p99": 10.0 * q, "ttft_ms_p99": 300.0 * q} for q in (1, 2, 4, 8)]
    rows = [{"config": "static K=3", "max_qps_per_replica": 2.0, "probes": probes}]
    plot_plan_probes(rows, slo_tpot_ms=30.0, slo_ttft_ms=1000.0, path=tmp_path / "p.png", title="t")
    tpot, ttft = saved_figures[-1].axes
    assert "SLO: TPOT p99 30 ms" in _legend(tpot) and "SLO: TTFT p99 1000 ms" in _legend(ttft)
    for ax in (tpot, ttft):
        assert "(log scale)" in ax.get_xlabel() and "(log scale)" in ax.get_ylabel()
