#!/usr/bin/env bash
# Set up specsight in .venv: the CPU build of torch first (pinned, from this machine's disk when
# available), so pip never pulls a multi-GB CUDA build; then the package and its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/pip install -q --disable-pip-version-check torch==2.13.0 2>&1 | grep -v "is ignored" || true
fi
.venv/bin/python -c "import torch" || { echo "setup: torch did not install" >&2; exit 1; }
.venv/bin/pip install -q --disable-pip-version-check -e ".[dev]" 2>&1 | grep -v "is ignored" || true
.venv/bin/python -c "import simulator, calibrate, specsight, simpy, dask.distributed" || { echo "setup: install incomplete" >&2; exit 1; }
# compile the simulator's inner loop once (numba caches it next to the source; later runs load it)
.venv/bin/python -c "from simulator.decode_kernel import kernel; kernel()"
