"""CostModel's cache of a pass's terms (those that depend only on its tokens and logits): a pass
shape new to the cache reuses the weights' seconds of its token count and the LM head's of its
logit count. Reuse must give the bits a cost model computing that shape first gives, and the
caches stay bounded."""
import pytest

import simulator.costs.cost_model as cost_model
from simulator.costs.cost_model import CostModel
from simulator.costs.pass_shape import causal_pairs
from simulator.hardware.hardware import Efficiency, load_profile
from simulator.models.catalog import load_model

H100 = load_profile("h100-sxm")
# (tokens, logits) orders in which each count recurs with another: one token and one logit
# (matrix-vector kernels where the profile has their rate), several of each
SHAPES = [(1, 1), (7, 1), (7, 3), (1, 3), (64, 8), (7, 8), (64, 1), (3, 3)]
CASES = [
    ("llama-3.1-8b", "h100-sxm", None),                          # dense
    ("qwen3-30b-a3b", "h100-sxm", None),                         # routed experts (a function of T)
    ("qwen3-next-80b-a3b", "h100-sxm", None),                    # linear attention (of T and logits)
    ("llama-3.1-8b", "h200-sxm.calibrated", None),               # GEMV rate, host sampling per logit
    ("llama-3.1-8b", "h100-sxm", Efficiency(0.8, 0.7, float("inf"), memory_gemv=0.95)),  # sharp, GEMV
]


def _cost_model(model: str, profile: str, eff: Efficiency | None) -> CostModel:
    return CostModel(load_model(model), load_profile(profile), efficiency=eff)


@pytest.mark.parametrize("model, profile, eff", CASES)
def test_terms_reused_across_shapes_are_the_terms_computed_alone(model, profile, eff):
    warm = _cost_model(model, profile, eff)
    for T, L in SHAPES:
        alone = _cost_model(model, profile, eff)
        assert warm._pass_terms(T, L) == alone._pass_terms(T, L)
        ctx = 100 * T
        args = (T, ctx, causal_pairs(T, ctx, 1), L, 1)
        assert warm.time_s(*args) == alone.time_s(*args)
        assert (warm.steps_time_s(T, ctx, 1, 3, L) == alone.steps_time_s(T, ctx, 1, 3, L))
        assert list(warm.terms_row(T, L)) == list(alone._pass_terms(T, L))


def test_the_caches_are_cleared_together_at_their_bound(monkeypatch):
    monkeypatch.setattr(cost_model, "TERMS_CACHE_MAX", 8)
    cm = CostModel(load_model("llama-3.1-8b"), H100)
    for T in range(1, 40):
        for L in (1, 2):
            cm.time_s(T, 0, causal_pairs(T, 0, 1), L, 1)
            assert len(cm._terms) <= 8
            assert len(cm._weights_by_tokens) <= 8 and len(cm._head_by_logits) <= 8
