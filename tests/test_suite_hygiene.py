"""The suite itself: a per-test timeout that only guards against hangs, so a slow or busy machine
never fails a test, and tests that print nothing unless asked (`-s`, or a failure's report)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HANG_GUARD_S = 600      # the suite's slowest test takes about 20 s on a quiet 2-core machine


def test_the_per_test_timeout_is_a_hang_guard(pytestconfig):
    """pytest-timeout's limit as this run reads it (pyproject.toml's [tool.pytest.ini_options])."""
    assert float(pytestconfig.getini("timeout")) >= HANG_GUARD_S


def test_no_test_prints_past_pytests_capture():
    """capsys.disabled() or the real sys.__stdout__ would put a test's text in every run's output."""
    past = re.compile(r"capsys\.disabled\(|capfd\.disabled\(|sys\.__std(out|err)__")
    offenders = [f"{p.name}:{i}" for p in sorted((ROOT / "tests").glob("*.py")) if p.name != Path(__file__).name
                 for i, line in enumerate(p.read_text().splitlines(), 1) if past.search(line)]
    assert not offenders, offenders
