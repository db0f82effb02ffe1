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
