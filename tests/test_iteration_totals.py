"""A run that keeps no per-iteration log (`simulate(..., iterations="none")`) folds the rows into
IterationTotals as it goes: the same trajectory, and the same summary as the logged run (counts,
integer sums, maxima and ITL percentiles exactly; floating-point sums to rounding, summed in blocks)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from simulator.common.errors import SpecsightInputError
from simulator.run import simulate
from simulator.scenario.scenario import load_scenario
from simulator.serving.iteration_totals import weighted_percentiles
from simulator.serving.metrics import IterationLog, weighted_percentile
from tests.same_run import assert_same_summary_to_rounding

CASES = {
    # open loop over four replicas: they run ahead (RunAhead) and fold the log between stretches
    "fleet-eagle3": ("scenarios/llama8b-h100-eagle3-chat.yaml",
                     ["workload.num_requests=400", "workload.arrival={process: poisson, qps: 12}",
                      "hardware.replicas=4", "engine.router=least_outstanding"]),
    # closed loop with KV pressure (Replica.run: the log is folded at the end of the run)
    "closed-preempt": ("scenarios/llama8b-h200-eagle3-batch.yaml",
                       ["workload.num_requests=300", "engine.num_gpu_blocks=600", "policy.kind=adaptive"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_run_without_the_log_has_the_logged_runs_summary(case, monkeypatch):
    monkeypatch.setattr(IterationLog, "FOLD_ROWS", 97)      # many blocks, folded mid-run
    folds = []
    fold = IterationLog.fold
    monkeypatch.setattr(IterationLog, "fold", lambda self: (folds.append(len(self)), fold(self))[1])
    path, overrides = CASES[case]
    kept = simulate(load_scenario(path, overrides), baseline=True)
    dropped = simulate(load_scenario(path, overrides), baseline=True, iterations="none")
    if case.startswith("fleet"):       # folded between stretches (a stretch after the last arrival is long)
        assert len(folds) > 10 and max(folds) < len(kept.iterations) / 4
    assert dropped.iterations is None and dropped.baseline.iterations is None
    assert len(kept.iterations) > 10 * IterationLog.FOLD_ROWS
    pd.testing.assert_frame_equal(kept.requests, dropped.requests)
    assert_same_summary_to_rounding(dropped.summary, kept.summary)


def test_the_summary_counts_the_logged_rows():
    r = simulate(load_scenario(*CASES["fleet-eagle3"]))
    it = r.iterations
    assert r.summary["num_iterations"] == len(it)
    assert r.summary["num_decode_rounds"] == int((it["num_decode"] > 0).sum())
    assert r.summary["mean_batch"] == pytest.approx(it["batch"].mean(), rel=1e-15)


def test_weighted_percentiles_sort_once_and_agree_with_one_at_a_time():
    rng = np.random.default_rng(1)
    v = rng.exponential(size=500)
    w = rng.integers(0, 5, size=500).astype(float)
    qs = (1, 50, 90, 99, 100)
    assert weighted_percentiles(v, w, qs) == [weighted_percentile(v, w, q) for q in qs]
    assert all(math.isnan(x) for x in weighted_percentiles(v, np.zeros(500), qs))


def test_an_unknown_iterations_output_is_refused():
    with pytest.raises(SpecsightInputError):
        simulate(load_scenario(*CASES["fleet-eagle3"]), iterations="disk")


def test_folding_mid_run_holds_no_view_of_the_log_a_profiler_could_keep(monkeypatch):
    """A sampling profiler (dask's, in a threaded worker) keeps the frames it samples, and with them
    their locals: a fold whose helper frames held numpy views of the live log left the log unable
    to grow ('BufferError: cannot resize an array that is exporting buffers', seen in plan search
    on a threaded dask cluster). Here every returning frame is kept, as such a profiler might: the
    run must still fold mid-run and finish."""
    import sys
    monkeypatch.setattr(IterationLog, "FOLD_ROWS", 97)
    kept_frames = []

    def keep(frame, event, arg):
        if event == "return":
            kept_frames.append(frame)

    path, overrides = CASES["fleet-eagle3"]
    scenario = load_scenario(path, overrides)
    sys.setprofile(keep)
    try:
        dropped = simulate(scenario, iterations="none")
    finally:
        sys.setprofile(None)
    assert len(kept_frames) > 0 and dropped.summary["num_iterations"] > 10 * IterationLog.FOLD_ROWS
