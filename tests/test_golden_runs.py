"""Every output of the safety-net cases (tests/golden_cases.py) is bit-identical to the digests in
tests/data/golden_runs.json: a refactor that changes any DataFrame, trace or summary fails here."""
from __future__ import annotations

import json

import pytest
from golden_cases import GOLDEN, cases, run_case

WANT = json.loads(GOLDEN.read_text())


def test_every_case_has_a_digest():
    assert sorted(WANT) == sorted(cases())


@pytest.mark.parametrize("name", sorted(cases()))
def test_case_is_bit_identical(name):
    assert run_case(name) == WANT[name], f"{name}: outputs differ from tests/data/golden_runs.json"
