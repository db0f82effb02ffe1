"""The scenario schema: every class of bad value the fuzzing of issue 15 found is one
SpecsightInputError naming the key path, the value and what is allowed (file-level classes:
tests/test_schema_files.py; work limits and lazy users: tests/test_schema_limits.py)."""
from __future__ import annotations

import copy

import numpy as np
import pytest
from fuzz_mutate import with_value

from simulator.common.errors import SpecsightInputError
from simulator.common.paths import REPO_ROOT
from simulator.common.schema import Float, Int, check
from simulator.scenario.scenario import load_scenario
from simulator.scenario.schema_table import SCENARIO, schema_markdown

BASE = {"name": "t", "seed": 0, "hardware": {"kind": "fixed", "target_step_s": 0.01},
        "drafter": {"method": "ngram", "num_speculative_tokens": 2}, "acceptance": {"model": "iid", "alpha": 0.6},
        "workload": {"arrival": {"process": "poisson", "qps": 5}, "num_requests": 5,
                     "prompt_len": {"dist": "lognormal", "mean": 50, "sigma": 0.5}, "output_len": 8},
        "engine": {"max_num_seqs": 8}, "slo": {"tpot_ms_p99": 50}}
ROOF = {"hardware": {"gpu": "h100-sxm"}, "model": "llama-3.1-8b",
        "workload": {"arrival": {"process": "poisson", "qps": 1}, "num_requests": 2, "prompt_len": 8, "output_len": 8}}


def _with(base: dict, path: str, value) -> dict:
    return with_value(base, path, value)


def _refused(raw, field: str, *words: str) -> SpecsightInputError:
    with pytest.raises(SpecsightInputError) as ei:
        load_scenario(raw)
    e = ei.value
    assert e.field == field, str(e)
    for w in words:
        assert w in e.allowed, str(e)
    return e


def test_the_base_scenarios_load():
    load_scenario(BASE)
    load_scenario(ROOF)


@pytest.mark.parametrize("key, written", [(None, "~"), (1, "1"), (True, "true"), (1.5, "1.5")])
def test_non_string_keys_are_refused(key, written):
    raw = copy.deepcopy(BASE)
    raw[key] = "x"
    e = _refused(raw, "key", "keys must be strings", f'quote it ("{written}")')
    assert e.value == written and str(e).startswith(f"key={written!r}: "), str(e)
    raw = copy.deepcopy(BASE)
    raw["engine"][key] = 3
    _refused(raw, "engine key", "keys must be strings")


def test_a_number_yaml_reads_as_text_says_how_to_write_it():
    e = _refused(_with(BASE, "workload.num_requests", "1e30"), "workload.num_requests", "not a string")
    assert "YAML reads 1e30 as text: write 1.0e+30" in e.allowed, str(e)
    e = _refused(_with(BASE, "engine.max_num_seqs", "64"), "engine.max_num_seqs", "write 64 without quotes")


@pytest.mark.parametrize("path, value", [
    ("engine.max_num_seqs", "64"), ("slo.tpot_ms_p99", "50"), ("hardware.replicas", "2"), ("seed", "12"),
    ("workload.arrival.qps", True), ("workload.arrival.qps", "5"), ("workload.num_requests", "5"),
    ("acceptance.alpha", "0.5"), ("hardware.target_step_s", False), ("drafter.num_speculative_tokens", "2"),
    ("workload.output_len", "8"), ("drafter.tree", "yes"), ("engine.gpu_memory_utilization", True),
])
def test_strings_and_booleans_where_numbers_belong(path, value):
    e = _refused(_with(BASE, path, value), path, "must be")
    assert "not a string" in e.allowed or "not a boolean" in e.allowed


def test_gamma_cv_as_a_string():
    raw = _with(BASE, "workload.arrival", {"process": "gamma", "qps": 2, "cv": "2"})
    _refused(raw, "workload.arrival.cv", "not a string")


@pytest.mark.parametrize("path, value", [
    ("acceptance", {"model": "preset", "name": ["a"]}), ("hardware.dtype", ["bf16"]), ("engine.router", ["x"]),
    ("drafter.method", {"a": 1}), ("workload.arrival.process", ["poisson"]), ("model", ["llama-3.1-8b"]),
    ("name", ["x"]), ("policy", {"kind": ["static"]}), ("acceptance", ["a"]),
])
def test_lists_and_mappings_where_names_belong(path, value):
    raw = _with(BASE, path, value)
    with pytest.raises(SpecsightInputError) as ei:
        load_scenario(raw)
    assert ei.value.field.startswith(path.split(".")[0])


