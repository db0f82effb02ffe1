"""A prediction's spread from the ranges of the constants it is priced with (simulator/engines/sourced.py).

Each constant is re-priced at each end of its range, one at a time, the others held at their
values: the plain step and the round (EngineStepCost.round_terms, at the batch, K and mean context
of the prediction) are priced again, and the figure moves by
    speedup         d ln(plain) - d ln(round)       (AL x plain / round; AL does not move)
    tokens_per_s    -d ln(plain)                     (1 / plain step)
    tpot            d ln(round)                      (round / AL)
A constant's move up (down) is the larger log rise (fall) of the figure over its two ends (0 if
neither end moves it that way). The moves combine by root-sum-of-squares, for each side apart:
    u_up = sqrt(sum_i up_i^2),   u_down = sqrt(sum_i down_i^2)
the GUM's law of propagation for uncorrelated inputs (JCGM 100:2008, §5.1.2), each constant's
sensitivity taken by finite difference over its range rather than by a derivative. The range's
ends are read as the edges of the constant's 80 % band (the spread its source allows): u is the
80 % half-width in log space the constants give, on each side.

Re-pricing a term: the terms that are a count times the constant (launch_tails, plans, syncs) are
exact; node_floor, moe_fixed and the all-reduce scale with their constant inside the passes, taken
to first order (the pass's roofline max is held); the draft floor, H(B)'s base and the curve's
size reading are priced again through the step cost (draft_s_at_floor, HostModel.exposed_s,
allreduce_pass_s). `ideal` and the fixed step costs: no engine constants, no spread.

`leave_out` (publication ids, intervals.publication_ids): the constants whose source names one of
them are left out of the spread, so that a published row's spread never uses a constant of its own
publication (`Spread.left_out` names them: the row's prediction was priced with them).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simulator.engines.sourced import SourcedConstant, measured_ranges, sourced_for
from simulator.engines.step_cost import EngineStepCost

FIGURES = ("speedup", "tokens_per_s", "tpot")
LINEAR = ("node_floor", "launch_tails", "plans", "syncs", "moe_fixed", "allreduce")


@dataclass(frozen=True)
class Spread:
    """The log half-widths a figure's constants give it, down and up, and each constant's moves
    (name, log move at its low end, at its high end)."""
    down: float = 0.0
    up: float = 0.0
    moves: tuple[tuple[str, float, float], ...] = ()
    left_out: tuple[str, ...] = ()       # constants that price the figure but share a left-out publication

    @property
    def pair(self) -> list[float]:
        """[down, up], as the intervals take a spread."""
        return [self.down, self.up]


NONE = Spread()


def constants_for(cost: Any, method: str | None) -> tuple[SourcedConstant, ...]:
    """The constants that price this step cost: a measured host's spread where the engine's host
    was measured on this device class, else the declared ranges of its engine version on a GPU."""
    if not isinstance(cost, EngineStepCost):
        return ()
    if cost.measured is not None:
        name = cost.engine.measured_host_name(cost.device)
        return measured_ranges(name, method) if name else ()
    return sourced_for(cost.engine.name, cost.engine.version) if cost.device.graphs else ()


def _target_tokens(cost: EngineStepCost, batch: int, k: int) -> int:
    p = cost.plain_pass(batch) if k == 0 else next(
        q for q in cost.round_passes(batch, k) if q.model == "target")
    return p.padded_tokens or p.tokens


def repriced_total(cost: EngineStepCost, terms: Mapping[str, float], c: SourcedConstant, x: float, batch: int,
                   k: int, mean_context: float) -> float:
    """The round (k > 0) or plain step (k = 0) of round_terms `terms` with constant `c` at `x`."""
    total, t = terms["total"], c.term
    spec = cost.spec if k else None
    if t in LINEAR:
        return total + (x / c.value - 1.0) * terms[t] if c.value else total
    if t == "allreduce_reading":
        if not hasattr(cost.cm, "allreduce_pass_s"):
            return total
        return total - terms["allreduce"] + cost.cm.allreduce_pass_s(_target_tokens(cost, batch, k), x)
    if t == "draft_floor":
        if not k:
            return total
        ctx = batch * mean_context
        return total + cost.draft_s_at_floor(batch, k, ctx, x) - cost.draft_s(batch, k, ctx)
    if t in ("host", "host_fraction"):
        hm = cost.engine.host_model(spec)
        hm = (dataclasses.replace(hm, base_s=max(hm.base_s + x - c.value, 0.0)) if t == "host"
              else dataclasses.replace(hm, gpu_fraction=x))
        return total - terms["host"] + hm.exposed_s(batch, terms["passes"], cost.engine.overlap(spec), 0)
    if t == "measured_iteration":
        return total + (x - c.value) * (1.0 if c.name.endswith("a_s") else batch)
    if t == "measured_proposer":
        return total + (x - c.value) if k else total
    raise ValueError(f"{c.name}: no re-pricing for term {t}")


def _check_point(batch: float, k: int, mean_context: float) -> None:
    """A spread is taken at a finite positive batch, a K of 0 or more and a finite mean context of
    0 or more: elsewhere a move is NaN, which max(0, ...) would drop as a zero widening."""
    if not (math.isfinite(batch) and batch > 0):
        raise ValueError(f"batch {batch}: a spread is taken at a finite batch above 0")
    if k < 0:
        raise ValueError(f"k {k}: a spread is taken at K = 0 (plain decoding) or more")
    if not (math.isfinite(mean_context) and mean_context >= 0):
        raise ValueError(f"mean_context {mean_context}: a spread is taken at a finite mean context of 0 or more")


def _move(figure: str, plain: float, plain_x: float, rnd: float, rnd_x: float) -> float:
    if not (plain_x > 0 and (rnd_x > 0 or not rnd)):
        return math.nan                      # a step priced at or below 0: refused by spread()
    dp, dr = math.log(plain_x / plain), math.log(rnd_x / rnd) if rnd else 0.0
    return {"speedup": dp - dr, "tokens_per_s": -dp, "tpot": dr}[figure]


def spread(cost: Any, figure: str, batch: int, k: int, mean_context: float, method: str | None = None,
           leave_out: frozenset[str] = frozenset()) -> Spread:
    """The figure's spread at `batch` sequences, K = k (0: plain decoding) and `mean_context`,
    without the constants of the publications `leave_out` (module docstring); NONE where the step
    cost has no engine constants."""
    from .intervals import publication_ids
    if figure not in FIGURES:
        raise ValueError(f"figure {figure!r} not one of {FIGURES}")
    every = constants_for(cost, method)
    consts = tuple(c for c in every if not (publication_ids(c.source) & leave_out))
    dropped = tuple(c.name for c in every if c not in consts)
    if not consts:
        return Spread(left_out=dropped) if dropped else NONE
    _check_point(batch, k, mean_context)
    batch = max(int(round(batch)), 1)
    plain = cost.round_terms(batch, 0, mean_context, 1)
    rnd = cost.round_terms(batch, k, mean_context, cost.drafter.verify_tokens_per_seq(k)) if k else None
    moves, ups, downs = [], [], []
    for c in consts:
        ends = []
        for x in (c.low, c.high):
            p_x = repriced_total(cost, plain, c, x, batch, 0, mean_context)
            r_x = repriced_total(cost, rnd, c, x, batch, k, mean_context) if rnd else 0.0
            ends.append(_move(figure, plain["total"], p_x, rnd["total"] if rnd else 0.0, r_x))
        if not all(map(math.isfinite, ends)):
            raise ValueError(f"{c.name}: the {figure} moves {ends[0]}, {ends[1]} at its range's ends are not finite "
                             f"(batch {batch}, K {k}, mean context {mean_context})")
        moves.append((c.name, ends[0], ends[1]))
        ups.append(max(0.0, *ends))
        downs.append(max(0.0, *(-e for e in ends)))
    return Spread(math.sqrt(sum(d * d for d in downs)), math.sqrt(sum(u * u for u in ups)), tuple(moves), dropped)


@dataclass(frozen=True)
class PricedScenario:
    """A scenario's engine step cost with what a spread is taken at: its mean context (mean prompt
    plus half the mean output), its K (k_max), its batch (the closed loop's users, else
    max_num_seqs) and its drafter method."""
    cost: Any
    mean_context: float
    k: int
    batch: float
    method: str | None

    def spread(self, figure: str = "speedup", batch: float | None = None, k: int | None = None,
               leave_out: frozenset[str] = frozenset()) -> Spread:
        """The figure's spread at `batch` and `k` (None: the scenario's own), without the
        constants of the publications `leave_out`; plain decoding's tokens/s at K = 0. A batch that
        is given must be finite and above 0 (ValueError): None, not NaN, asks for the scenario's own."""
        kk = 0 if figure == "tokens_per_s" else (self.k if k is None else int(k))
        if figure != "tokens_per_s" and kk <= 0:
            return NONE
        if batch is not None and not (math.isfinite(float(batch)) and float(batch) > 0):
            raise ValueError(f"batch {batch}: a spread is taken at a finite batch above 0 (None: the scenario's own)")
        b = self.batch if batch is None else float(batch)
        return spread(self.cost, figure, int(round(b)), kk, self.mean_context, self.method, leave_out)


