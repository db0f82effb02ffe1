"""Where the simulator's time per decode iteration goes, by kind of iteration (not a test).

Runs workload (a) of bench_simulator.py with speculation on (10,000 requests, EAGLE-3 K = 3) and
times each iteration's replica work (`_complete` of one iteration, then `_schedule` of the next)
with time.perf_counter (which adds about 1 us to each), split into:

    compiled        uneventful decode rounds run by simulator/serving/decode_kernel.py (numba), the
                    Python wrapper's work included
    quiet           run inline in Python (no SimPy event), no prefill chunk, nobody near its output length
    per-request     run inline, but with prefill chunks, requests waiting, or an exact check of
                    who finishes (and retirement)
    on an event     iterations that end on a SimPy event (a request arrives inside them); their
                    time here includes the arrival's processing and the event itself

    .venv/bin/python benchmarks/bench_iteration_split.py
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    import bench_simulator as bs

    import simulator.serving.engine as engine_mod
    import simulator.serving.replica as replica_mod
    from simulator.run import simulate
    from simulator.scenario.scenario import load_scenario

    R, pc = replica_mod.Replica, time.perf_counter
    acc: dict[str, list[float]] = {"compiled": [0, 0.0], "quiet": [0, 0.0], "per-request": [0, 0.0]}
    complete, schedule, kernel_rounds = R._complete, R._schedule, R._kernel_rounds

    def timed_kernel_rounds(self, start, peek_s):
        t0 = pc()
        m = kernel_rounds(self, start, peek_s)
        dt = pc() - t0
        acc["compiled"][0] += m
        acc["compiled"][1] += dt
        if getattr(self, "_inline_kind", None) is not None:
            self._t0 += dt          # the Python iteration being timed does not include these rounds
        return m

    def timed_complete(self):
        self._inline_kind = None
        if self.env.now != self.now:           # the replica's clock is ahead: an inline iteration
            busy = bool(self._pf_sched) or bool(self.waiting) or self.rem_lb <= self._k + 1
            self._inline_kind = "per-request" if busy else "quiet"
        self._t0 = pc()
        complete(self)

    def timed_schedule(self):
        dt = schedule(self)
        kind = getattr(self, "_inline_kind", None)
        if kind is not None:
            acc[kind][0] += 1
            acc[kind][1] += pc() - self._t0
            self._inline_kind = None
        return dt

    loop: dict[str, float] = {}
    run = engine_mod.Engine.run

    def timed_run(self):
        t0 = pc()
        run(self)
        loop["s"] = pc() - t0

    R._complete, R._schedule, R._kernel_rounds = timed_complete, timed_schedule, timed_kernel_rounds
    engine_mod.Engine.run = timed_run
    with tempfile.TemporaryDirectory() as td:
        r = simulate(load_scenario(bs.scenario(10_000, True, Path(td))))
    n = r.summary["num_decode_rounds"]
    inline_n = sum(v[0] for v in acc.values())
    inline_s = sum(v[1] for v in acc.values())
    print(f"a-on: {n} decode iterations, loop {loop['s']:.2f} s (timed)")
    for kind, (count, secs) in acc.items():
        print(f"  {kind:<12} {count:>7} iterations  {1e6 * secs / count:6.2f} us each")
    rest = n - inline_n
    print(f"  {'on an event':<12} {rest:>7} iterations  {1e6 * (loop['s'] - inline_s) / rest:6.2f} us each")


if __name__ == "__main__":
    main()
