"""Issue 26 item 9: the plots answer their question. Each test draws a small synthetic frame and
measures the rendered figure (plot_checks' geometric label checks, conftest's saved_figures)."""
from __future__ import annotations

import pandas as pd
from plot_checks import assert_labels_clear

from specsight.studies.shared.plot_labels import PLACED


def _latency_frame() -> pd.DataFrame:
    """Batch 12, 18, 24 all saturate plain decoding at the same point; one speculative curve."""
    rows = []
    for b, base_x, spec_x in ((6, 900.0, 1100.0), (12, 1500.0, 1700.0), (18, 1500.0, 2100.0), (24, 1500.0, 2400.0)):
        rows.append({"batch": b, "curve": "K=3", "base_output_tokens_per_s": base_x,
                     "base_tpot_ms_p50": base_x / 100, "base_tpot_ms_p99": base_x / 80,
                     "base_ttft_ms_p99": base_x / 10, "spec_output_tokens_per_s": spec_x,
                     "spec_tpot_ms_p50": spec_x / 120, "spec_tpot_ms_p99": spec_x / 90,
                     "spec_ttft_ms_p99": spec_x / 9})
    return pd.DataFrame(rows)


def test_latency_plot_merges_coincident_labels_names_slos_and_labels_speculative_points(tmp_path, saved_figures):
    from specsight.studies.shared.latency_plot import plot_latency_throughput
    plot_latency_throughput(_latency_frame(), x_axis="batch", title="t", path=tmp_path / "lt.png",
                            slo_tpot_ms_p99=20.0, slo_ttft_ms_p99=200.0)
    fig = saved_figures[-1]
    assert len(fig.axes) == 3                              # TPOT p50, TPOT p99, TTFT p99
    assert assert_labels_clear(fig) >= 3
    for ax, slo in zip(fig.axes[1:], ("TPOT p99 20 ms", "TTFT p99 200 ms")):
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert any(slo in s for s in legend), (slo, legend)
    texts = [t for t in fig.axes[0].texts if t.get_gid() == PLACED]
    assert any(t.get_text() == "12, 18, 24" for t in texts)      # one label for the shared point
    assert not any(t.get_text() == "18" and t.get_color() == "black" for t in texts)
    assert any(t.get_color() != "black" for t in texts)         # the speculative curve's own labels


def test_log_axis_says_so_and_kv_limit_is_shaded(tmp_path, saved_figures):
    from specsight.studies.shared.speedup_curves_plot import plot_speedup_curves
    df = pd.DataFrame({"batch": [1, 2, 4, 8, 16] * 2, "k": [2] * 5 + [4] * 5,
                       "speedup": [2.0, 1.8, 1.5, 1.1, 0.8, 2.4, 2.0, 1.4, 0.9, 0.6]})
    plot_speedup_curves(df, x="batch", curve="k", y="speedup", breakeven={}, title="t", xlabel="batch",
                        path=tmp_path / "a.png", logx=True, vlines={"KV-memory limit": 6.0})
    ax = saved_figures[-1].axes[0]
    assert "log scale" in ax.get_xlabel()
    spans = [p for p in ax.patches if "does not fit" in str(p.get_label())]
    assert len(spans) == 1
    assert abs(spans[0].get_window_extent().x0 - ax.transData.transform((6.0, 1.0))[0]) < 1.0


def test_pareto_labels_configurations_without_speculation(tmp_path, saved_figures):
    from types import SimpleNamespace

    from specsight.studies.plan.search import MEETS
    from specsight.studies.plan.search_plot import plot_pareto
    rows = [{"status": MEETS, "config": "h100 tp4; K=2", "tpot_ms_p99_at_load": 30.0,
             "cost_per_million_output_tokens_usd": 1.0, "pareto": True, "overrides": {"policy": {"kind": "static"}}},
            {"status": MEETS, "config": "h100 tp8; off (no speculation)", "tpot_ms_p99_at_load": 40.0,
             "cost_per_million_output_tokens_usd": 2.0, "pareto": False, "overrides": {"policy": {"kind": "off"}}}]
    s = SimpleNamespace(rows=rows, chosen=rows[0], slo=SimpleNamespace(tpot_ms_p99=50.0), scenario="s",
                        meta={"scenario": "s", "engine": "ideal"}, target_qps=10.0)
    plot_pareto(s, tmp_path / "p.png")
    fig = saved_figures[-1]
    assert_labels_clear(fig)
    texts = [t.get_text() for t in fig.axes[0].texts if t.get_gid() == PLACED]
    assert "h100 tp8; no speculation" in texts, texts
