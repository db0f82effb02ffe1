#!/usr/bin/env bash
# Set up specsight in .venv: the CPU build of torch first (pinned, from this machine's disk when
# available), so pip never pulls a multi-GB CUDA build; then the package and its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
say() { echo "setup: $*" >&2; }
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $("$PY" --version 2>&1)"
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  say "installing torch==2.13.0 (CPU build) and numpy (a few minutes on a fresh machine)"
  .venv/bin/pip install -q --disable-pip-version-check torch==2.13.0 numpy 2>&1 | grep -v "is ignored" || true
fi
.venv/bin/python -c "import torch" || { say "torch did not install" ; exit 1; }
say "installing specsight and its dependencies (pip install -e .[dev])"
.venv/bin/pip install -q --disable-pip-version-check -e ".[dev]" 2>&1 | grep -v "is ignored" || true
.venv/bin/python -c "import simulator, calibrate, specsight, simpy, dask.distributed" || { say "install incomplete"; exit 1; }
say "compiling the simulator's inner loop with numba (once; cached next to the source)"
.venv/bin/python -c "from simulator.serving.decode_kernel import kernel; kernel()"
say "done: .venv/bin/specsight is ready"
