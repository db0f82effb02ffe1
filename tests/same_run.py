"""Two simulations that must be the same run, bit for bit: every DataFrame, the trace, the summary
(an optimisation switched on and off: `Replica.INLINE`, `Replica.KERNEL`)."""
import pandas as pd


def assert_same_run(a, b) -> None:
    pd.testing.assert_frame_equal(a.requests, b.requests)
    pd.testing.assert_frame_equal(a.iterations, b.iterations)
    assert (a.baseline is None) == (b.baseline is None)
    if a.baseline is not None:
        pd.testing.assert_frame_equal(a.baseline.iterations, b.baseline.iterations)
    assert a.trace == b.trace
    assert a.summary == b.summary


# floating-point sums over the iterations: folded in blocks of another order (the log dropped),
# they may differ in the last bits
FLOAT_SUMS = ("itl_ms_mean", "draft_time_frac", "verify_time_frac", "prefill_time_frac",
              "overhead_time_frac", "busy_frac", "kv_util_mean")


def assert_same_summary_to_rounding(got: dict, want: dict) -> None:
    """Every summary key equal, the iteration sums (FLOAT_SUMS, speedups, baseline busy) to 1e-12."""
    import math

    import pytest
    assert list(got) == list(want)
    for key, w in want.items():
        g = got[key]
        if key in FLOAT_SUMS or key.startswith(("speedup_", "baseline_busy")):
            assert g == pytest.approx(w, rel=1e-12, nan_ok=True), key
        elif isinstance(w, float) and math.isnan(w):
            assert math.isnan(g), key
        else:
            assert g == w, key
