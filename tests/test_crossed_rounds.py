"""Replicas that do not run ahead (`Replica.run`: closed loops, and the coupled engine of a
disaggregated run, DisaggEngine, which closed loops and traces take and these tests take for open
loops too, `PhasedDisagg` off) let the compiled rounds run the round in flight at the next SimPy
event too (`Replica._wait_crossed`), its finishes and log row done at its end: every output must be
the one without that (`Replica.CROSS` off) and the one a timeout per iteration gives, bit for bit;
and a dropped log folded a block at a time during the run must give the totals that one fold at the
end gives."""
from __future__ import annotations

import pytest
from same_run import assert_same_run

from simulator.run import simulate
from simulator.scenario.scenario import load_scenario
from simulator.serving.compiled_rounds import CompiledRounds
from simulator.serving.disagg import PhasedDisagg
from simulator.serving.metrics import IterationLog
from simulator.serving.replica import Replica

DISAGG = "scenarios/llama8b-h100-eagle3-disagg.yaml"
EAGLE = "scenarios/llama8b-h100-eagle3-chat.yaml"
CASES = {
    "disagg": (DISAGG, ["workload.num_requests=300"]),
    "disagg-tight-decode-kv": (DISAGG, ["workload.num_requests=300", "disaggregation.decode.num_gpu_blocks=900"]),
    "disagg-prefix": (DISAGG, ["workload.num_requests=300", "engine.prefix_caching=true",
                               "engine.router=prefix_aware", "workload.prefix={shared_tokens: 256}"]),
    "closed-loop": (EAGLE, ["workload.num_requests=300", "hardware.replicas=3",
                            "workload.arrival={process: closed_loop, concurrency: 24}"]),
}


def _counted(monkeypatch, cls: type, name: str) -> list[int]:
    """Calls of cls.name from now on (a one-item list)."""
    seen = [0]
    plain = getattr(cls, name)

    def counted(self):
        seen[0] += 1
        plain(self)
    monkeypatch.setattr(cls, name, counted)
    return seen


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("iterations", ["memory", "none"])
def test_rounds_crossing_the_next_event_keep_every_output(name, iterations, monkeypatch):
    spec, over = CASES[name]
    sc = load_scenario(spec, over)
    monkeypatch.setattr(PhasedDisagg, "ON", False)
    seen = _counted(monkeypatch, CompiledRounds, "_complete_crossed")
    a = simulate(sc, iterations=iterations)
    assert seen[0] > 50, seen
    monkeypatch.setattr(Replica, "CROSS", False)
    b = simulate(sc, iterations=iterations)
    monkeypatch.setattr(Replica, "INLINE", False)
    c = simulate(sc, iterations=iterations)
    assert seen[0] > 50
    for other in (b, c):
        if iterations == "memory":
            assert_same_run(a, other)
        else:
            assert a.requests.equals(other.requests) and a.summary == other.summary


def test_log_folded_in_blocks_during_the_run_gives_the_end_fold_totals(monkeypatch):
    """FOLD_ROWS of 64: the disaggregated run folds whole blocks as it goes (fold_blocks), and its
    summary equals the one of the same run folding everything at its end, in the same blocks."""
    monkeypatch.setattr(IterationLog, "FOLD_ROWS", 64)
    monkeypatch.setattr(PhasedDisagg, "ON", False)
    calls = _counted(monkeypatch, IterationLog, "fold_blocks")
    sc = load_scenario(DISAGG, ["workload.num_requests=300"])
    a = simulate(sc, iterations="none")
    assert calls[0] > 10
    monkeypatch.setattr(IterationLog, "fold_blocks", lambda self: None)
    b = simulate(sc, iterations="none")
    assert a.summary == b.summary
