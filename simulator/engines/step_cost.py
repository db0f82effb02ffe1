"""`EngineStepCost`: what one iteration costs under a real engine, through the interface the
replica reads from RooflineStepCost (simulator/serving/step_cost.py): target_s, draft_s, attention_rows,
overhead_s / spec_overhead_s, round_time_s; plus `host_s`, the engine's host time for the
iteration, which the engine replica (engines/replica.py) adds to the passes' time.

A pass's GPU time is the cost model's (TiledCostModel: linear layers with tile and wave
quantization) at the tokens the engine computes: a graphed pass at its padded size; an eager pass
at its own size; either no less than the launch time of the kernels the host launches for it
(host.eager_pass_s): an eager pass's own kernels, a PIECEWISE graph's attention per layer, and the
small ops an engine launches eagerly around a pass (Pass.eager_launches: vLLM's propose loop). The profile's generic
host terms (per-iteration overhead, kernel launch, the verification step's fixed time) are set to
zero in the cost models (`engine_profile`): the engine's host model replaces them.
"""
from __future__ import annotations

import dataclasses
import math

from ..costs.cost_model import KERNELS_FIXED, KERNELS_PER_LAYER, KERNELS_PER_LAYER_TP, PREFILL_QUERY_TILE, CostModel
from ..costs.pass_shape import causal_pairs
from ..hardware.hardware import HardwareProfile
from ..speculation.drafter_structure import MLP_KERNELS_PER_STAGE
from ..speculation.drafters import Drafter
from .device import GPU, DeviceClass
from .host import GRAPH_NODE_GPU_S, GRAPH_NODE_HOST_S, eager_pass_s
from .measured_host import MeasuredHost
from .round import EngineDef, EngineLimits, Pass


def engine_profile(profile: HardwareProfile, device: DeviceClass = GPU) -> HardwareProfile:
    """The profile with its host terms zeroed (the engine supplies them); the GPU side unchanged.
    On a device with serial launches (a CPU) the measured per-kernel dispatch time stays: each pass
    pays it inside the cost model's pass time, as eager torch does; the profile's sampling time per
    logit row (specsight's own sampler) goes, as the engine's sampler is in its measured host time."""
    o = profile.overheads
    if device.serial_launches:
        ov = dataclasses.replace(o, iteration_us=0.0, verify_round_us=None, sampling_row_us=None)
    else:
        ov = dataclasses.replace(o, kernel_launch_us=0.0, iteration_us=0.0, verify_round_us=None)
    return dataclasses.replace(profile, overheads=ov)


def kernels(cm: CostModel) -> int:
    """Kernels one eager pass launches (the cost model's count)."""
    return cm.model.num_layers * (KERNELS_PER_LAYER + (KERNELS_PER_LAYER_TP if cm.tp > 1 else 0)) + KERNELS_FIXED


def attention_pairs(kind: str, n: int, B: int, sum_context: float, query_group: int) -> float:
    """Query-key pairs the verify attention computes for B sequences of n new tokens each over
    sum_context cached tokens, by kernel class: decode (causal, the cost model's pairs); prefill
    (each sequence's n g query rows padded to the 64-row query tile); prefill_tree (the same, with
    the n x n block of the new tokens computed in full under the tree mask). n = 1: decode."""
    pairs = causal_pairs(B * n, sum_context, B)
    if n <= 1 or kind == "decode":
        return pairs
    if kind == "prefill_tree":
        pairs = B * n * (sum_context / B + n)
    rows = n * query_group
    return pairs * (math.ceil(rows / PREFILL_QUERY_TILE) * PREFILL_QUERY_TILE / rows)


INGESTING_PASSES = ("draft_1", "draft_extend")


