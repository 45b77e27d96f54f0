#!/usr/bin/env bash
# The bench's own virtual environment with the peers tinyjx is measured against: JAX (CPU) and PyTorch (CPU build).
# Neither is a dependency of tinyjx; the bench imports tinyjx from this checkout. Then:
#   .benchvenv/bin/python bench/bench.py            (and bench/first_call.py, bench/mnist_torch.py)
# Versions are the ones the issue notes' figures were measured with; override with JAX=... TORCH=...
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.benchvenv}
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q numpy typing-extensions "jax[cpu]==${JAX:-0.10.2}"
# the CPU build of PyTorch (the default wheel on PyPI for Linux is a CUDA build of several GB)
"$VENV/bin/pip" install -q "torch==${TORCH:-2.13.0}" --retries 0 --timeout 15 --index-url https://download.pytorch.org/whl/cpu \
  || "$VENV/bin/pip" install -q "torch==${TORCH:-2.13.0}"
"$VENV/bin/python" -c "import jax, torch; print('peers:', 'jax', jax.__version__, 'torch', torch.__version__)"