@pytest.mark.parametrize("path, value", [
    ("engine.num_gpu_blocks", 1e30), ("workload.num_requests", 1e30), ("workload.output_len", 1e30),
    ("workload.arrival", {"process": "closed_loop", "concurrency": 1e308}),
    ("workload.prompt_len", {"dist": "uniform", "low": 1, "high": 1e308}), ("engine.block_size", 1e30),
    ("workload.num_requests", 2 ** 31 * 10), ("seed", 2 ** 64), ("workload.arrival.qps", 10 ** 400),
    ("hardware.target_step_s", 1e300), ("engine.max_num_seqs", 10 ** 9), ("hardware.replicas", 10 ** 6),
    ("drafter.num_speculative_tokens", 65), ("slo.ttft_ms_p99", 1e200),
])
def test_huge_numbers_are_refused_with_the_schema_limit(path, value):
    raw = _with(BASE, path, value)
    with pytest.raises(SpecsightInputError) as ei:
        load_scenario(raw)
    e = ei.value
    assert e.field.startswith(path), str(e)
    assert "limit" in e.allowed and len(str(e)) < 300, str(e)


@pytest.mark.parametrize("path, value", [
    ("workload.arrival.qps", float("nan")), ("workload.arrival.qps", float("inf")), ("slo.tpot_ms_p99", float("nan")),
    ("acceptance.alpha", float("nan")), ("workload.output_len", float("inf")), ("seed", float("nan")),
    ("hardware.target_step_s", float("-inf")), ("engine.activation_reserve_gb", float("nan")),
])
def test_nan_and_infinities_are_refused_everywhere(path, value):
    _refused(_with(BASE, path, value), path)


def test_negative_zero_is_zero():
    sc = load_scenario(_with(BASE, "workload.prompt_len", {"dist": "lognormal", "mean": 50, "sigma": -0.0}))
    assert sc.workload.prompt_len.sigma == 0.0 and not np.signbit(sc.workload.prompt_len.sigma)
    from simulator.run import simulate
    assert (simulate(sc).requests["prompt_tokens"] == 50).all()
    assert check(Float(lo=0.0, hi=1.0), -0.0, "x") == 0.0 and check(Int(lo=0, hi=1), -0.0, "x") == 0


def test_integral_floats_and_numpy_scalars_are_numbers():
    sc = load_scenario(_with(_with(BASE, "engine.max_num_seqs", 16.0), "workload.arrival.qps", np.float64(3)))
    assert sc.engine.max_num_seqs == 16 and type(sc.engine.max_num_seqs) is int
    assert load_scenario(_with(BASE, "workload.num_requests", np.int64(7))).workload.n_requests == 7
    _refused(_with(BASE, "workload.num_requests", np.bool_(True)), "workload.num_requests", "not a boolean")
    _refused(_with(BASE, "workload.num_requests", 7.5), "workload.num_requests", "whole number")


def test_names_are_strings_of_sane_length():
    _refused(_with(BASE, "name", "x" * 201), "name", "200 characters")
    _refused(_with(BASE, "name", 12), "name", "not a number")
    _refused(_with(ROOF, "model", "m" * 1025), "model", "1024 characters")
    _refused(_with(BASE, "description", "\x00"), "description", "no NUL")


def test_misspelt_keys_get_a_did_you_mean():
    _refused(_with(BASE, "engine.max_num_seq", 3), "engine.max_num_seq", "did you mean max_num_seqs")
    _refused(_with(BASE, "workload.arrival.qpss", 3), "workload.arrival.qpss", "did you mean qps")
    _refused(_with(BASE, "seeds", 3), "seeds", "did you mean seed")
    _refused(_with(BASE, "workload.arrival.process", "poison"), "workload.arrival.process", "did you mean poisson")


def test_null_is_refused_where_a_value_is_required_and_accepted_where_it_means_the_default():
    _refused(_with(BASE, "engine.block_size", None), "engine.block_size", "not null")
    assert load_scenario(_with(BASE, "engine.num_gpu_blocks", None)).engine.num_gpu_blocks is None


def test_every_error_is_one_line():
    for path, value in [("name", "é" * 300), ("seed", 10 ** 5000), ("workload.output_len", [[[[1]]]])]:
        with pytest.raises(SpecsightInputError) as ei:
            load_scenario(_with(BASE, path, value))
        assert "\n" not in str(ei.value) and len(str(ei.value)) < 400


def test_every_scenario_key_is_documented_and_the_reference_is_current():
    assert (REPO_ROOT / "docs" / "schema.md").read_text() == schema_markdown(), \
        "docs/schema.md is stale: python -m simulator.scenario.schema_table > docs/schema.md"
    for key in SCENARIO.keys:
        assert f"`{key}" in schema_markdown()


def test_shipped_scenarios_pass_the_schema_unchanged():
    import yaml

    from simulator.scenario.scenario import checked_source
    for p in sorted((REPO_ROOT / "scenarios").glob("*.yaml")):
        raw = yaml.safe_load(p.read_text())
        clean = checked_source(p)
        assert clean["seed"] == raw["seed"] and clean["engine"] == raw.get("engine", clean.get("engine"))