class EngineStepCost:
    """A real engine's iteration cost (the replica's step-cost interface)."""
    overhead_s = spec_overhead_s = 0.0        # the engine's host time comes from host_s

    def __init__(self, engine: EngineDef, limits: EngineLimits, cost_model: CostModel, drafter: Drafter | None,
                 k_max: int, device: DeviceClass = GPU, measured: MeasuredHost | None = None):
        self.engine, self.lim, self.cm, self.drafter = engine, limits, cost_model, drafter
        self.device, self.measured = device, measured
        # a kernel dispatched eagerly around a pass, added serially on a one-processor device
        self._dispatch_s = cost_model.hw.overheads.kernel_launch_us * 1e-6 if device.serial_launches else 0.0
        if drafter is not None:
            engine.check_structure(drafter.structure, drafter.spec.model)
        self.spec = drafter.spec if drafter is not None else None
        self.k_max = int(k_max)
        self.uses_catchup = drafter is not None and drafter.uses_gpu
        # the drafter's pass over a prompt runs in the prefill step (EngineDef.drafts_in_prefill)
        self.drafts_in_prefill = self.uses_catchup and engine.drafts_in_prefill
        self.attention_rows = cost_model.attention_rows
        self._kernels = {"target": kernels(cost_model)}
        if drafter is not None and drafter.draft_cost is not None:
            self._kernels["draft"] = kernels(drafter.draft_cost)
        self._attn = engine.attention_class(self.spec) if self.spec is not None else "decode"
        self._floor_s = engine.draft_step_floor_s(self.spec) if self.spec is not None and device.graphs else 0.0
        self._round_host: dict = {}
        # the passes of a plain step and of a round by batch (and K): fixed for this engine, limits
        # and drafter, and asked for at every iteration
        self._plain: dict[int, Pass] = {}
        self._rounds: dict[tuple[int, int], tuple[Pass, ...]] = {}

    # ---- passes ------------------------------------------------------------------------------
    def _model(self, which: str):
        return self.cm if which == "target" else self.drafter.draft_cost

    def pass_s(self, p: Pass, sum_context: float, first_tokens: float | None = None) -> float:
        """Seconds for `p` (all `count` repeats; step j of a repeated draft pass reads B j more
        cached tokens); first_tokens: a first draft pass's tokens when catch-up exceeds its shape."""
        B = p.seqs
        if not self.device.graphs:
            return self._serial_pass_s(p, sum_context, first_tokens)
        if p.model == "draft" and self.drafter.mlp is not None:     # MLP stages: no attention, launched eagerly
            return float(sum(eager_pass_s(self.drafter.mlp.step_time_s(self.cm, j, B), MLP_KERNELS_PER_STAGE)
                             for j in range(p.count)))
        cm = self._model(p.model)
        t = 0.0
        for j in range(p.count):
            n = p.tokens_per_seq
            tokens = p.tokens if first_tokens is None or j else max(p.tokens, first_tokens)
            ctx = sum_context + B * j
            if p.model == "target":
                pairs = attention_pairs(self._attn, n, B, ctx, cm.query_group)
            else:
                pairs = causal_pairs(tokens, ctx, B)
            graphed = p.graph != "eager" and p.padded_tokens is not None and p.padded_tokens >= tokens
            gpu = cm.time_s(p.padded_tokens if graphed else tokens, ctx, pairs, B * p.logits_per_seq, B)
            if graphed:       # each captured kernel's least time on the GPU (host.GRAPH_NODE_GPU_S)
                gpu += self._kernels[p.model] * GRAPH_NODE_GPU_S
            launched = self._graph_launches(p, cm) if graphed else self._kernels[p.model]
            step = eager_pass_s(gpu, launched + p.eager_launches)
            t += max(step, self._floor_s) if p.model == "draft" else step
        return t

    def _serial_pass_s(self, p: Pass, sum_context: float, first_tokens: float | None) -> float:
        """A pass on a one-processor device: eager at its own size, the cost model's time (its
        kernels' dispatch included) plus the dispatch of the ops launched around it, in series."""
        B, cm, t = p.seqs, self._model(p.model), 0.0
        for j in range(p.count):
            tokens = p.tokens if first_tokens is None or j else max(p.tokens, first_tokens)
            ctx = sum_context + B * j
            if p.model == "target":
                pairs = attention_pairs(self._attn, p.tokens_per_seq, B, ctx, cm.query_group)
            else:
                pairs = causal_pairs(tokens, ctx, B)
            t += cm.time_s(tokens, ctx, pairs, B * p.logits_per_seq, B) + p.eager_launches * self._dispatch_s
        return t

    @staticmethod
    def _graph_launches(p: Pass, cm: CostModel) -> int:
        """Kernels a graphed pass still launches eagerly: a PIECEWISE graph's attention, one per
        layer between the captured pieces; none for a FULL (or whole-round) graph."""
        return cm.model.num_layers if p.graph == "piecewise" else 0

    def plain_pass(self, B: int) -> Pass:
        p = self._plain.get(B)
        if p is None:
            p = self._plain[B] = self.engine.plain_pass(B, self.lim)
        return p

    def round_passes(self, B: int, k: int) -> tuple[Pass, ...]:
        passes = self._rounds.get((B, k))
        if passes is None:
            width = self.drafter.verify_tokens_per_seq(k)
            passes = self._rounds[B, k] = tuple(self.engine.passes(self.spec, B, k, width, self.lim))
        return passes

    # ---- the replica's interface ---------------------------------------------------------------
    def target_s(self, tokens: float, context: float, pairs: float, logits: float,
                 num_seqs: int | None = None) -> float:
        """The target pass of an iteration: a uniform decode/verify batch (tokens = B w) on the
        engine's graphs and verify attention class; a pass with prefill chunks (or ragged widths)
        on the engine's mixed-batch graph, else eager."""
        B = int(num_seqs or 0)
        if B and logits == tokens and tokens % B == 0:          # decode sequences only
            w = int(tokens) // B
            if w == 1:
                return self.pass_s(self.plain_pass(B), context)
            k = self._k_of_width(w)
            if k is not None:
                verify = next(p for p in self.round_passes(B, k) if p.name == "verify")
                return self.pass_s(verify, context)
        if not self.device.graphs:
            return self.cm.time_s(tokens, context, pairs, logits, num_seqs)
        padded = self.engine.mixed_graph(int(tokens), self.lim)
        gpu = self.cm.time_s(padded if padded is not None and padded >= tokens else tokens, context, pairs, logits,
                             num_seqs)
        if padded is not None:
            return gpu + self._kernels["target"] * GRAPH_NODE_GPU_S
        return eager_pass_s(gpu, self._kernels["target"])

    def _k_of_width(self, w: int) -> int | None:
        for k in range(1, self.k_max + 1):
            if self.drafter.verify_tokens_per_seq(k) == w:
                return k
        return None

    def draft_s(self, num_seqs: int, k: int, context: float, catchup: float | None = None) -> float:
        """The drafter's passes of one round (every pass the engine runs on the draft model), or
        a lookup drafter's host time."""
        if k <= 0:
            return 0.0
        if self.spec.is_lookup:      # a measured proposer's host time is in host_s instead
            return 0.0 if self.measured is not None else float(self.drafter.propose_time_s(num_seqs, k, context))
        drafts = [p for p in self.round_passes(int(num_seqs), k) if p.model == "draft"]
        # the pass that ingests the tokens the last round emitted takes any larger catch-up
        # (vLLM / TensorRT-LLM: draft 1 over the window; SGLang: the draft extend; V0: step 1)
        ingest = next((p for p in drafts if p.name in INGESTING_PASSES), drafts[0] if drafts else None)
        return sum(self.pass_s(p, context, catchup if p is ingest else None) for p in drafts)

    def prefill_draft_s(self, decode_seqs: int, k: int, decode_context: float, decode_catchup: float,
                        prefill_seqs: int, prefill_tokens: int, prefill_context: float) -> float:
        """What an iteration holding prefill chunks adds to its drafter's time where the drafter runs
        in the prefill step (drafts_in_prefill): one propose of k over every sequence of the step,
        its first pass ingesting the decode sequences' catch-up and the chunks' tokens, less the
        decode sequences' own propose (draft_s, already in the iteration)."""
        if not (self.drafts_in_prefill and prefill_tokens and k > 0):
            return 0.0
        both = self.draft_s(decode_seqs + prefill_seqs, k, decode_context + prefill_context,
                            decode_catchup + prefill_tokens)
        return both - (self.draft_s(decode_seqs, k, decode_context, decode_catchup) if decode_seqs else 0.0)

    def draft_s_at_floor(self, num_seqs: int, k: int, context: float, floor_s: float) -> float:
        """draft_s with the draft step's host-bound floor at `floor_s` in place of the engine's
        (0: the GPU time alone; the intervals re-price a round at the ends of the floor's range)."""
        kept, self._floor_s = self._floor_s, float(floor_s)
        try:
            return self.draft_s(num_seqs, k, context)
        finally:
            self._floor_s = kept

    def host_s(self, num_seqs: int, k: int, prefill_tokens: int, gpu_s: float) -> float:
        """Host seconds the iteration adds: the engine's scheduler time H(B) (hidden behind the
        GPU where the engine overlaps it), plus a launch latency per host sync of the round."""
        spec = self.spec if (k and num_seqs) else None
        eng = self.engine
        seqs = num_seqs + (1 if prefill_tokens else 0)
        if self.measured is not None:      # measured on this device class: all of it shows, in series
            h = self.measured.iteration_s(seqs)
            return h if spec is None else h + self.measured.proposer(spec.method).time_s(num_seqs, k)
        syncs = eng.syncs(spec) if spec is not None else 0
        shown = eng.host_model(spec).exposed_s(seqs, gpu_s, eng.overlap(spec), syncs)
        return shown if spec is None else shown + self.round_host_s(num_seqs, k)

    def round_host_s(self, num_seqs: int, k: int) -> float:
        """Host time a speculative round shows in series beyond H(B) and its syncs: the launch of
        each graph the host reaches only after a sync (its nodes x GRAPH_NODE_HOST_S; a graph
        holding repeated passes has all their nodes) and the attention plans it builds (plan_s each)."""
        key = (num_seqs, k)
        t = self._round_host.get(key)
        if t is None:
            eng, waits = self.engine, self.engine.launch_waits(self.spec)
            nodes = sum(self._kernels[p.model] * p.count for p in self.round_passes(num_seqs, k)
                        if p.name in waits and p.graph != "eager") if waits and self.device.graphs else 0
            t = nodes * GRAPH_NODE_HOST_S + eng.host_plans(self.spec, k) * eng.plan_s
            self._round_host[key] = t
        return t

    def round_terms(self, batch: int, k: int, mean_context: float, width: int) -> dict[str, float]:
        """One round (k > 0) or plain step (k = 0) of `batch` sequences split into the terms that
        price it, in seconds: `passes` (GPU time with every floor and collective in it), and, inside
        or beside it, the parts the sourced terms add: `node_floor` (GRAPH_NODE_GPU_S a captured
        kernel), `allreduce` (the measured curve's, target passes), `moe_fixed` (the fused MoE's fixed
        time, kernel_floors.py), `draft_floor` (a draft step's
        host-bound floor beyond its GPU time), `host` (H(B) as shown), `syncs`, `launch_tails` and
        `plans` (round_host_s's two parts). total = passes + host + syncs + launch_tails + plans."""
        c = batch * mean_context
        spec = self.spec if k else None
        if spec is None:
            passes = [self.plain_pass(batch)]
            t = self.target_s(batch, c, batch * causal_pairs(1, mean_context), batch, batch)
        else:
            passes = self.round_passes(batch, k)
            t = self.target_s(batch * width, c, batch * causal_pairs(width, mean_context), batch * width, batch)
            t += self.draft_s(batch, k, c)
        graphed = [p for p in passes if p.graph != "eager" and p.padded_tokens is not None]
        node = sum(self._kernels[p.model] * p.count for p in graphed) * GRAPH_NODE_GPU_S if self.device.graphs else 0.0
        tgt = next(p for p in passes if p.model == "target")
        ar = self.cm.allreduce_pass_s(tgt.padded_tokens or tgt.tokens) if hasattr(self.cm, "allreduce_pass_s") else 0.0
        floor = 0.0
        if spec is not None and self._floor_s:
            floor = self.draft_s(batch, k, c) - self.draft_s_at_floor(batch, k, c, 0.0)
        eng = self.engine
        syncs = eng.syncs(spec) * eng.host_model(spec).sync_s if spec is not None else 0.0
        host = self.host_s(batch, k, 0, float(t)) - syncs - (self.round_host_s(batch, k) if spec is not None else 0.0)
        plans = eng.host_plans(spec, k) * eng.plan_s if spec is not None else 0.0
        tails = self.round_host_s(batch, k) - plans if spec is not None else 0.0
        moe = sum(getattr(self._model(p.model), "_moe_fixed_s", 0.0) * p.count for p in passes)
        out = {"passes": float(t), "node_floor": node, "allreduce": ar, "moe_fixed": moe, "draft_floor": floor,
               "host": host,
               "syncs": syncs, "launch_tails": tails, "plans": plans}
        out["total"] = out["passes"] + host + syncs + tails + plans
        return out

    def round_time_s(self, batch: int, k: int, mean_context: float, width: int) -> float:
        """One decode round of `batch` sequences at `mean_context`, host included (policies)."""
        c = batch * mean_context
        t = self.target_s(batch * width, c, batch * causal_pairs(width, mean_context), batch * width, batch)
        if k > 0 and self.drafter is not None:
            t += self.draft_s(batch, k, c)
        return float(t) + self.host_s(batch, k, 0, float(t))
