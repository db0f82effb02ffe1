"""`simulate(scenario)`: run one scenario and return its data (nothing is written or printed).

Random streams (common random numbers): the scenario seed spawns independent child seeds for
the workload, acceptance, n-gram matching and per-request acceptance binding, so a run and its
K = 0 baseline see identical arrivals and lengths.
"""
from __future__ import annotations

import copy
import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .common.errors import SpecsightInputError, SpecsightWarning
from .costs.cost_model import CostModel
from .costs.kv_cache import KVBudget, blocks_for, estimate_activation_reserve_bytes, kv_budget
from .engines import EngineLimits, engine_defaults, engine_for, engine_label
from .engines.device import device_class
from .engines.host import load_host_overrides
from .engines.measured_host import load_measured_host
from .engines.step_cost import EngineStepCost, engine_profile
from .engines.tiles import TiledCostModel
from .hardware.hardware import load_profile
from .models.catalog import head_target_mismatch, load_model
from .scenario.disagg_spec import pool_link, pool_source
from .scenario.scenario import Scenario, load_scenario
from .scenario.work_limits import check_memory
from .serving.disagg import DecodeAdmission, DisaggEngine, PhasedDisagg, PrefillHandoff, pool_class
from .serving.engine import Engine
from .serving.engine_replica import EngineReplica
from .serving.metrics import RequestTable, speedups, summarize
from .serving.prefix_replica import with_prefix_cache
from .serving.replica import Replica
from .serving.step_cost import FixedStepCost, RooflineStepCost
from .speculation.acceptance import tree_acceptance
from .speculation.acceptance_presets import k_extrapolation, shape_mismatch
from .speculation.drafters import Drafter
from .workload.prefix import Chains, PrefixSpec
from .workload.workload import generate_requests

if TYPE_CHECKING:
    from collections.abc import Callable

    import simpy

    from .serving.metrics import IterationLog
    from .speculation.drafters import DrafterSpec

# child seeds of the scenario seed, by role (order is part of the reproducibility contract)
SEED_WORKLOAD, SEED_ACCEPTANCE, SEED_MATCH, SEED_BIND = range(4)
ITERATION_OUTPUTS = ("memory", "none")    # simulate(iterations=...): the per-iteration log kept, or not


@dataclass(frozen=True)
class SimResult:
    """One run: per-request and per-iteration DataFrames, the summary, and the baseline run."""
    scenario: Scenario
    requests: Any                      # pandas.DataFrame, one row per request
    iterations: Any                    # pandas.DataFrame, one row per iteration (all replicas); None: not kept
    summary: dict[str, Any]
    kv: KVBudget | None = None         # memory breakdown per GPU (None for hardware.kind fixed)
    baseline: SimResult | None = None
    trace: list | None = field(default=None, repr=False)
    # `<metric>_interval` -> [low, high], the 80 % intervals of the summary's speedups and TPOTs under a
    # real engine: filled by `specsight.simulate` (specsight/studies/simulate.py), empty from here
    intervals: dict[str, Any] = field(default_factory=dict)

    @property
    def engine(self) -> str:
        """The engine the run was priced under (`ideal`, `vllm v1`, ...)."""
        return engine_label(self.scenario.engine.kind, self.scenario.engine.version)


@dataclass(frozen=True)
class Deployment:
    """What a scenario resolves to on its hardware: per-iteration costs and KV capacity."""
    step_cost: Any
    drafter: Drafter | None
    kv: KVBudget | None
    capacity_blocks: int
    hardware_profile: str
    context_window_tokens: int = 0   # the target's max_position_embeddings (0: not given, or fixed step costs)


class _SpecOnly:
    """Lets Drafter.verify_tokens_per_seq run without a cost model (hardware.kind fixed)."""

    def __init__(self, spec: DrafterSpec):
        self.spec = spec


def verify_width_fn(scenario: Scenario, drafter: Drafter | None) -> Callable[[int], int]:
    if drafter is not None:
        return drafter.verify_tokens_per_seq
    if scenario.drafter is None:
        return lambda k: 1
    shim = _SpecOnly(scenario.drafter)
    return lambda k: Drafter.verify_tokens_per_seq(shim, k)   # type: ignore[arg-type]


