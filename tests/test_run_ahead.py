"""Replicas of an open loop run on to their next arrival (simulator/serving/run_ahead.py): every trajectory
must be the one a SimPy timeout per iteration gives (`Replica.INLINE = False`), bit for bit, for
each router, open and closed loop, speculation on and off, compiled rounds on and off (and running
the iteration in flight at the next arrival or not), and at exact ties between iteration ends and
arrivals."""
from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest
from golden_cases import fixed_ties_scenario
from same_run import assert_same_run

from simulator.run import simulate
from simulator.scenario.scenario import load_scenario
from simulator.serving.compiled_rounds import CompiledRounds
from simulator.serving.engine import Engine
from simulator.serving.metrics import N_ITER_COLS
from simulator.serving.replica import Replica
from simulator.serving.run_ahead import END, START, RunAhead

EAGLE = "scenarios/llama8b-h100-eagle3-chat.yaml"
OPEN = "workload.arrival={process: poisson, qps: 9}"


def _runs(spec, overrides, monkeypatch, kernel=True, trace=False):
    """(run-ahead run, one-timeout-per-iteration run, replica processes that ran ahead); one
    replica runs ahead too (Engine.RUN_AHEAD_MIN_REPLICAS), where its trace is compared as well."""
    monkeypatch.setattr(Replica, "KERNEL", kernel)
    monkeypatch.setattr(Engine, "RUN_AHEAD_MIN_REPLICAS", 1)
    stretches = [0]
    plain = RunAhead.run_ahead

    def counted(self):
        stretches[0] += 1
        return plain(self)
    monkeypatch.setattr(RunAhead, "run_ahead", counted)
    sc = load_scenario(spec, overrides)
    monkeypatch.setattr(Replica, "INLINE", True)
    a = simulate(sc, baseline=True, trace=trace)
    monkeypatch.setattr(Replica, "INLINE", False)
    b = simulate(sc, baseline=True, trace=trace)
    return a, b, stretches[0]


@pytest.mark.parametrize("router", ["round_robin", "least_outstanding"])
@pytest.mark.parametrize("policy", ["static", "off", "adaptive"])
@pytest.mark.parametrize("replicas", [1, 2, 3])
def test_open_loop_replicas_running_ahead_keep_the_trajectory(router, policy, replicas, monkeypatch):
    a, b, started = _runs(EAGLE, ["workload.num_requests=240", OPEN, f"hardware.replicas={replicas}",
                                  f"engine.router={router}", f"policy={{kind: {policy}}}"], monkeypatch)
    assert started == 2 * replicas          # run and baseline: every replica ran ahead
    assert_same_run(a, b)


@pytest.mark.parametrize("router", ["round_robin", "least_outstanding"])
def test_compiled_rounds_running_ahead_keep_the_trajectory(router, monkeypatch):
    a, b, _ = _runs(EAGLE, ["workload.num_requests=240", OPEN, "hardware.replicas=4", f"engine.router={router}"],
                    monkeypatch, kernel=True)
    c, _, _ = _runs(EAGLE, ["workload.num_requests=240", OPEN, "hardware.replicas=4", f"engine.router={router}"],
                    monkeypatch, kernel=False)
    assert_same_run(a, b)
    assert_same_run(c, b)


@pytest.mark.parametrize("router", ["round_robin", "least_outstanding"])
@pytest.mark.parametrize("policy", ["static", "off"])
def test_closed_loop_keeps_the_trajectory(router, policy, monkeypatch):
    a, b, started = _runs(EAGLE, ["workload.num_requests=200", "hardware.replicas=3", f"engine.router={router}",
                                  f"policy={{kind: {policy}}}"], monkeypatch)
    assert started == 0                     # a finish issues the next request: Replica.run's rule
    assert_same_run(a, b)


def _ties(reps, router, arrival, out, ngram):
    sc = fixed_ties_scenario(reps, arrival, out, ngram)
    sc["engine"] = {"router": router}
    return sc


# Fixed step costs exact in binary: iterations end exactly when requests arrive, at 0.25 s
# (every arrival), 0.125 s apart (two per iteration) and in bursts of simultaneous arrivals (trace).
TIES = [(reps, router, arrival, out, ngram)
        for reps in (1, 2, 3)
        for router in ("round_robin", "least_outstanding")
        for arrival in ({"process": "constant", "qps": 4}, {"process": "constant", "qps": 8},
                        {"process": "trace", "path": "tests/data/ties_trace.csv"})
        for out in (1, {"dist": "uniform", "low": 1, "high": 9})
        for ngram in (False, True)
        if not (reps == 1 and router == "least_outstanding")]


