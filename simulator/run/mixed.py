"""A mixed fleet's run: every replica prefills and decodes (serving/engine.py), the requests
drawn from the scenario's seed (seeds.py)."""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import numpy as np

from ..common.errors import SpecsightInputError
from ..costs.kv_cache import blocks_for
from ..scenario.deployment import memory_k_max, verify_width_fn
from ..scenario.engine_defaults import with_engine_defaults
from ..scenario.resolve import resolve_deployment
from ..scenario.scenario import Scenario
from ..serving.engine import Engine, run_to_frames
from ..serving.engine_replica import EngineReplica
from ..serving.metrics import RequestTable, summarize
from ..serving.prefix_replica import prefix_cache_summary, with_prefix_cache
from ..serving.replica import Replica
from ..speculation.acceptance import tree_acceptance
from ..workload.prefix import Chains, PrefixSpec
from ..workload.workload import generate_requests
from .result import SimResult
from .seeds import SEED_ACCEPTANCE, SEED_BIND, SEED_MATCH, SEED_WORKLOAD

if TYPE_CHECKING:
    from collections.abc import Callable

    import simpy

    from ..serving.metrics import IterationLog


def simulate_mixed(sc: Scenario, trace: bool, iterations: str = "memory") -> SimResult:
    """One run of a mixed fleet: `hardware.replicas` instances, each prefilling and decoding."""
    sc = with_engine_defaults(sc)
    ss = np.random.SeedSequence(sc.seed).spawn(4)
    reqs = generate_requests(sc.workload, np.random.default_rng(ss[SEED_WORKLOAD]))
    n = len(reqs)
    eng = sc.engine
    bs = int(eng.block_size)
    k_max = sc.k_max
    k_held = memory_k_max(sc)                            # lookahead slots a sequence may hold (0: never speculates)
    lengths = reqs.prompt_len + reqs.output_len
    dep = resolve_deployment(sc, mean_tokens=float(lengths.mean()) + k_held if n else None)
    longest_request = int(lengths.max())
    longest = longest_request + k_held                   # its KV slots, the K drafts included
    window = dep.context_window_tokens
    if window and longest_request > window:     # an engine refuses such a request (vLLM: max_model_len)
        raise SpecsightInputError(
            "workload (longest prompt_len + output_len, tokens)", longest_request,
            f"exceeds {sc.model}'s context window of {window} tokens (max_position_embeddings in its config.json); "
            f"shorten the requests (a length distribution's max:, or the trace's longest) or pick a model "
            f"with a longer window")
    capacity = dep.capacity_blocks
    if sc.hardware.is_fixed and eng.num_gpu_blocks is None:
        # unbounded KV: report the capacity that holds every request at once
        capacity = int(((reqs.prompt_len + reqs.output_len + k_held + bs - 1) // bs).sum())
    if blocks_for(longest, bs) > capacity:
        if eng.num_gpu_blocks is not None:
            field, value = "engine.num_gpu_blocks", capacity
        else:      # the capacity follows from the memory: the requests are what is too long
            field, value = "workload (longest prompt_len + output_len + K, tokens)", longest
        raise SpecsightInputError(
            field, value, f"the KV cache ({capacity} blocks of {bs} tokens) cannot hold the longest request "
                          f"(prompt + output + K = {longest} tokens); shorten requests or add memory")

    max_seqs = int(eng.max_num_seqs)
    if dep.kv is not None and dep.kv.sliding_slots:     # a sequence runs in a sliding-window slot
        max_seqs = min(max_seqs, dep.kv.sliding_slots)
    table = RequestTable(reqs.arrival_s, reqs.prompt_len, reqs.output_len)
    d = sc.drafter
    # trees: a depth is accepted if any branch is (unless the model's figures are per depth already)
    acceptance = tree_acceptance(copy.copy(sc.acceptance), d.branches if d is not None else 1).bind(
        n, np.random.default_rng(ss[SEED_BIND]))
    acc_seeds = ss[SEED_ACCEPTANCE].spawn(sc.hardware.replicas)
    match_seeds = ss[SEED_MATCH].spawn(sc.hardware.replicas)
    verify_width = verify_width_fn(sc, dep.drafter)
    ngram = d is not None and d.is_lookup
    trace_list: list | None = [] if trace else None
    replica_class = Replica
    if eng.kind != "ideal":
        replica_class = EngineReplica
    if eng.prefix_caching:
        replica_class = with_prefix_cache(replica_class)
        # without shared prefixes a request's blocks are its own: hits come from preemptions
        table.chains = reqs.chains or Chains(bs, spec=PrefixSpec(block_tokens=bs))

    def make_replica(env: simpy.Environment, i: int, tbl: RequestTable, log: IterationLog,
                     on_finish: Callable[[int], None]) -> Replica:
        policy = copy.deepcopy(sc.policy)
        policy.reset()
        return replica_class(env, i, tbl, log, cost=dep.step_cost, policy=policy, acceptance=acceptance,
                       acc_rng=np.random.default_rng(acc_seeds[i]),
                       match_rng=np.random.default_rng(match_seeds[i]) if ngram else None,
                       match_probability=d.match_probability if ngram else 1.0,   # type: ignore[union-attr]
                       verify_width=verify_width,
                       capacity_blocks=capacity, block_size=bs, max_num_seqs=max_seqs,
                       max_num_batched_tokens=int(eng.max_num_batched_tokens), k_max=k_max,
                       on_finish=on_finish, trace=trace_list)

    wl = sc.workload
    closed = (int(wl.concurrency), float(wl.think_time_s)) if wl.is_closed_loop else None   # type: ignore[arg-type]
    engine = Engine(table, make_replica, sc.hardware.replicas, eng.router, closed_loop=closed, trace=trace_list)
    req_df, it_df, totals = run_to_frames(engine, table, [capacity] * sc.hardware.replicas, iterations)
    hist = sum(r.acc_hist for r in engine.replicas)
    extra = {"scenario": sc.name, "seed": sc.seed, "replicas": sc.hardware.replicas,
             "hardware_profile": dep.hardware_profile, "kv_capacity_blocks": int(capacity),
             "k_max": k_max, "policy": getattr(sc.policy, "kind", "?"),
             # sliding-window models: the sequences the slots hold at once (kv_cache.kv_budget)
             **({"kv_sliding_slots": int(dep.kv.sliding_slots)} if dep.kv is not None and dep.kv.sliding_slots else {})}
    if eng.prefix_caching:
        extra.update(prefix_cache_summary(engine.replicas))
    summary = summarize(req_df, it_df if totals is None else totals, hist, sc.slo, extra)
    return SimResult(sc, req_df, it_df, summary, dep.kv, None, trace_list)
