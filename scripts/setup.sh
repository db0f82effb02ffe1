#!/usr/bin/env bash
# Set up specsight in .venv: the CPU build of torch first (pinned, from this machine's disk when
# available), so pip never pulls a multi-GB CUDA build; then the package and its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."
# `--engine vllm [--vllm-version V]`: vLLM's CPU build in its own environment instead (.venv-vllm).
if [ "${1:-}" = "--engine" ]; then
  [ "${2:-}" = "vllm" ] || { echo "setup: --engine ${2:-<none>} is unknown; allowed: vllm" >&2; exit 2; }
  VERSION=0.32.0
  if [ "${3:-}" = "--vllm-version" ]; then VERSION=${4:?"setup: --vllm-version needs a version"}; fi
  exec bash scripts/setup_engine_vllm.sh "$VERSION"
fi
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
# the explorer's browser tests (tests/test_explore_browser.py) drive Debian's Chromium with Playwright
# (never a browser Playwright downloads); without one they skip, saying so in one line
if [ ! -x /usr/bin/chromium ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "installing Debian's chromium and chromium-driver for the browser tests (apt-get)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } \
      >/dev/null 2>&1 || say "chromium did not install: the browser tests will skip"
  else
    say "no /usr/bin/chromium and no usable apt-get (root): the browser tests will skip"
  fi
fi
say "compiling the simulator's inner loop with numba (once; cached next to the source)"
.venv/bin/python -c "from simulator.serving.decode_kernel import kernel; kernel()"
say "done: .venv/bin/specsight is ready"