@pytest.mark.parametrize("reps,router,arrival,out,ngram", TIES)
def test_exact_ties_between_iteration_ends_and_arrivals(reps, router, arrival, out, ngram, monkeypatch):
    spec = _ties(reps, router, arrival, out, ngram)
    if arrival["process"] == "trace":
        spec["workload"].pop("num_requests")
        spec["workload"].update(prompt_len=4)
    a, b, started = _runs(spec, [], monkeypatch, trace=reps == 1)
    assert started == 2 * reps
    assert_same_run(a, b)


def test_a_trace_of_several_replicas_keeps_simpys_order(monkeypatch):
    # the trace's order at one instant across replicas is SimPy's: kept by Replica.run's rule
    a, b, started = _runs(_ties(2, "round_robin", {"process": "constant", "qps": 8}, 3, False), [],
                          monkeypatch, trace=True)
    assert started == 0
    assert_same_run(a, b)


def test_round_robin_replicas_run_on_past_each_others_iterations(monkeypatch):
    """With round robin a replica's stretch ends at its own next arrival, not at the next event of
    the fleet: far fewer SimPy timeouts than iterations at eight replicas."""
    timeouts = [0]
    plain = Engine.run

    def counting(self):
        tm = self.env.timeout

        def counted(*args, **kw):
            timeouts[0] += 1
            return tm(*args, **kw)
        self.env.timeout = counted
        plain(self)
    monkeypatch.setattr(Engine, "run", counting)
    r = simulate(load_scenario(EAGLE, ["workload.num_requests=400", "workload.arrival={process: poisson, qps: 24}",
                                       "hardware.replicas=8"]))
    arrivals = r.requests["arrival_s"].nunique()
    # the arrival process's timeouts, and about one per replica per arrival it receives
    assert timeouts[0] < arrivals * 2.2, (timeouts[0], arrivals, r.summary["num_iterations"])
    assert r.summary["num_iterations"] > 5 * arrivals


@pytest.mark.parametrize("router", ["round_robin", "least_outstanding"])
def test_a_closed_loop_of_one_request_per_user_is_the_open_loop_it_is(router, monkeypatch):
    """concurrency >= num_requests: every user sends one request at t = 0 and none a second, so the
    engine runs it as an open loop (replicas running ahead): the closed loop's trajectory and trace."""
    sc = load_scenario(EAGLE, ["workload.num_requests=150", "workload.arrival={process: closed_loop, concurrency: 150}",
                               "hardware.replicas=3", f"engine.router={router}"])
    runs = []
    for as_open in (True, False):
        monkeypatch.setattr(Engine, "ONE_REQUEST_USERS_AS_OPEN", as_open)
        runs.append(simulate(sc, baseline=True))
    assert_same_run(*runs)
    monkeypatch.setattr(Engine, "RUN_AHEAD_MIN_REPLICAS", 1)
    sc1 = load_scenario(EAGLE, ["workload.num_requests=60", "workload.arrival={process: closed_loop, concurrency: 64}"])
    runs = []
    for as_open in (True, False):
        monkeypatch.setattr(Engine, "ONE_REQUEST_USERS_AS_OPEN", as_open)
        runs.append(simulate(sc1, baseline=True, trace=True))
    assert_same_run(*runs)


def _crossings(monkeypatch) -> Counter:
    """Counts the compiled stretches that ran the iteration in flight at a replica's next arrival h
    (run_ahead.py), by where it ends: after h, at h behind h's arrivals, at h before them."""
    seen: Counter = Counter()
    plain = CompiledRounds._kernel_rounds

    def counted(self, start, peek_s, stop_at_finish=False):
        m = plain(self, start, peek_s, stop_at_finish)
        if m and self.arrivals and self.now >= peek_s:      # run_ahead's stretch crossed peek_s
            row = len(self._logbuf) - N_ITER_COLS
            t = self._logbuf[row + END]
            now, qa, tie = self.now, self._qa, self._tie    # as run_ahead sees it: at the round's start,
            self.now = self._logbuf[row + START]            # `_tie` after the rounds before it
            self._tie = self._rounds_tie(m, 1)
            first = self._arrivals_first(t, len(self.arrivals))
            self.now, self._qa, self._tie = now, qa, tie
            seen["after" if t > peek_s else "arrivals first" if first else "replica first"] += 1
        return m
    monkeypatch.setattr(CompiledRounds, "_kernel_rounds", counted)
    return seen


