"""Shared fixtures for the training-kit tests: the PyTorch reference file and the device parameter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtxviz.engine.device import cuda_is_available

REFERENCE = Path(__file__).parent / "data" / "optim_reference.json"


@pytest.fixture(scope="session")
def reference() -> dict:
    return json.loads(REFERENCE.read_text())


_CUDA = cuda_is_available()


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not _CUDA, reason="no CUDA GPU"))])
def device(request: pytest.FixtureRequest) -> str:
    """Runs a test on the CPU and, when cupy and a GPU are usable, on cuda:0 (skipped cleanly otherwise)."""
    return request.param
