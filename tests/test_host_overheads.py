"""Measured host overheads of a calibrated profile, absent (= 0) from every datasheet profile:

  overheads.sampling_row_us   host sampling time per logit row, charged per logit on top of the pass;
  overheads.verify_round_us   the verification step's fixed time, charged once per round with K > 0."""
import dataclasses

import numpy as np
import pytest
import yaml

from simulator.common.errors import SpecsightInputError
from simulator.costs.cost_model import CostModel, PassShape
from simulator.hardware.hardware import load_profile, profile_from_dict
from simulator.models.catalog import load_model

RATE_US = 25.0


def _pair():
    base = load_profile("h200-sxm")
    with_rate = dataclasses.replace(base, overheads=dataclasses.replace(base.overheads, sampling_row_us=RATE_US))
    m = load_model("llama-3.1-8b")
    return base, with_rate, CostModel(m, base, tp=1, dtype="bf16"), CostModel(m, with_rate, tp=1, dtype="bf16")


def test_datasheet_profiles_have_no_sampling_row_term():
    base = load_profile("h200-sxm")
    assert base.overheads.sampling_row_us is None
    assert "sampling_row_us" not in base.to_dict()["overheads"] and "sampling" not in base.describe()


def test_each_logit_costs_the_rate_in_every_pass_path():
    _, _, cm0, cm1 = _pair()
    # scalars (the simulator's calls), cached and uncached
    for shape in (PassShape.from_sequences([(1, 500)] * 8, logits="last"), PassShape.from_sequences([(5, 900)] * 4)):
        d = float(cm1.shape_time_s(shape)) - float(cm0.shape_time_s(shape))
        assert d == pytest.approx(RATE_US * 1e-6 * float(shape.num_logits), rel=1e-9)
        assert cm1.shape_time_s(shape) == cm1.shape_time_s(shape)
        # the explained path adds it to the sampling op and still sums to time_s
        bd = cm1.breakdown(shape)
        assert bd.ops["sampling"].time_s - cm0.breakdown(shape).ops["sampling"].time_s == pytest.approx(d, rel=1e-9)
        assert bd.time_s == pytest.approx(float(cm1.shape_time_s(shape)), rel=1e-12)
    # arrays
    T = np.array([1.0, 8.0, 40.0])
    lg = np.array([1.0, 8.0, 40.0])
    d = cm1.time_s(T, 1000 * T, 1000 * T, lg) - cm0.time_s(T, 1000 * T, 1000 * T, lg)
    np.testing.assert_allclose(d, RATE_US * 1e-6 * lg, rtol=1e-9)
    # a drafter's k steps: B logits per step
    B, k = 8.0, 4
    d = cm1.steps_time_s(2 * B, 4000.0, B, k, B) - cm0.steps_time_s(2 * B, 4000.0, B, k, B)
    assert d == pytest.approx(RATE_US * 1e-6 * B * k, rel=1e-9)


def test_round_trip_and_validation(tmp_path):
    _, with_rate, _, _ = _pair()
    d = with_rate.to_dict()
    d["sources"]["overheads.sampling_row_us"] = "unit test"
    assert d["overheads"]["sampling_row_us"] == RATE_US
    p = profile_from_dict(yaml.safe_load(yaml.safe_dump(d)), "test")
    assert p.overheads.sampling_row_us == RATE_US
    del d["sources"]["overheads.sampling_row_us"]
    with pytest.raises(SpecsightInputError, match="sampling_row_us"):       # every number needs a source
        profile_from_dict(d, "test")
    d["sources"]["overheads.sampling_row_us"] = "unit test"
    d["overheads"]["sampling_row_us"] = -1.0
    with pytest.raises(SpecsightInputError, match="sampling_row_us"):
        profile_from_dict(d, "test")


VERIFY_US = 400.0


def _verify_profile(tmp_path):
    base = load_profile("h200-sxm")
    prof = dataclasses.replace(base, name="h200-verify",
                               overheads=dataclasses.replace(base.overheads, verify_round_us=VERIFY_US))
    d = prof.to_dict()
    d["sources"]["overheads.verify_round_us"] = "unit test"
    path = tmp_path / "h200-verify.yaml"
    path.write_text(yaml.safe_dump(d))
    return base, profile_from_dict(yaml.safe_load(path.read_text()), str(path)), path