@pytest.mark.parametrize("router", ["round_robin", "least_outstanding"])
def test_compiled_rounds_run_the_iteration_in_flight_at_the_next_arrival(router, monkeypatch):
    """The compiled rounds run the iteration that is in flight when a replica's next request
    arrives (a trace waits for the arrival), its finishes retired at its end, after a router that
    reads the replicas (least outstanding) picked; the trajectory is the one-timeout-per-iteration
    path's, and the same as with no crossing."""
    seen = _crossings(monkeypatch)
    over = ["workload.num_requests=240", OPEN, "hardware.replicas=4", f"engine.router={router}"]
    a, b, _ = _runs(EAGLE, over, monkeypatch)
    assert_same_run(a, b)
    assert seen["after"] > 20, seen
    crossed = sum(seen.values())
    monkeypatch.setattr(Replica, "CROSS", False)
    monkeypatch.setattr(Replica, "INLINE", True)
    c = simulate(load_scenario(EAGLE, over), baseline=True)
    assert sum(seen.values()) == crossed
    assert_same_run(c, b)


def test_a_trace_keeps_the_iteration_in_flight_for_after_the_arrival(monkeypatch):
    """A trace records the arrival before what the iteration in flight does after it: no crossing."""
    seen = _crossings(monkeypatch)
    a, b, started = _runs(EAGLE, ["workload.num_requests=120", OPEN], monkeypatch, trace=True)
    assert started == 2 and not seen
    assert_same_run(a, b)


def test_compiled_iterations_in_flight_at_exact_ties(monkeypatch):
    """Iterations that end exactly at a replica's next arrival, run in the compiled rounds: at h
    behind h's arrivals (the replica then waits for them), at h before them (it plans its next
    iteration at once, without the arrivals) and after h, on the tie trace's bursts."""
    seen = _crossings(monkeypatch)
    for reps in (2, 3):
        spec = _ties(reps, "round_robin", {"process": "trace", "path": "tests/data/ties_trace.csv"},
                     {"dist": "uniform", "low": 1, "high": 9}, False)
        spec["workload"].pop("num_requests")
        spec["workload"].update(prompt_len=4)
        a, b, _ = _runs(spec, [], monkeypatch)
        assert_same_run(a, b)
    assert min(seen["after"], seen["arrivals first"], seen["replica first"]) > 0, seen


def test_a_round_robin_replica_runs_what_its_requests_alone_give(tmp_path):
    """Round robin: nothing but its own requests reaches a replica, so replica 0 of a fleet (whose
    acceptance stream is a single replica's) runs the trajectory that its requests replayed alone
    on one replica give, bit for bit, though it ran ahead past the other replicas' iterations and
    completed the iterations in flight at its arrivals before them."""
    fleet = simulate(load_scenario(EAGLE, ["workload.num_requests=240", OPEN, "hardware.replicas=4"]))
    mine = fleet.requests[fleet.requests["replica"] == 0].reset_index(drop=True)
    path = tmp_path / "share.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" + "".join(
        f"{a!r},{p},{o}\n" for a, p, o in zip(mine["arrival_s"].tolist(), mine["prompt_tokens"].tolist(),
                                             mine["output_tokens"].tolist())))
    alone = simulate(load_scenario(EAGLE, [f"workload={{arrival: {{process: trace, path: {path}}}}}"]))
    it = fleet.iterations
    pd.testing.assert_frame_equal(it[it["replica"] == 0].reset_index(drop=True), alone.iterations)
    cols = ["arrival_s", "first_token_s", "finish_s", "rounds", "accepted_drafts", "drafted_tokens"]
    pd.testing.assert_frame_equal(mine[cols], alone.requests[cols])


@pytest.mark.parametrize("shared", [0, 256])
def test_prefix_aware_replicas_running_ahead_keep_the_trajectory(shared, monkeypatch):
    """Prefix caching under the prefix-aware router, which reads every replica's load and cache at
    each arrival: replicas running ahead, the compiled rounds running the iterations in flight at
    arrivals (their finishes, which change what the router reads, retired at their ends), give the
    one-timeout-per-iteration trajectory bit for bit."""
    seen = _crossings(monkeypatch)
    over = ["workload.num_requests=240", OPEN, "hardware.replicas=4", "engine.router=prefix_aware",
            "engine.prefix_caching=true", f"workload.prefix={{shared_tokens: {shared}}}"]
    a, b, _ = _runs(EAGLE, over, monkeypatch)
    assert_same_run(a, b)
    assert seen["after"] > 20, seen
    assert a.summary["prefix_cache_hit_rate"] == b.summary["prefix_cache_hit_rate"]
    assert (a.summary["prefix_cache_hit_rate"] > 0.05) == (shared > 0)
