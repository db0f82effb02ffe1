"""What a break-even plot draws answers what its text prints: the analytic curve passes through
every printed analytic value (one function prices both; under a real engine too)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

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
