"""CostModel.steps_time_s (a drafter's K sequential passes) and time_s's cache of the terms that
depend only on (tokens, logits): both must give exactly what plain time_s calls give."""
import math

import numpy as np
import pytest

from simulator.costs.cost_model import CostModel
from simulator.hardware.hardware import Efficiency, load_profile
from simulator.models.catalog import load_model

L8B, L70B = load_model("llama-3.1-8b"), load_model("llama-3.1-70b")
H100 = load_profile("h100-sxm")


MODELS = {   # name -> a factory (fresh models start with an empty cache)
    "soft": lambda: CostModel(L8B, H100),
    "tp4": lambda: CostModel(L70B, H100, tp=4),                                    # all-reduce terms
    "sharp": lambda: CostModel(L8B, H100, efficiency=Efficiency(memory=0.8, compute=0.7,
                                                                roofline_sharpness=math.inf)),
    "gemv": lambda: CostModel(L8B, H100, efficiency=Efficiency(memory=0.8, compute=0.7, memory_gemv=0.6)),
}


def _reference(cm, first, ctx, B, k, n):
    """The drafter's loop as written before steps_time_s: one time_s call per step."""
    t = 0.0
    for j in range(k):
        m = first if j == 0 else n
        c = ctx + B * j
        t = t + cm.time_s(m, c, m * c / B + m * (m / B + 1) / 2, B if j == 0 else n)
    return t


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("first,ctx,B,k,n", [(24, 4000, 8, 3, 8), (8, 4000, 8, 1, 8), (1, 700, 1, 4, 1),
                                             (1.0, 700.0, 1, 4, 1.0), (37, 90123, 16, 5, 48)])
def test_steps_time_s_is_the_sum_of_time_s_calls(name, first, ctx, B, k, n):
    cm = MODELS[name]()
    assert cm.steps_time_s(first, ctx, B, k, n) == _reference(cm, first, ctx, B, k, n)
    assert cm.steps_time_s(first, ctx, B, k, n) == _reference(cm, first, ctx, B, k, n)   # cached terms


@pytest.mark.parametrize("name", MODELS)
def test_cached_terms_do_not_depend_on_call_order(name):
    """The first call at a (tokens, logits) fills the cache: a fresh model called in the other
    order, and the same model called again, give the same seconds (ints and equal floats too)."""
    shapes = [(27, 5000, 30000.0, 27), (27.0, 5000.0, 30000.0, 27.0), (1, 10, 10.5, 1), (1.0, 10, 10.5, 1.0),
              (4096, 0, 8390656.0, 3)]
    cm = MODELS[name]()
    first = [cm.time_s(*s) for s in shapes]
    fresh = MODELS[name]()
    assert [fresh.time_s(*s) for s in reversed(shapes)][::-1] == first
    assert [cm.time_s(*s) for s in shapes] == first


@pytest.mark.parametrize("name", MODELS)
def test_scalar_path_matches_the_array_path(name):
    cm = MODELS[name]()
    T = np.array([1.0, 8.0, 27.0, 512.0])
    C = np.array([100.0, 4000.0, 5000.0, 0.0])
    P = np.array([101.0, 4036.0, 30000.0, 131328.0])
    L = np.array([1.0, 8.0, 27.0, 1.0])
    arr = cm.time_s(T, C, P, L)
    for i in range(len(T)):
        assert cm.time_s(float(T[i]), float(C[i]), float(P[i]), float(L[i])) == pytest.approx(float(arr[i]), rel=1e-12)
