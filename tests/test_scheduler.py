"""The replica's rooms seen from outside: the prefill walk and its dry run, and the policy
declarations the replica reads instead of policy types."""
import copy

import numpy as np
import pytest
import simpy

from simulator.serving.metrics import IterationLog, RequestTable
from simulator.serving.replica import Replica
from simulator.serving.step_cost import FixedStepCost
from simulator.speculation.acceptance import IIDAcceptance
from simulator.speculation.policies import AdaptivePolicy, StaticPolicy


def _replica(prompts, policy=None, capacity_blocks=64, max_num_seqs=8, max_num_batched_tokens=96, k_max=2):
    n = len(prompts)
    table = RequestTable(np.zeros(n), np.array(prompts), np.full(n, 50))
    env = simpy.Environment()
    return Replica(env, 0, table, IterationLog(), cost=FixedStepCost(0.01, 0.001),
                   policy=policy or StaticPolicy(k_max), acceptance=IIDAcceptance(0.7),
                   acc_rng=np.random.default_rng(0), match_rng=None, match_probability=1.0,
                   verify_width=lambda k: k + 1, capacity_blocks=capacity_blocks, block_size=16,
                   max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens, k_max=k_max,
                   on_finish=lambda rid: None, trace=[])


def _state(r):
    return (copy.deepcopy(r.prefills), list(r.waiting), r.pf_blocks, r._preempted, list(r.trace),
            r.table.preemptions.copy())


@pytest.mark.parametrize("budget,free,preempts", [(96, 64, 0), (40, 64, 0), (96, 5, 0), (200, 3, 0), (96, 1, 1)])
def test_dry_run_is_the_walk_without_its_effects(budget, free, preempts):
    r = _replica([30, 70, 20, 100, 10])
    for rid in range(5):
        r.submit(rid)
    r._walk_prefills(0, 50, 64)                    # request 0 whole, request 1 in part: two partial prefills
    before = _state(r)
    empty, *dry = r._walk_prefills(0, budget, free, dry_run=True)
    assert repr(_state(r)) == repr(before) and empty == []      # nothing admitted, preempted or recorded
    sched, *real = r._walk_prefills(0, budget, free)
    assert r._preempted == preempts
    if not preempts:                               # where nothing had to give way, the same pass
        assert dry == real and sched
    else:                                          # the dry run counts the chunk the walk preempts
        assert dry[0] > real[0]


def test_walk_admits_fcfs_within_the_token_budget_and_max_num_seqs():
    r = _replica([30, 30, 30, 30], max_num_seqs=3)
    for rid in range(4):
        r.submit(rid)
    sched, tok, ctx, pairs, logits, free = r._walk_prefills(1, 80, 64)     # one decode sequence running
    assert [e[0] for e in sched] == [0, 1] and list(r.waiting) == [2, 3]   # max_num_seqs 3
    assert (tok, ctx, logits) == (60, 0, 2) and pairs == 2 * (30 * 31 // 2)
    assert free == 64 - 4 and r.pf_blocks == 4
    assert [t[1:] for t in r.trace] == [("admit", 0), ("admit", 1)]


class _StaticThatObserves(StaticPolicy):
    observes_rounds = True

    def __init__(self, k_max):
        super().__init__(k_max)
        self.seen = 0

    def observe(self, k, accepted):
        self.seen += len(accepted)


def test_the_replica_reads_what_a_policy_declares():
    r = _replica([10], policy=StaticPolicy(2))
    assert r.spec_on and r._k_of_n == [0] + [2] * 8 and not r._observes and not r.prices_rounds
    r = _replica([10], policy=AdaptivePolicy(2))
    assert r._k_of_n is None and r._observes and r._kern is None        # observes every round: Python rounds
    p = _StaticThatObserves(2)
    r = _replica([10], policy=p)
    assert r._observes and r._kern is None and r._k_of_n is not None
    off = StaticPolicy(2)
    off.speculates = False
    assert not _replica([10], policy=off).spec_on
