"""Shared by every test directory.

RTXVIZ_TEST_DEVICE chooses the device the tests' tensors are made on (`set_default_device`):

- unset or ``cpu``: numpy;
- ``strict``: the strict cupy stand-in (tests/strict_xp.py) as the "cuda" backend, on the CPU: arrays that
  refuse implicit conversion to numpy and mixing with numpy arrays, as cupy's do. CI runs tests/engine and
  tests/nn this way as a second pytest invocation (Makefile `test`);
- ``cuda``: real cupy on a GPU (scripts/gpu_check.sh).
"""

from __future__ import annotations

import os

import pytest

from rtxviz.engine.device import Device, set_default_device

# Scripts that generate reference data with PyTorch run by hand in a throwaway venv (they import torch), never
# as tests; --doctest-modules would import them.
collect_ignore_glob = ["**/make_*.py", "make_*.py"]

TEST_DEVICE = os.environ.get("RTXVIZ_TEST_DEVICE", "cpu")
if TEST_DEVICE not in ("cpu", "strict", "cuda"):
    raise pytest.UsageError(f"RTXVIZ_TEST_DEVICE={TEST_DEVICE!r}: use cpu, strict or cuda")
if TEST_DEVICE == "strict":
    from tests import strict_xp

    strict_xp.install()
# Set at import, before test modules build tensors at module level.
set_default_device(Device.cuda() if TEST_DEVICE != "cpu" else None)


def pytest_report_header() -> str:
    return f"rtxviz test device: {TEST_DEVICE}"
