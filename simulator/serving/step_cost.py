"""What one iteration costs the replica: the target pass, the drafter's proposal, host overheads.

Each step cost exposes
    target_s(tokens, context, pairs, logits, num_seqs)   one fused target pass (seconds)
    draft_s(num_seqs, k, context, catchup)              the drafter's K proposal steps
    attention_rows(decode_seqs, prefill_tokens)         target_s's num_seqs for a mixed pass
    overhead_s, spec_overhead_s                         host time per iteration (K = 0, K > 0)
    round_time_s(batch, k, mean_context, width)         one decode round on its own (policies)
and the replica calls them once per iteration with Python numbers.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..costs.pass_shape import causal_pairs

if TYPE_CHECKING:
    from ..costs.cost_model import CostModel
    from ..speculation.drafters import Drafter


class FixedStepCost:
    """`hardware.kind: fixed`: every iteration's target pass costs target_step_s whatever it holds
    (decode, prefill chunks or both) and a speculative round adds K x draft_step_s."""
    uses_catchup = False

    def __init__(self, target_step_s: float, draft_step_s: float):
        self.target_step_s = float(target_step_s)
        self.draft_step_s = float(draft_step_s)
        self.overhead_s = self.spec_overhead_s = 0.0

    def target_s(self, tokens: float, context: float, pairs: float, logits: float,
                 num_seqs: int | None = None) -> float:
        return self.target_step_s

    def draft_s(self, num_seqs: int, k: int, context: float, catchup: float | None) -> float:
        return k * self.draft_step_s

    def attention_rows(self, decode_seqs: int, prefill_tokens: int = 0) -> int:
        return decode_seqs

    def round_time_s(self, batch: int, k: int, mean_context: float, width: int) -> float:
        return self.target_step_s + k * self.draft_step_s


class RooflineStepCost:
    """The roofline cost model (CostModel.time_s) for the target pass and the drafter's
    proposal cost (Drafter.propose_time_s)."""

    def __init__(self, cost_model: CostModel, drafter: Drafter | None):
        self.cm, self.drafter = cost_model, drafter
        self.overhead_s = float(cost_model.round_overhead_s(0))
        self.spec_overhead_s = float(cost_model.round_overhead_s(1))     # + the verification step
        self.uses_catchup = drafter is not None and drafter.uses_gpu
        self.target_s = cost_model.time_s                 # bound methods: no wrapper in the loop
        self.draft_s = drafter.propose_time_s if drafter is not None else (lambda b, k, c, u: 0.0)
        self.attention_rows = cost_model.attention_rows

    def round_time_s(self, batch: int, k: int, mean_context: float, width: int) -> float:
        """One round of `batch` sequences at `mean_context` (for the goodput policy)."""
        c = batch * mean_context
        t = self.target_s(batch * width, c, batch * causal_pairs(width, mean_context), batch * width,
                          batch)
        if k > 0 and self.drafter is not None:
            t += self.drafter.propose_time_s(batch, k, c)
        return float(t) + (self.spec_overhead_s if k > 0 else self.overhead_s)
