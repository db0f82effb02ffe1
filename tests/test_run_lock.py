"""Two `specsight calibrate` runs on one --out: the second is refused at once in one line naming the
--out and the run that holds it, and a killed run leaves no stale lock (simulator/common/run_lock.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simulator.common.errors import SpecsightInputError
from simulator.common.run_lock import exclusive_run, lock_path

ROOT = Path(__file__).resolve().parent.parent


def _calibrate(out: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "specsight.cli", "calibrate", "--device", "cpu", "--quick",
                             "--no-progress", "--out", str(out)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.timeout(600)
def test_a_second_calibrate_on_one_out_is_refused_and_a_killed_one_leaves_no_lock(tmp_path):
    out = tmp_path / "cpu.yaml"
    first = _calibrate(out)
    try:
        lock = lock_path(out)
        deadline = time.monotonic() + 300          # (start-up on a loaded machine: torch is imported before the lock)
        while not (lock.exists() and lock.read_text().strip()):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first run never took its lock"
            time.sleep(0.2)
        assert lock.read_text().strip() == str(first.pid)
        # stopped, the first run still lives and holds its lock, and its timing passes do not take
        # the cores the second run starts on (they made the refusal take ~8 s on a 2-core machine)
        first.send_signal(signal.SIGSTOP)
        second = _calibrate(out)
        _, err = second.communicate(timeout=300)
        assert first.poll() is None, "the first run ended before the second was refused"
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert second.returncode == 2 and len(lines) == 1 and "Traceback" not in err, err
        assert lines[0].startswith("specsight: error: --out=") and str(out) in lines[0], err
        assert f"another calibrate run (pid {first.pid}) holds it" in lines[0], err
        with pytest.raises(SpecsightInputError, match="holds it"):     # held while the first run lives
            with exclusive_run(out, "--out", "calibrate"):
                pytest.fail("took a lock another process holds")
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    with exclusive_run(out, "--out", "calibrate"):                     # a killed run's lock is gone with it
        assert lock.read_text().strip() == str(os.getpid())
    assert not lock.exists()                                          # a finished run removes its lock file