def resolve_deployment(scenario: Scenario, max_request_tokens: int = 0,
                       mean_tokens: float | None = None) -> Deployment:
    """Cost model, drafter and KV capacity of one replica (roofline), or the fixed step costs;
    mean_tokens: the KV slots a request keeps at its end, on average (sizes a sliding-window
    model's slots: kv_cache.sliding_slots; None: a slot's length)."""
    hw, eng = scenario.hardware, scenario.engine
    if eng.kind != "ideal":
        return _engine_deployment(scenario, mean_tokens)
    if hw.is_fixed:
        cost = FixedStepCost(hw.target_step_s, hw.draft_step_s)   # type: ignore[arg-type]
        cap = eng.num_gpu_blocks
        desc = f"fixed step costs (target_step_s={hw.target_step_s}, draft_step_s={hw.draft_step_s})"
        return Deployment(cost, None, None, int(cap) if cap is not None else 0, desc)

    profile = load_profile(hw.profile or hw.gpu)   # type: ignore[arg-type]
    model = load_model(scenario.model)             # type: ignore[arg-type]
    cm = CostModel(model, profile, tp=int(hw.tp), dtype=hw.dtype, kv_dtype=hw.kv_dtype, ep=int(hw.ep),
                   dp_attention=bool(hw.dp_attention))
    drafter = Drafter(scenario.drafter, model, cm) if scenario.drafter is not None else None
    if drafter is not None and drafter_loaded(scenario) and (hw.ep > 1 or hw.dp_attention):
        _drafter_layout(drafter, cm)
    kv = _kv_budget(scenario, cm, drafter, mean_tokens)
    return Deployment(RooflineStepCost(cm, drafter), drafter, kv, kv.num_blocks, profile.describe(),
                      model.max_position_embeddings)


def _drafter_layout(drafter: Drafter, cm: Any) -> None:
    """A drafter with its own weights runs in the target's layout (SGLang builds the draft worker
    in the target's attention-TP group, docs/reference/engines.md): its routed experts over the same ep
    groups (a dense drafter: ep 1), its attention data-parallel with the target's."""
    dc, layout = drafter.draft_cost, cm.layout
    if dc is None:
        return
    if dc.tp != cm.tp:
        raise SpecsightInputError("drafter.draft_tp", dc.tp, f"the target's tp ({cm.tp}) with hardware.ep or "
                                                             "hardware.dp_attention")
    drafter.draft_cost = CostModel(dc.model, dc.hw, tp=dc.tp, dtype=dc.dtype, kv_dtype=dc.kv_dtype,
                                   ep=layout.ep if dc.model.is_moe else 1, dp_attention=layout.dp_attention)


def drafter_loaded(scenario: Scenario) -> bool:
    """Whether the deployment holds a drafter in memory: it names one and its policy may speculate.
    A policy that never speculates (Policy.speculates False: `off`, the baseline's) is a plain
    deployment: no drafter weights, drafter KV or K lookahead in its memory budget
    (docs/simulator.md, KV capacity)."""
    return scenario.drafter is not None and bool(scenario.policy.speculates)


def memory_k_max(scenario: Scenario) -> int:
    """The K the memory budget reserves for (sampler logits, lookahead slots): k_max with a drafter
    loaded, else 0."""
    return scenario.k_max if drafter_loaded(scenario) else 0


def _kv_budget(scenario: Scenario, cm: Any, drafter: Drafter | None, mean_tokens: float | None = None) -> KVBudget:
    """The replica's KV memory: what the weights (target and, when loaded, drafter) and the
    activation reserve leave of each GPU's HBM (with sliding layers: the pool and the slots,
    kv_cache.kv_budget)."""
    eng = scenario.engine
    k = memory_k_max(scenario)
    loaded = drafter if drafter_loaded(scenario) else None
    if eng.activation_reserve_gb is not None:
        reserve = float(eng.activation_reserve_gb) * 1e9
    else:
        reserve = estimate_activation_reserve_bytes(cm, int(eng.max_num_batched_tokens), int(eng.max_num_seqs), k)
    return kv_budget(cm, loaded.weight_bytes_per_gpu() if loaded else 0.0,
                     loaded.kv_bytes_per_token_per_gpu() if loaded else 0.0,
                     block_size=int(eng.block_size), gpu_memory_utilization=float(eng.gpu_memory_utilization),
                     activation_reserve_bytes=reserve, num_gpu_blocks=eng.num_gpu_blocks,
                     max_num_seqs=int(eng.max_num_seqs), k_max=k,
                     max_num_batched_tokens=int(eng.max_num_batched_tokens), mean_tokens=mean_tokens)


