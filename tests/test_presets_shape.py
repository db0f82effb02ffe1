"""Acceptance presets say whether their figure was measured on a chain or a tree; a chain drafter given a
tree-measured preset gets a SpecsightWarning naming a chain preset (results unchanged); the vLLM chain
preset reproduces engines.md section 4 row 4's accept lengths by K."""
from __future__ import annotations

import textwrap
import warnings

import numpy as np
import pytest

from simulator.common.errors import SpecsightWarning
from simulator.run import simulate
from simulator.speculation.acceptance_presets import (
    PRESETS,
    SHAPES,
    alpha_for_tau,
    cumulative_from_accept_lengths,
    nearest_chain_preset,
    shape_mismatch,
)
from simulator.speculation.acceptance_spec import AcceptanceSpec
from simulator.speculation.drafters import METHODS
from specsight.cli import main

CHAIN_VLLM = "eagle3-llama-3.1-8b-mtbench-chain-vllm"
ROW4_AL = {2: 2.36, 3: 2.79, 4: 3.08, 5: 3.32, 6: 3.46, 7: 3.54}   # engines.md section 4 row 4, K -> accept length
TREE = "eagle3-llama-3.1-8b-mtbench"


def test_every_preset_states_its_shape_and_why():
    for p in PRESETS.values():
        assert p.shape in SHAPES and p.shape_basis and p.method in METHODS and p.target, p.name
        assert AcceptanceSpec.from_mapping(p.name).per_depth == (p.shape == "tree"), p.name
    shapes = {name: p.shape for name, p in PRESETS.items()}
    for name in ("eagle2-vicuna-13b", "eagle2-llama-3.1-8b-mtbench", "eagle3-vicuna-13b", "eagle3-vicuna-13b-t1",
                 TREE, "eagle3-llama-3.3-70b-mtbench", "medusa-vicuna-7b-specbench", "eagle-vicuna-7b-specbench"):
        assert shapes[name] == "tree", name
    for name in ("t5-small-ende", "lamda-8b-137b", "sps-vicuna-7b-specbench", "pld-vicuna-7b-specbench",
                 "minimax-m3-eagle3", CHAIN_VLLM):
        assert shapes[name] == "chain", name


def test_the_vllm_chain_preset_reproduces_row_4_accept_lengths():
    p = PRESETS[CHAIN_VLLM]
    assert p.kind == "al_by_k" and p.shape == "chain" and p.k == 7
    m = AcceptanceSpec.from_mapping(CHAIN_VLLM)
    assert not m.per_depth
    for k, al in ROW4_AL.items():
        assert m.expected_tokens(k) == pytest.approx(al, abs=1e-9), k
        assert round(m.expected_tokens(k), 2) == al, k
    # positions 1 and 2 share the i.i.d. alpha with 1 + a + a^2 = 2.36 (K = 2's figure)
    a = alpha_for_tau(2.36, 2)
    np.testing.assert_allclose(m.alphas(2), [a, a])
    assert a == pytest.approx(0.7689, abs=1e-4)
    # deeper positions: the cumulative acceptance is the difference of accept lengths across K
    np.testing.assert_allclose(np.cumprod(m.alphas(7))[2:], [0.43, 0.29, 0.24, 0.14, 0.08], atol=1e-12)
    assert np.all((m.alphas(7) > 0) & (m.alphas(7) <= 1))
    with pytest.raises(ValueError, match="falling"):
        cumulative_from_accept_lengths((2.0, 2.5, 3.2), 4)      # the third run gains more than the second


def test_each_tree_preset_names_a_chain_preset_of_its_family_or_target():
    assert nearest_chain_preset(TREE).name == CHAIN_VLLM
    assert nearest_chain_preset("eagle2-llama-3.1-8b-mtbench").name == CHAIN_VLLM      # same target
    assert nearest_chain_preset("eagle3-llama-3.3-70b-mtbench").name == CHAIN_VLLM     # same drafter family
    assert nearest_chain_preset("medusa-vicuna-7b-specbench").name == "sps-vicuna-7b-specbench"
    for p in PRESETS.values():
        if p.shape == "tree":
            assert nearest_chain_preset(p.name).shape == "chain"


def _scenario(acceptance, **drafter):
    return {"name": "shape", "seed": 2,
            "hardware": {"kind": "fixed", "target_step_s": 0.02, "draft_step_s": 0.001},
            "drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3, **drafter},
            "acceptance": acceptance,
            "workload": {"arrival": {"process": "closed_loop", "concurrency": 2}, "num_requests": 4,
                         "prompt_len": 16, "output_len": 32}}


def _shape_warnings(scenario) -> tuple[list[str], dict]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = simulate(scenario, baseline=True)
    return [str(w.message) for w in caught if issubclass(w.category, SpecsightWarning)], result.summary


def test_a_chain_drafter_with_a_tree_preset_is_warned_and_results_do_not_change():
    messages, summary = _shape_warnings(_scenario(TREE))
    assert len(messages) == 1
    assert TREE in messages[0] and CHAIN_VLLM in messages[0] and "chain" in messages[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpecsightWarning)
        quiet = simulate(_scenario(TREE), baseline=True).summary
    assert quiet == summary
    assert not any("warning" in str(key) for key in summary)


@pytest.mark.parametrize("scenario", [
    _scenario(TREE, tree=True, tree_branches=4),     # a tree drafter: the tree's figure fits
    _scenario(CHAIN_VLLM),                           # a chain preset
    _scenario("minimax-m3-eagle3"),
    _scenario(0.7),                                  # not a preset
])
def test_no_warning_for_a_tree_drafter_or_a_chain_preset(scenario):
    assert _shape_warnings(scenario)[0] == []


def test_shape_mismatch_needs_a_tree_preset_and_a_chain_drafter():
    assert shape_mismatch(TREE, "eagle3", 1)
    assert shape_mismatch(TREE, "eagle3", 4) is None
    assert shape_mismatch(CHAIN_VLLM, "eagle3", 1) is None
    assert shape_mismatch("no-such-preset", "eagle3", 1) is None


def test_the_cli_prints_the_warning_as_one_line(tmp_path, capsys):
    path = tmp_path / "shape.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: shape
        seed: 2
        hardware: {{kind: fixed, target_step_s: 0.02, draft_step_s: 0.001}}
        drafter: {{method: eagle3, model: eagle3-llama-3.1-8b, num_speculative_tokens: 3}}
        acceptance: {TREE}
        workload: {{arrival: closed_loop, concurrency: 2, num_requests: 4, prompt_len: 16, output_len: 32}}
        """))
    assert main(["simulate", str(path), "--json", "--baseline"]) == 0
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if "warning" in line]
    assert len(lines) == 1
    assert lines[0].startswith("specsight: warning: acceptance preset " + TREE) and CHAIN_VLLM in lines[0]
    assert "warning" not in captured.out
    assert main(["simulate", str(path), "--json", "--set", f"acceptance={CHAIN_VLLM}"]) == 0
    assert "warning" not in capsys.readouterr().err
