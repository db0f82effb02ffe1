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
from .host import eager_pass_s
from .round import EngineDef, EngineLimits, Pass


def engine_profile(profile: HardwareProfile) -> HardwareProfile:
    """The profile with its host terms zeroed (the engine supplies them); the GPU side unchanged."""
    ov = dataclasses.replace(profile.overheads, kernel_launch_us=0.0, iteration_us=0.0, verify_round_us=None)
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
                 k_max: int):
        self.engine, self.lim, self.cm, self.drafter = engine, limits, cost_model, drafter
        if drafter is not None:
            engine.check_structure(drafter.structure, drafter.spec.model)
        self.spec = drafter.spec if drafter is not None else None
        self.k_max = int(k_max)
        self.uses_catchup = drafter is not None and drafter.uses_gpu
        self.attention_rows = cost_model.attention_rows
        self._kernels = {"target": kernels(cost_model)}
        if drafter is not None and drafter.draft_cost is not None:
            self._kernels["draft"] = kernels(drafter.draft_cost)
        self._attn = engine.attention_class(self.spec) if self.spec is not None else "decode"

    # ---- passes ------------------------------------------------------------------------------
    def _model(self, which: str):
        return self.cm if which == "target" else self.drafter.draft_cost

    def pass_s(self, p: Pass, sum_context: float, first_tokens: float | None = None) -> float:
        """Seconds for `p` (all `count` repeats; step j of a repeated draft pass reads B j more
        cached tokens); first_tokens: a first draft pass's tokens when catch-up exceeds its shape."""
        B = p.seqs
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
            launched = self._graph_launches(p, cm) if graphed else self._kernels[p.model]
            t += eager_pass_s(gpu, launched + p.eager_launches)
        return t

    @staticmethod
    def _graph_launches(p: Pass, cm: CostModel) -> int:
        """Kernels a graphed pass still launches eagerly: a PIECEWISE graph's attention, one per
        layer between the captured pieces; none for a FULL (or whole-round) graph."""
        return cm.model.num_layers if p.graph == "piecewise" else 0

    def round_passes(self, B: int, k: int) -> list[Pass]:
        width = self.drafter.verify_tokens_per_seq(k)
        return self.engine.passes(self.spec, B, k, width, self.lim)

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
                return self.pass_s(self.engine.plain_pass(B, self.lim), context)
            k = self._k_of_width(w)
            if k is not None:
                verify = next(p for p in self.round_passes(B, k) if p.name == "verify")
                return self.pass_s(verify, context)
        padded = self.engine.mixed_graph(int(tokens), self.lim)
        gpu = self.cm.time_s(padded if padded is not None and padded >= tokens else tokens, context, pairs, logits,
                             num_seqs)
        return gpu if padded is not None else eager_pass_s(gpu, self._kernels["target"])

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
        if self.spec.is_lookup:
            return float(self.drafter.propose_time_s(num_seqs, k, context))
        drafts = [p for p in self.round_passes(int(num_seqs), k) if p.model == "draft"]
        # the pass that ingests the tokens the last round emitted takes any larger catch-up
        # (vLLM / TensorRT-LLM: draft 1 over the window; SGLang: the draft extend; V0: step 1)
        ingest = next((p for p in drafts if p.name in INGESTING_PASSES), drafts[0] if drafts else None)
        return sum(self.pass_s(p, context, catchup if p is ingest else None) for p in drafts)

    def host_s(self, num_seqs: int, k: int, prefill_tokens: int, gpu_s: float) -> float:
        """Host seconds the iteration adds: the engine's scheduler time H(B) (hidden behind the
        GPU where the engine overlaps it), plus a launch latency per host sync of the round."""
        spec = self.spec if (k and num_seqs) else None
        eng = self.engine
        seqs = num_seqs + (1 if prefill_tokens else 0)
        syncs = eng.syncs(spec) if spec is not None else 0
        return eng.host_model(spec).exposed_s(seqs, gpu_s, eng.overlap(spec), syncs)

    def round_time_s(self, batch: int, k: int, mean_context: float, width: int) -> float:
        """One decode round of `batch` sequences at `mean_context`, host included (policies)."""
        c = batch * mean_context
        t = self.target_s(batch * width, c, batch * causal_pairs(width, mean_context), batch * width, batch)
        if k > 0 and self.drafter is not None:
            t += self.draft_s(batch, k, c)
        return float(t) + self.host_s(batch, k, 0, float(t))