def _engine_deployment(scenario: Scenario, mean_tokens: float | None = None, measured: Any = None) -> Deployment:
    """resolve_deployment for a real engine (simulator/engines/): the profile's GPU side with the
    engine's host model, linear layers with tile and wave quantization, the engine's round. On a
    device class with measured host time (a CPU) `measured` (a MeasuredHost) stands in for the
    engine version's file: the fit of those constants prices the passes without them."""

    hw, eng = scenario.hardware, scenario.engine
    engine = engine_for(eng.kind, eng.version)
    if eng.profile is not None:
        engine.host_overrides = load_host_overrides(eng.profile, engine.name, engine.version)
    if hw.is_fixed:
        raise SpecsightInputError("engine.kind", eng.kind, "a real engine prices passes on a GPU profile: "
                                                           "hardware.kind roofline, or engine.kind ideal")
    tp = int(hw.tp)
    if hw.ep > 1 or hw.dp_attention:
        raise SpecsightInputError("hardware.ep", hw.ep, "1 (and dp_attention false) with a real engine: expert "
                                                        "parallelism is priced by engine.kind ideal")
    loaded = drafter_loaded(scenario)        # a plain deployment runs no drafter: nothing to refuse
    if loaded:
        engine.check(scenario.drafter, tp)
    base = load_profile(hw.profile or hw.gpu)   # type: ignore[arg-type]
    device = device_class(base)
    host_name = engine.measured_host_name(device)
    if host_name is None:
        measured = None
    elif measured is None:
        measured = load_measured_host(host_name)
    if measured is not None and loaded and scenario.drafter is not None:
        measured.proposer(scenario.drafter.method)        # refuse a method whose proposer was not measured
    profile = engine_profile(base, device)
    model = load_model(scenario.model)          # type: ignore[arg-type]
    costs = TiledCostModel if device.tiles else CostModel
    cm = costs(model, profile, tp=tp, dtype=hw.dtype, kv_dtype=hw.kv_dtype)
    drafter = Drafter(scenario.drafter, model, cm) if scenario.drafter is not None else None
    if drafter is not None and drafter.draft_cost is not None:
        dc = drafter.draft_cost
        if dc.tp != tp and loaded:
            raise SpecsightInputError("drafter.model", scenario.drafter.model,   # type: ignore[union-attr]
                                      f"{engine.label} runs the drafter at the target's TP ({tp}); its heads "
                                      f"({dc.model.num_heads}) do not divide by it")
        drafter.draft_cost = costs(dc.model, dc.hw, tp=dc.tp, dtype=dc.dtype)
    kv = _kv_budget(scenario, cm, drafter, mean_tokens)
    limits = EngineLimits(int(eng.max_num_seqs), int(eng.max_num_batched_tokens), tp)
    cost = EngineStepCost(engine, limits, cm, drafter, scenario.k_max, device, measured)
    return Deployment(cost, drafter, kv, kv.num_blocks, f"{base.describe()}; engine {engine.label}",
                      model.max_position_embeddings)


def engine_deployment(scenario: Scenario | str | Path | Mapping[str, Any], measured: Any) -> Deployment:
    """A real engine's deployment with `measured` host constants (a MeasuredHost) in place of its
    version's file (calibrate/engine_host_fit.py prices the passes with zero host time)."""
    sc = with_engine_defaults(_as_scenario(scenario))
    return _engine_deployment(sc, None, measured)


def with_engine_defaults(sc: Scenario) -> Scenario:
    """The scenario with its engine's defaults for the `engine:` keys it leaves unset (ideal:
    unchanged)."""
    if sc.engine.kind == "ideal":
        return sc
    engine = engine_for(sc.engine.kind, sc.engine.version)
    src = sc.source.get("engine") if isinstance(sc.source, Mapping) else None
    d = engine_defaults(engine, src, memory_k_max(sc) > 0, int(sc.hardware.tp))
    if "max_num_seqs" in d:
        d["max_num_seqs"] = min(d["max_num_seqs"], int(sc.engine.max_num_batched_tokens))
    return dataclasses.replace(sc, engine=dataclasses.replace(sc.engine, **d)) if d else sc


def _as_scenario(s: Scenario | str | Path | Mapping[str, Any]) -> Scenario:
    return s if isinstance(s, Scenario) else load_scenario(s)