def priced_scenario(scenario: Any) -> PricedScenario | None:
    """A Scenario (or its mapping) priced under its engine; None under ideal, for fixed step costs,
    or for a scenario its engine refuses."""
    from simulator.common.errors import SpecsightInputError
    from simulator.scenario.engine_defaults import with_engine_defaults
    from simulator.scenario.resolve import resolve_deployment
    from simulator.scenario.scenario import Scenario, load_scenario
    try:
        sc = scenario if isinstance(scenario, Scenario) else load_scenario(dict(scenario))
        if sc.engine.kind in (None, "ideal"):
            return None
        sc = with_engine_defaults(sc)
        cost = resolve_deployment(sc).step_cost
    except SpecsightInputError:
        return None
    if not isinstance(cost, EngineStepCost):
        return None
    w = sc.workload
    lengths = [d.mean_estimate if d is not None else 0.0 for d in (w.prompt_len, w.output_len)]
    batch = float(w.concurrency) if w.concurrency else float(sc.engine.max_num_seqs)
    return PricedScenario(cost, float(lengths[0]) + 0.5 * float(lengths[1]), sc.k_max, batch,
                          sc.drafter.method if sc.drafter is not None else None)


def scenario_spread(scenario: Any, figure: str = "speedup", batch: float | None = None, k: int | None = None,
                    leave_out: frozenset[str] = frozenset()) -> Spread:
    """A scenario's (a Scenario or its mapping) spread: PricedScenario.spread at `batch` and `k`
    (None: its own), without the constants of `leave_out`; NONE under ideal, for fixed step costs
    or where its engine refuses it (`.pair`: [down, up])."""
    p = priced_scenario(scenario)
    return NONE if p is None else p.spread(figure, batch, k, leave_out)
