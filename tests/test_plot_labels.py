"""Plot labels, measured on the rendered figures: no two text boxes (labels, notes, legend)
intersect, and no placed label's box contains a plotted marker's centre. The figures are rendered
to Agg by the plotting code itself (figure_file.save_figure) and kept open for the measurement."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from plot_checks import assert_labels_clear, renderer_of

from specsight.studies.shared.plot_labels import PLACED, line_samples_px, marker_centres_px

ROOT = Path(__file__).resolve().parents[1]


def _crowded_frame() -> pd.DataFrame:
    """Four curves crossing speedup 1 within 4 % of each other, every point flagged saturated."""
    xs = [2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]
    rows = []
    for k, cross in ((1, 10.1), (2, 10.3), (3, 10.5), (4, 10.6)):
        for x in xs:
            rows.append({"x": x, "curve": f"K={k}", "speedup": 1.0 + 0.06 * (cross - x),
                         "saturated": x >= 12, "base_saturated": x >= 12, "kv_limited": False,
                         "base_kv_limited": False})
    return pd.DataFrame(rows)


def test_crowded_crossings_labels_clear_of_each_other_and_markers(tmp_path, saved_figures):
    from specsight.studies.shared.breakeven_plot import plot_breakeven
    crossings = {"K=1": 10.1, "K=2": 10.3, "K=3": 10.5, "K=4": 10.6}
    plot_breakeven(_crowded_frame(), x="x", breakeven=crossings, title="t", xlabel="x", ylabel="speedup",
                   path=tmp_path / "b.png")
    fig = saved_figures[0]
    assert assert_labels_clear(fig) >= 2                  # room for some labels beside the crossings
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    for name, at in crossings.items():                     # every crossing is named, placed or not
        assert any(s.startswith(name) and f"{at:.3g}" in s for s in legend), (name, legend)


def test_the_checker_fails_on_overlapping_labels(tmp_path):
    """The geometric test can fail: two labels at one place, and a label on its own marker."""
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2], marker="o")
    ax.annotate("10.5", (1.5, 1.5), gid=PLACED)
    ax.annotate("11.6", (1.5, 1.5), gid=PLACED)
    fig.canvas.draw()
    with pytest.raises(AssertionError):
        assert_labels_clear(fig)
    fig2, ax2 = plt.subplots()
    ax2.plot([1, 2], [1, 2], marker="o")
    ax2.annotate("8.63", (1, 1), ha="center", va="center", gid=PLACED)
    fig2.canvas.draw()
    with pytest.raises(AssertionError, match="covers a marker"):
        assert_labels_clear(fig2)
    plt.close(fig)
    plt.close(fig2)


def test_labels_avoid_lines_where_they_can(tmp_path, saved_figures):
    from specsight.studies.shared.plot_labels import place_labels
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for k in range(5):                                      # a fan of lines through (5, 5)
        ax.plot([0, 10], [5 - k, 5 + k], color="C0")
    labels = place_labels(ax, [(5, 5)], ["a crossing"])
    fig.canvas.draw()
    box = labels[0].get_window_extent(renderer_of(fig))
    pts = line_samples_px(ax)
    assert not ((pts[:, 0] >= box.x0) & (pts[:, 0] <= box.x1) & (pts[:, 1] >= box.y0) & (pts[:, 1] <= box.y1)).any()
    plt.close(fig)


def test_main_job_plots_labels_clear(tmp_path, saved_figures):
    """The main job (README command 1, without the capacity search): the break-even plot labels
    every crossing, and both plots keep their labels off each other, the legend and the markers."""
    from specsight.studies.breakeven.study import breakeven
    res = breakeven(str(ROOT / "scenarios/llama70b-tp4-h100-chat-ngram.yaml"), axis="qps", capacity=False,
                    progress=False)
    files = res.write(tmp_path)
    assert Path(files["plot"]).stat().st_size > 0
    assert len(saved_figures) == 2                          # the break-even and the latency-throughput plots
    be_fig = saved_figures[0]
    crossings = [v for v in res.verdict.breakeven.values() if v is not None]
    assert len(crossings) >= 3                              # K=2, 3, 4 cross in the README's run
    assert assert_labels_clear(be_fig) == len(crossings)
    assert assert_labels_clear(saved_figures[1]) >= 1
    ax = be_fig.axes[0]
    assert not any("below the dashed line" in t.get_text() for t in ax.texts)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("speculation slower" in s for s in legend)
    assert np.isfinite(marker_centres_px(ax)).all()
    assert ax.get_xlabel().endswith("(log scale)")
    # each crossing's label keeps clear of every line (the README's "11.6" sat on K=2's line)
    r, pts = renderer_of(be_fig), line_samples_px(ax)
    for t in (t for t in ax.texts if t.get_gid() == PLACED):
        b = t.get_window_extent(r)
        near = (pts[:, 0] >= b.x0 - 2) & (pts[:, 0] <= b.x1 + 2) & (pts[:, 1] >= b.y0 - 2) & (pts[:, 1] <= b.y1 + 2)
        assert not near.any(), (t.get_text(), pts[near][:3])


def _search(points):
    """A stand-in PlanSearch: (config, tpot ms, USD per M tokens, on the Pareto front) rows."""
    from types import SimpleNamespace

    from specsight.studies.plan.search import MEETS
    rows = [{"status": MEETS, "config": c, "tpot_ms_p99_at_load": t, "cost_per_million_output_tokens_usd": usd,
             "pareto": p} for c, t, usd, p in points]
    cheapest = min(rows, key=lambda r: r["cost_per_million_output_tokens_usd"])
    return SimpleNamespace(rows=rows, chosen=cheapest, slo=SimpleNamespace(tpot_ms_p99=50.0), scenario="s",
                           meta={"scenario": "s", "engine": "ideal"}, target_qps=10.0)


def test_pareto_front_of_one_point_is_a_marker_and_labels_clear(tmp_path, saved_figures):
    from specsight.studies.plan.search_plot import plot_pareto
    plot_pareto(_search([("h100 tp4; K=2", 30.0, 1.0, True), ("h100 tp8; K=2", 35.0, 1.4, False)]),
                tmp_path / "one.png")
    ax = saved_figures[-1].axes[0]
    front = [ln for ln in ax.lines if str(ln.get_label()).startswith("Pareto front")]
    assert len(front) == 1 and front[0].get_linestyle() == "None"
    assert "one configuration" in front[0].get_label()
    crowded = [(f"h100 tp{tp}; K={k}", 30.0 + 0.3 * i, 2.0 - 0.02 * i, True)
               for i, (tp, k) in enumerate((tp, k) for tp in (1, 2, 4, 8) for k in (1, 2, 3))]
    plot_pareto(_search(crowded), tmp_path / "many.png")
    fig = saved_figures[-1]
    assert fig.axes[0].lines[0].get_linestyle() == "-"
    assert assert_labels_clear(fig) >= 3