def simulate(scenario: Scenario | str | Path | Mapping[str, Any], *, baseline: bool = False,
             trace: bool = False, iterations: str = "memory") -> SimResult:
    """Run a scenario. baseline=True also runs it with speculation off on the same requests and
    merges `speedup_*` and `baseline_*` keys into the summary. trace=True records
    (time_s, event, request_id) tuples (arrive, admit, first_token, preempt, finish).
    iterations="none" keeps no per-iteration log (`SimResult.iterations` is None): its rows are
    folded into the summary's figures as the run goes (simulator/serving/iteration_totals.py)."""
    if iterations not in ITERATION_OUTPUTS:
        raise SpecsightInputError("iterations", iterations, " or ".join(ITERATION_OUTPUTS))
    sc = _as_scenario(scenario)
    check_memory(sc)
    _warn_shape_mismatch(sc)
    result = _simulate_one(sc, trace, iterations)
    if not baseline:
        return result
    base = _simulate_one(sc.baseline(), trace, iterations)
    summary = dict(result.summary)
    summary.update(speedups(result.summary, base.summary))
    return SimResult(sc, result.requests, result.iterations, summary, result.kv, base, result.trace)


def _warn_shape_mismatch(sc: Scenario) -> None:
    """Doubtful inputs, each a warning (results unchanged): a chain drafter given a tree-measured
    acceptance preset (naming a chain preset), a preset measured at a smaller K than the scenario
    runs, a drafter head trained for another target than the scenario's."""
    if sc.drafter is None:
        return
    preset = getattr(sc.acceptance, "preset", None)
    messages = [] if preset is None else [shape_mismatch(preset.name, sc.drafter.method, sc.drafter.branches),
                                          k_extrapolation(preset.name, sc.k_max)]
    if sc.drafter.model and sc.model:
        messages.append(head_target_mismatch(str(sc.drafter.model), str(sc.model)))
    for message in messages:
        if message:
            warnings.warn(message, SpecsightWarning, stacklevel=3)


def _run_engine(engine: Engine, table: RequestTable, caps: list[int], iterations: str) -> tuple[Any, Any, Any]:
    """Run the engine; the requests' and iterations' DataFrames (None with iterations "none") and the
    iteration totals (None with the log kept)."""
    totals = engine.log.drop(caps) if iterations == "none" else None
    engine.run()
    req_df = table.frame()
    if totals is not None:
        engine.log.fold()
    it_df = engine.log.frame(caps) if totals is None else None
    return req_df, it_df, totals


def pool_keys(result: SimResult) -> dict[str, Any]:
    """`pools` and `prefix_cache_hit_rate` for any run (`simulate --json`): a disaggregated run's
    pools, or the mixed fleet as one pool; the hit rate None without prefix caching."""
    s = result.summary
    pools = s.get("pools")
    if pools is None:
        hw = result.scenario.hardware
        tp = 1 if hw.is_fixed else int(hw.tp)
        pools = [{"pool": "mixed", "instances": int(hw.replicas), "tp": tp, "gpus": int(hw.replicas) * tp,
                  "gpu": hw.gpu, "mean_batch": s.get("mean_batch"), "ttft_ms_p50": s.get("ttft_ms_p50"),
                  "ttft_ms_p99": s.get("ttft_ms_p99"), "tpot_ms_p50": s.get("tpot_ms_p50"),
                  "tpot_ms_p99": s.get("tpot_ms_p99")}]
    return {"pools": pools, "prefix_cache_hit_rate": s.get("prefix_cache_hit_rate")}


def prefix_cache_summary(replicas: Any) -> dict[str, Any]:
    """Prefix-cache figures of a run: cached prompt tokens / prompt tokens prefilled (admissions,
    a preempted request's again included), and the hashed blocks evicted."""
    query = sum(r.prefix_query_tokens for r in replicas)
    hit = sum(r.prefix_hit_tokens for r in replicas)
    return {"prefix_cache_hit_rate": hit / query if query else 0.0, "prefix_cache_hit_tokens": int(hit),
            "prefix_cache_evictions": int(sum(r.pool.evictions for r in replicas))}


def _simulate_one(sc: Scenario, trace: bool, iterations: str = "memory") -> SimResult:
    if sc.disaggregation is not None:
        return _simulate_disagg(sc, trace, iterations)
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
    req_df, it_df, totals = _run_engine(engine, table, [capacity] * sc.hardware.replicas, iterations)
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


