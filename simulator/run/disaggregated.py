"""A disaggregated deployment's run (serving/disagg.py): a prefill pool and a decode pool, each a
scenario of its own (scenario/disagg_spec.py), one request table, the KV moved over a link."""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np

from ..common.errors import SpecsightInputError
from ..costs.kv_cache import blocks_for
from ..engines import engine_for
from ..hardware.hardware import load_profile
from ..scenario.deployment import Deployment, drafter_loaded, memory_k_max, verify_width_fn
from ..scenario.disagg_spec import pool_link, pool_source
from ..scenario.engine_defaults import with_engine_defaults
from ..scenario.resolve import resolve_deployment
from ..scenario.scenario import Scenario, load_scenario
from ..serving.disagg import DecodeAdmission, DisaggEngine, PhasedDisagg, PrefillHandoff, pool_class
from ..serving.disagg_pools import pool_summaries
from ..serving.engine import run_to_frames
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


def drafter_kv_transferred(decode: Scenario) -> bool:
    """Whether the decode pool's engine moves the drafter's KV of the prompt with the target's
    (EngineDef.drafter_kv_transferred; `ideal`: moved, as SGLang's PD mode does) or rebuilds it on
    the decode instance."""
    d = decode.drafter
    if d is None or decode.engine.kind == "ideal":
        return True
    return engine_for(decode.engine.kind, decode.engine.version).drafter_kv_transferred(d)


def prefill_drafts(decode: Scenario) -> bool:
    """Whether the prefill pool runs the drafter over each prompt (and holds its weights and KV):
    a GPU drafter the decode pool loads, whose KV its engine moves (`drafter_kv_transferred`).
    Otherwise (rebuilt, a lookup proposer, or a decode pool that never speculates) it runs none."""
    d = decode.drafter
    return d is not None and not d.is_lookup and drafter_loaded(decode) and drafter_kv_transferred(decode)


def _pool_capacity(dep: Deployment, longest: int, bs: int, pool: str) -> int:
    if blocks_for(longest, bs) > dep.capacity_blocks:
        raise SpecsightInputError(f"disaggregation.{pool} (KV capacity, blocks of {bs} tokens)", dep.capacity_blocks,
                                  f"room for the longest request's {longest} tokens there; add memory or TP")
    return dep.capacity_blocks


