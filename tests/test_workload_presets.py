"""Workload presets (simulator/workload/workload_presets.py): every preset has a source, its distributions match the
published figures they were fitted to (closed forms), a sampled workload reproduces the published
medians, the scenario's own length keys win, and a bad name is one input error with did-you-mean."""
import math

import numpy as np
import pytest

from simulator.common.errors import SpecsightInputError
from simulator.workload.length_dist import LengthDist
from simulator.workload.workload import WorkloadSpec, generate_requests
from simulator.workload.workload_presets import PRESETS, Z90, get_preset

ARRIVAL = {"process": "poisson", "qps": 1.0}


def closed_form(dist: LengthDist, stat: str) -> float:
    """A statistic of the unclipped, unrounded distribution: lognormal median exp(mu), mean
    exp(mu + sigma^2/2), P90 exp(mu + z90 sigma); a fixed length is every statistic."""
    if dist.dist == "fixed":
        return float(dist.value)
    assert dist.dist == "lognormal"
    return math.exp(dist.mu + {"median": 0.0, "mean": dist.sigma ** 2 / 2, "p90": Z90 * dist.sigma}[stat])


def workload(**kw) -> WorkloadSpec:
    return WorkloadSpec.from_mapping({"arrival": ARRIVAL, **kw})


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_loads_with_a_source_and_a_tokenizer(name):
    p = get_preset(name)
    assert p.name == name and p.source and p.tokenizer and p.notes and p.published
    assert all(f.cite and f.side in ("prompt", "output") for f in p.published)
    LengthDist.from_value(p.length("prompt"), "prompt")
    if p.output is not None:
        LengthDist.from_value(p.length("output"), "output")


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_distributions_match_the_published_figures_they_were_fitted_to(name):
    p = get_preset(name)
    for f in p.published:
        dist = LengthDist.from_value(p.length(f.side), f.side)
        got = closed_form(dist, f.stat)
        assert got == pytest.approx(f.value, rel=f.rel_tol, abs=0.5 if f.rel_tol == 0 else 0), (f, got)


def test_lognormal_closed_form_mean_is_median_times_exp_half_sigma_squared():
    p = get_preset("sharegpt")
    d = LengthDist.from_value(p.length("prompt"), "prompt")
    assert d.mean_estimate == pytest.approx(closed_form(d, "median") * math.exp(d.sigma ** 2 / 2), rel=1e-12)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_sampled_workload_has_the_published_median_within_2_percent(name):
    p = get_preset(name)
    extra = {} if p.output is not None else {"output_len": 64}
    r = generate_requests(workload(preset=name, num_requests=20_000, **extra), np.random.default_rng(7))
    for f in p.published:
        if f.stat != "median":
            continue
        x = r.prompt_len if f.side == "prompt" else r.output_len
        assert np.median(x) == pytest.approx(f.value, rel=0.02), (name, f)


def test_the_preset_fills_both_lengths_and_keeps_the_scenario_arrivals():
    w = workload(preset="sharegpt", num_requests=10)
    assert w.preset == "sharegpt" and w.n_requests == 10 and w.arrival == "poisson" and w.qps == 1.0
    assert w.prompt_len == LengthDist.from_value(get_preset("sharegpt").length("prompt"), "p")
    assert w.output_len == LengthDist.from_value(get_preset("sharegpt").length("output"), "o")


def test_scenario_keys_override_the_preset():
    w = workload(preset="sharegpt", output_len=77)
    assert w.output_len == LengthDist(dist="fixed", value=77)
    assert w.prompt_len.dist == "lognormal"
    w = workload(preset="gsm8k", prompt_len={"dist": "uniform", "low": 10, "high": 20})
    assert w.prompt_len.dist == "uniform" and w.output_len.dist == "lognormal"


def test_a_prompt_only_preset_needs_the_scenario_output_len():
    with pytest.raises(SpecsightInputError) as e:
        workload(preset="pg19")
    assert e.value.field == "workload.output_len" and "pg19" in e.value.allowed
    assert workload(preset="pg19", output_len=256).output_len.value == 256


def test_a_bad_preset_name_is_one_input_error_with_did_you_mean():
    with pytest.raises(SpecsightInputError) as e:
        workload(preset="sharegtp")
    assert e.value.field == "workload.preset" and "did you mean sharegpt" in e.value.allowed
    with pytest.raises(SpecsightInputError) as e:
        get_preset("mt-bench")
    assert "mtbench" in e.value.allowed


def test_a_scenario_names_a_preset_end_to_end():
    from simulator.scenario.scenario import load_scenario
    sc = load_scenario({"hardware": {"kind": "fixed", "target_step_s": 0.01},
                        "workload": {"arrival": {"process": "closed_loop", "concurrency": 1}, "num_requests": 5,
                                     "preset": "mtbench"}})
    assert sc.workload.preset == "mtbench" and sc.workload.output_len.value == 256