def drafter_kv_transferred(decode: Scenario) -> bool:
    """Whether the decode pool's engine moves the drafter's KV of the prompt with the target's
    (EngineDef.drafter_kv_transferred; `ideal`: moved, as SGLang's PD mode does) or rebuilds it on
    the decode instance."""
    d = decode.drafter
    if d is None or decode.engine.kind == "ideal":
        return True
    return engine_for(decode.engine.kind, decode.engine.version).drafter_kv_transferred(d)


def _pool_capacity(dep: Deployment, longest: int, bs: int, pool: str) -> int:
    if blocks_for(longest, bs) > dep.capacity_blocks:
        raise SpecsightInputError(f"disaggregation.{pool} (KV capacity, blocks of {bs} tokens)", dep.capacity_blocks,
                                  f"room for the longest request's {longest} tokens there; add memory or TP")
    return dep.capacity_blocks


def _simulate_disagg(sc: Scenario, trace: bool, iterations: str) -> SimResult:
    """A disaggregated deployment (serving/disagg.py): the prefill pool's instances, then the
    decode pool's, each a scenario of its own (disagg_spec.pool_source), one request table."""
    sc = with_engine_defaults(sc)
    raw = sc.disaggregation
    assert raw is not None
    psc = with_engine_defaults(load_scenario(pool_source(sc.source, "prefill")))
    dsc = with_engine_defaults(load_scenario(pool_source(sc.source, "decode")))
    ss = np.random.SeedSequence(sc.seed).spawn(4)
    reqs = generate_requests(sc.workload, np.random.default_rng(ss[SEED_WORKLOAD]))
    n = len(reqs)
    k_max, k_held = dsc.k_max, memory_k_max(dsc)
    lengths = reqs.prompt_len + reqs.output_len
    dep_p = resolve_deployment(psc, mean_tokens=float(reqs.prompt_len.mean()))
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
    req_df, it_df, totals = _run_engine(engine, table, [cap_p] * P + [cap_d] * D, iterations)
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
    summary["pools"] = pool_summaries(engine, req_df, (psc, dsc), (tp_p, tp_d))
    summary["mean_batch"] = summary["pools"][1]["mean_batch"]      # the decode pool's: the batch speculation sees
    return SimResult(sc, req_df, it_df, summary, dep_d.kv, None, trace_list)


def pool_summaries(engine: DisaggEngine | PhasedDisagg, req: Any, scs: tuple[Scenario, Scenario],
                   tps: tuple[int, int]) -> list[dict[str, Any]]:
    """One entry per pool: its instances, GPUs, mean batch (prefill: prompts per iteration; decode:
    sequences per decode round, compiled rounds included), and its latency: prefill TTFT (arrival
    to the prompt computed, before the transfer), decode TPOT."""
    P = len(engine.prefill)
    arrival = req["arrival_s"].to_numpy()
    first, finish = req["first_token_s"].to_numpy(), req["finish_s"].to_numpy()
    out_tok = req["output_tokens"].to_numpy()
    pf = engine.prefill_done_s - arrival
    moved = out_tok > 1
    tpot = (finish - first)[moved] / (out_tok[moved] - 1)
    pools = []
    spans = (("prefill", 0, P, scs[0], tps[0]), ("decode", P, len(engine.replicas), scs[1], tps[1]))
    for name, lo, hi, sc_, tp in spans:
        reps = engine.replicas[lo:hi]
        if name == "prefill":        # prompts per iteration
            iters = sum(r.iterations for r in reps)
            batch = sum(r.batch_sum for r in reps) / iters if iters else 0.0
        else:                        # decode sequences per decode round: (sequence, round) pairs / rounds
            rounds = sum(r.rounds_cum for r in reps)
            batch = float(req["rounds"].sum()) / rounds if rounds else 0.0
        entry: dict[str, Any] = {"pool": name, "instances": hi - lo, "tp": tp, "gpus": (hi - lo) * tp,
                                 "gpu": sc_.hardware.gpu, "mean_batch": batch}
        if name == "prefill":
            ok = pf[~np.isnan(pf)] * 1e3
            entry.update({"ttft_ms_p50": float(np.percentile(ok, 50)) if ok.size else None,
                          "ttft_ms_p99": float(np.percentile(ok, 99)) if ok.size else None})
        else:
            entry.update({"tpot_ms_p50": float(np.percentile(tpot, 50)) * 1e3 if tpot.size else None,
                          "tpot_ms_p99": float(np.percentile(tpot, 99)) * 1e3 if tpot.size else None})
        pools.append(entry)
    return pools