def simulate_disagg(sc: Scenario, trace: bool, iterations: str) -> SimResult:
    """A disaggregated deployment (serving/disagg.py): the prefill pool's instances, then the
    decode pool's, each a scenario of its own (disagg_spec.pool_source), one request table."""
    sc = with_engine_defaults(sc)
    raw = sc.disaggregation
    assert raw is not None
    dsc = with_engine_defaults(load_scenario(pool_source(sc.source, "decode")))
    drafts = prefill_drafts(dsc)
    psc = with_engine_defaults(load_scenario(pool_source(sc.source, "prefill", keep_drafter=drafts)))
    ss = np.random.SeedSequence(sc.seed).spawn(4)
    reqs = generate_requests(sc.workload, np.random.default_rng(ss[SEED_WORKLOAD]))
    n = len(reqs)
    k_max, k_held = dsc.k_max, memory_k_max(dsc)
    lengths = reqs.prompt_len + reqs.output_len
    dep_p = resolve_deployment(psc, mean_tokens=float(reqs.prompt_len.mean()), hold_drafter=drafts)
    dep_d = resolve_deployment(dsc, mean_tokens=float(lengths.mean()) + k_held)
    bs = int(sc.engine.block_size)
    cap_p = _pool_capacity(dep_p, int(reqs.prompt_len.max()) + 1, bs, "prefill")
    cap_d = _pool_capacity(dep_d, int(lengths.max()) + k_held, bs, "decode")
    P, D = psc.hardware.replicas, dsc.hardware.replicas
    tp_p, tp_d = int(psc.hardware.tp), int(dsc.hardware.tp)
    link = pool_link(raw, load_profile(psc.hardware.profile or psc.hardware.gpu), P * tp_p + D * tp_d)
    assert dep_p.kv is not None and dep_d.kv is not None
    moves = drafter_kv_transferred(dsc)
    kv_d = dep_d.kv.kv_bytes_per_token        # per GPU, target + (loaded) drafter
    if not moves and dep_d.drafter is not None and drafter_loaded(dsc):
        kv_d -= dep_d.drafter.kv_bytes_per_token_per_gpu()         # rebuilt on the decode instance
    kv_tok = max(dep_p.kv.kv_bytes_per_token, kv_d)    # per GPU: each shard in parallel
    transfer = (link.latency_s + reqs.prompt_len * (kv_tok / (link.bandwidth_gb_s * 1e9))).tolist()

    table = RequestTable(reqs.arrival_s, reqs.prompt_len, reqs.output_len)
    d = dsc.drafter
    acceptance = tree_acceptance(copy.copy(dsc.acceptance), d.branches if d is not None else 1).bind(
        n, np.random.default_rng(ss[SEED_BIND]))
    acc_seeds = ss[SEED_ACCEPTANCE].spawn(P + D)
    match_seeds = ss[SEED_MATCH].spawn(P + D)
    verify_width = verify_width_fn(dsc, dep_d.drafter)
    ngram = d is not None and d.is_lookup
    trace_list: list | None = [] if trace else None
    base = Replica if sc.engine.kind == "ideal" else EngineReplica
    p_class = pool_class(base, PrefillHandoff, "Prefill")
    p_class.drafts_prompts = drafts
    if psc.engine.prefix_caching:
        p_class = with_prefix_cache(p_class)
        table.chains = reqs.chains or Chains(bs, spec=PrefixSpec(block_tokens=bs))
    d_class = pool_class(base, DecodeAdmission, "Decode")
    d_class.drafter_kv_arrived = moves

    def make_replica(env: simpy.Environment, i: int, tbl: RequestTable, log: IterationLog,
                     on_finish: Callable[[int], None]) -> Replica:
        pre = i < P
        pool_sc, dep = (psc, dep_p) if pre else (dsc, dep_d)
        policy = copy.deepcopy(pool_sc.policy)
        policy.reset()
        eng = pool_sc.engine
        return (p_class if pre else d_class)(
            env, i, tbl, log, cost=dep.step_cost, policy=policy, acceptance=acceptance,
            acc_rng=np.random.default_rng(acc_seeds[i]),
            match_rng=np.random.default_rng(match_seeds[i]) if ngram and not pre else None,
            match_probability=d.match_probability if ngram and not pre else 1.0,   # type: ignore[union-attr]
            verify_width=(lambda k: 1) if pre else verify_width,
            capacity_blocks=cap_p if pre else cap_d, block_size=bs, max_num_seqs=int(eng.max_num_seqs),
            max_num_batched_tokens=int(eng.max_num_batched_tokens), k_max=0 if pre else k_max,
            on_finish=on_finish, trace=trace_list)

    wl = sc.workload
    closed = (int(wl.concurrency), float(wl.think_time_s)) if wl.is_closed_loop else None   # type: ignore[arg-type]
    engine: DisaggEngine | PhasedDisagg
    if closed is None and trace_list is None and PhasedDisagg.ON:
        engine = PhasedDisagg(table, make_replica, P, D, psc.engine.router, dsc.engine.router, transfer.__getitem__)
    else:
        engine = DisaggEngine(table, make_replica, P, D, psc.engine.router, dsc.engine.router, transfer.__getitem__,
                              closed_loop=closed, trace=trace_list)
    req_df, it_df, totals = run_to_frames(engine, table, [cap_p] * P + [cap_d] * D, iterations)
    hist = sum(r.acc_hist for r in engine.decode)
    extra: dict[str, Any] = {
        "scenario": sc.name, "seed": sc.seed, "replicas": P + D, "k_max": k_max,
        "hardware_profile": f"prefill: {dep_p.hardware_profile}; decode: {dep_d.hardware_profile}",
        "kv_capacity_blocks": int(cap_d), "policy": getattr(dsc.policy, "kind", "?"),
        "kv_link": link.kind, "kv_transfer_ms_mean": float(np.mean(transfer)) * 1e3 if n else 0.0}
    if psc.engine.prefix_caching:
        extra.update(prefix_cache_summary(engine.prefill))
    gpus = P * tp_p + D * tp_d
    summary = summarize(req_df, it_df if totals is None else totals, hist, sc.slo, extra)
    summary["gpus"] = gpus
    summary["goodput_requests_per_s_per_gpu"] = summary["goodput_requests_per_s"] / gpus
    summary["pools"] = pool_summaries(engine, req_df, (psc.hardware.gpu, dsc.hardware.gpu), (tp_p, tp_d))
    summary["mean_batch"] = summary["pools"][1]["mean_batch"]      # the decode pool's: the batch speculation sees
    return SimResult(sc, req_df, it_df, summary, dep_d.kv, None, trace_list)