def test_verify_round_is_charged_once_per_speculative_round(tmp_path):
    from simulator.run import simulate
    from simulator.speculation.analytic import plain_step_time_s, spec_step_time_s
    from simulator.speculation.drafters import Drafter, DrafterSpec
    base, prof, path = _verify_profile(tmp_path)
    assert base.overheads.verify_round_us is None and "verify" not in base.describe()
    assert prof.overheads.verify_round_us == VERIFY_US and prof.to_dict()["overheads"]["verify_round_us"] == VERIFY_US
    m = load_model("llama-3.1-8b")
    cm0, cm1 = CostModel(m, base), CostModel(m, prof)
    assert cm1.round_overhead_s(0) == cm0.round_overhead_s(0) == cm0.iteration_overhead_s
    assert cm1.round_overhead_s(3) - cm1.round_overhead_s(0) == pytest.approx(VERIFY_US * 1e-6, rel=1e-12)
    assert cm0.round_overhead_s(3) == cm0.round_overhead_s(0)
    spec = DrafterSpec(method="eagle3", model="eagle3-llama-3.1-8b", num_speculative_tokens=3)
    d0, d1 = Drafter(spec, m, cm0), Drafter(spec, m, cm1)
    assert plain_step_time_s(cm1, 8, 1000) == plain_step_time_s(cm0, 8, 1000)
    assert spec_step_time_s(cm1, d1, 8, 1000, 3, 0.7) - spec_step_time_s(cm0, d0, 8, 1000, 3, 0.7) == \
        pytest.approx(VERIFY_US * 1e-6, rel=1e-9)
    # the engine: every speculative iteration's overhead carries it, plain ones do not, and an
    # iteration still lasts exactly its parts
    sc = {"name": "verify", "seed": 0, "hardware": {"profile": str(path)}, "model": "llama-3.1-8b",
          "drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3},
          "acceptance": {"model": "iid", "alpha": 0.7},
          # K = 3 wherever a sequence decodes; prefill-only iterations: K = 0
          "policy": {"kind": "static"},
          "workload": {"arrival": {"process": "closed_loop", "concurrency": 4}, "num_requests": 40,
                       "prompt_len": 256, "output_len": {"dist": "uniform", "low": 8, "high": 64}}}
    it = simulate(sc).iterations
    spec_rows = (it["k"] > 0) & (it["num_decode"] > 0)
    assert spec_rows.any() and (~spec_rows).any()
    np.testing.assert_allclose(it.loc[spec_rows, "overhead_s"], cm1.iteration_overhead_s + VERIFY_US * 1e-6, rtol=1e-12)
    np.testing.assert_allclose(it.loc[~spec_rows, "overhead_s"], cm1.iteration_overhead_s, rtol=1e-12)
    parts = it["draft_s"] + it["verify_s"] + it["prefill_s"] + it["overhead_s"]
    np.testing.assert_allclose(it["end_s"] - it["start_s"], parts, rtol=1e-9)


def test_every_pricing_of_a_speculative_round_carries_the_verify_step(tmp_path, monkeypatch):
    """The goodput policy's per-K prices (`Replica._iteration_s`) and `RooflineStepCost.round_time_s`
    add the verify step's fixed time at K > 0 and nothing at K = 0."""
    from simulator.run import simulate
    from simulator.serving.replica import Replica
    from simulator.serving.step_cost import RooflineStepCost
    from simulator.speculation.drafters import Drafter, DrafterSpec
    base, prof, path = _verify_profile(tmp_path)
    m = load_model("llama-3.1-8b")
    spec = DrafterSpec(method="eagle3", model="eagle3-llama-3.1-8b", num_speculative_tokens=3)
    cm0, cm1 = CostModel(m, base), CostModel(m, prof)
    s0, s1 = RooflineStepCost(cm0, Drafter(spec, m, cm0)), RooflineStepCost(cm1, Drafter(spec, m, cm1))
    assert s1.round_time_s(8, 0, 1000.0, 1) == s0.round_time_s(8, 0, 1000.0, 1)
    d_round_s = s1.round_time_s(8, 3, 1000.0, 4) - s0.round_time_s(8, 3, 1000.0, 4)
    assert d_round_s == pytest.approx(VERIFY_US * 1e-6, rel=1e-9)
    seen = []
    real = Replica._iteration_s

    def priced(self, tokens_per_seq):
        out = real(self, tokens_per_seq)
        oh_spec, self._spec_overhead_s = self._spec_overhead_s, self._overhead_s   # the same without it
        without = real(self, tokens_per_seq)
        self._spec_overhead_s = oh_spec
        seen.append((out, without))
        return out
    monkeypatch.setattr(Replica, "_iteration_s", priced)
    sc = {"name": "goodput", "seed": 0, "hardware": {"profile": str(path)}, "model": "llama-3.1-8b",
          "drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3},
          "acceptance": {"model": "iid", "alpha": 0.7}, "policy": {"kind": "goodput"},
          "workload": {"arrival": {"process": "closed_loop", "concurrency": 4}, "num_requests": 12,
                       "prompt_len": 256, "output_len": 32}}
    simulate(sc)
    assert seen
    for (pass_s, decode_s, _), (pass0, decode0, _) in seen:
        finite = np.isfinite(decode_s)
        np.testing.assert_allclose((decode_s - decode0)[finite][1:], VERIFY_US * 1e-6, rtol=1e-9)
        np.testing.assert_allclose((pass_s - pass0)[finite][1:], VERIFY_US * 1e-6, rtol=1e-9)
        assert decode_s[0] == decode0[0] and pass_s[0] == pass0[0]


@pytest.mark.parametrize("bad", ["400", True, -1.0, float("nan")])
def test_verify_round_must_be_a_number(tmp_path, bad):
    _, prof, _ = _verify_profile(tmp_path)
    d = prof.to_dict()
    d["sources"]["overheads.verify_round_us"] = "unit test"
    d["overheads"]["verify_round_us"] = bad
    with pytest.raises(SpecsightInputError, match="verify_round_us"):
        profile_from_dict(d, "test")
