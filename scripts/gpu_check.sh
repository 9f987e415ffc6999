#!/usr/bin/env bash
# The cupy path on a real GPU: installs cupy for CUDA 12 into the venv, then runs the engine and training-kit
# tests with every tensor on cuda:0 (RTXVIZ_TEST_DEVICE=cuda, tests/conftest.py), and the strict stand-in's
# own tests against real cupy. Run it on a machine with an NVIDIA GPU, from the repository root, after
# `make setup`:  bash scripts/gpu_check.sh [extra pytest arguments]
# It prints the GPU, cupy's version and the pytest summary; it exits non-zero when a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$PY" -m pip install -q "cupy-cuda12x>=13"
"$PY" - <<'PYEOF'
import cupy
print("cupy", cupy.__version__, "devices:", cupy.cuda.runtime.getDeviceCount())
from rtxviz.engine.device import cuda_is_available
assert cuda_is_available(), "rtxviz does not see the GPU (rtxviz.engine.device.cuda_is_available() is False)"
PYEOF
export RTXVIZ_TEST_DEVICE=cuda
"$PY" -m pytest -q -p no:warnings -p no:cacheprovider -o addopts="" tests/engine tests/nn "$@"
