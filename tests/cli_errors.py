"""Test helper: run a command line that must fail with one `specsight: error:` line and exit 2."""
from __future__ import annotations

from specsight.cli import main


def one_error(capsys, argv: list[str], *words: str) -> str:
    """The single error line of `argv` (exit code 2, no traceback), which must contain every word."""
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("specsight: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]
