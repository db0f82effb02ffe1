"""The explorer's scenario priced in closed form: step times of plain decoding and of a
speculative round at any batch, K and alpha, with no simulation (so a slider redraws at once).

Under `engine.kind: ideal` the times are simulator.speculation.analytic's (the cost model's
passes plus the profile's per-iteration overhead); under a real engine they are the engine's round
(`EngineStepCost.round_time_s`: its passes, CUDA-graph padding and host time), the same pricing
the simulator's replica uses for a uniform decode round. Context: the workload's mean prompt plus
half its mean output (studies.breakeven.analytic.Analytic, which also gives each K's i.i.d. alpha
for a preset or a measured trace).
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from simulator.common.errors import SpecsightInputError

from ..studies.breakeven.analytic import Analytic

K_AXIS = tuple(range(1, 9))          # the K curve's points (extended to the chosen K when larger)
K_MAX = 16                           # the K slider's largest value: every K up to it priced from one deployment
BATCHES = np.unique(np.round(np.geomspace(1, 1024, 41)))
ALPHAS = np.round(np.linspace(0.0, 0.95, 20), 4)


DEPLOYMENT_CACHE = 16                # deployments kept (a slider's values reuse one)
_deployments: dict[str, Any] = {}


def _deployment(source: Mapping[str, Any], kmax: int) -> tuple[Any, dict[tuple[float, int, float], float]]:
    """resolve_deployment of the scenario with K = kmax (every K up to it is priced from it),
    kept by what it depends on: hardware, model, drafter and engine (not acceptance, workload,
    SLO or policy, which a slider moves); with it, the engine round times priced so far by
    (batch, K, context), which do not depend on alpha."""
    from simulator.scenario.resolve import resolve_deployment
    from simulator.scenario.scenario import load_scenario

    wide = dict(source, drafter={**dict(source["drafter"]), "num_speculative_tokens": kmax})
    key = json.dumps({k: v for k, v in wide.items() if k not in ("acceptance", "workload", "slo", "policy", "name")},
                     sort_keys=True, default=str)
    if key not in _deployments:
        if len(_deployments) >= DEPLOYMENT_CACHE:
            _deployments.pop(next(iter(_deployments)))
        _deployments[key] = (resolve_deployment(load_scenario(wide)), {})
    return _deployments[key]


class Priced:
    """Closed-form step times of one scenario (a checked mapping with a drafter, on a GPU profile)."""

    def __init__(self, source: Mapping[str, Any]):
        if source.get("drafter") is None:
            raise SpecsightInputError("drafter", None, "the explorer needs a scenario with a drafter")
        k = int(source["drafter"].get("num_speculative_tokens", 1))
        dep, self._rounds = _deployment(source, max(K_MAX, k))
        self.model = Analytic(source, dep)           # refuses fixed hardware, by name
        sc = self.model.scenario
        self.scenario = sc
        self.k = sc.k_max
        self.engine = sc.engine.kind
        self.context = self.model.mean_context
        self.cm = self.model.cm
        self.drafter = self.model.drafter
        self.max_num_seqs = int(sc.engine.max_num_seqs or 256)
        self.step = None if self.engine == "ideal" else dep.step_cost

    # ---- acceptance -------------------------------------------------------------------------
    def alpha(self, k: int) -> float:
        """The i.i.d. alpha the analytic model takes at K (the scenario's own where it is i.i.d.)."""
        return self.model.alpha(k)

    def accepted_distribution(self) -> np.ndarray:
        """P(exactly a drafts accepted), a = 0..K, under the scenario's acceptance model at its K."""
        from simulator.speculation.spec_math import accept_length_distribution
        return accept_length_distribution(self.scenario.acceptance.alphas(self.k))

    def expected_tokens(self, k: int, alpha: float) -> float:
        from simulator.speculation.analytic import expected_tokens
        return float(expected_tokens(self.drafter, alpha, k))

    # ---- step times -------------------------------------------------------------------------
    def plain_s(self, batch: np.ndarray) -> np.ndarray:
        """[len(batch)] seconds of one plain decode step."""
        batch = np.asarray(batch, dtype=float)
        if self.step is None:
            from simulator.speculation.analytic import plain_step_time_s
            return np.asarray(plain_step_time_s(self.cm, batch, self.context), dtype=float)
        return self._engine_rounds(batch, 0)

    def spec_s(self, batch: np.ndarray, k: int, alpha: float) -> np.ndarray:
        """[len(batch)] seconds of one speculative round of K drafts."""
        batch = np.asarray(batch, dtype=float)
        if self.step is None:
            from simulator.speculation.analytic import spec_step_time_s
            return np.asarray(spec_step_time_s(self.cm, self.drafter, batch, self.context, k, alpha), dtype=float)
        return self._engine_rounds(batch, k)

    def spec_table(self, batch: np.ndarray, k: int, alphas: np.ndarray) -> np.ndarray:
        """[len(alphas), len(batch)] seconds of one speculative round of K drafts: spec_s at each
        alpha, by the same operations on arrays (tests/test_explore.py checks them equal)."""
        batch, alphas = np.asarray(batch, dtype=float), np.asarray(alphas, dtype=float)
        if self.step is not None:
            return np.broadcast_to(self._engine_rounds(batch, k), (len(alphas), len(batch))).copy()
        from simulator.speculation.analytic import spec_step_time_s
        t = spec_step_time_s(self.cm, self.drafter, batch[None, :], self.context, k, alphas[:, None])
        try:
            return np.broadcast_to(np.asarray(t, dtype=float), (len(alphas), len(batch))).copy()
        except ValueError:       # a drafter whose price does not broadcast over alpha
            return np.stack([self.spec_s(batch, k, float(a)) for a in alphas])

    def _engine_rounds(self, batch: np.ndarray, k: int) -> np.ndarray:
        """The engine's round time at each batch (kept with the deployment)."""
        w = self.drafter.verify_tokens_per_seq(k)
        out = np.empty(len(batch))
        for i, b in enumerate(batch):
            key = (float(b), k, self.context)
            t = self._rounds.get(key)
            if t is None:
                t = self._rounds[key] = self.step.round_time_s(int(b), k, self.context, w)
            out[i] = t
        return out

    def speedup(self, batch: np.ndarray, k: int, alpha: float) -> np.ndarray:
        """Output-token throughput of speculation over plain decoding at the same batch."""
        return self.expected_tokens(k, alpha) * self.plain_s(batch) / self.spec_s(batch, k, alpha)

    def kv_batch_limit(self, k: int) -> float:
        """The most sequences whose KV fits beside the weights (K = 0: no drafter)."""
        from simulator.speculation.analytic import max_batch_in_memory
        return float(max_batch_in_memory(self.cm, self.drafter if k else None, self.context, k))


@dataclasses.dataclass(frozen=True)
class Curves:
    """The three closed-form curves at the chosen point: speedup against batch (one per K of
    K_AXIS), against K at the batch, and against alpha at the batch and K."""
    batch: float
    k: int
    alpha: float
    by_batch: dict[int, np.ndarray]           # K -> [len(BATCHES)]
    by_k: np.ndarray                          # [len(ks)]
    ks: tuple[int, ...]
    by_alpha: np.ndarray                      # [len(ALPHAS)]
    kv_limit: float                           # sequences (the chosen K)
    at_point: float                           # speedup at (batch, K, alpha)


def curves(p: Priced, batch: float, alpha_override: float | None = None) -> Curves:
    """Every closed-form curve the explorer draws. alpha_override: the i.i.d. rate of the alpha
    control (None: each K's alpha from the scenario's acceptance model)."""
    by_k_alpha: dict[int, float] = {}

    def alpha(k: int) -> float:
        if k not in by_k_alpha:
            by_k_alpha[k] = p.alpha(k) if alpha_override is None else alpha_override
        return by_k_alpha[k]

    if not batch >= 1:
        raise SpecsightInputError("batch", batch, "at least 1 sequence")
    ks = tuple(sorted(set(K_AXIS) | {p.k}))
    by_batch = {k: p.speedup(BATCHES, k, alpha(k)) for k in ks}
    b = np.array([float(batch)])
    by_k = np.array([float(p.speedup(b, k, alpha(k))[0]) for k in ks])
    by_alpha = np.array([float(p.speedup(b, p.k, float(a))[0]) for a in ALPHAS])
    return Curves(float(batch), p.k, alpha(p.k), by_batch, by_k, ks, by_alpha, p.kv_batch_limit(p.k),
                  float(p.speedup(b, p.k, alpha(p.k))[0]))
