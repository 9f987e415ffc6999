"""The compiled module's presence, as the tests of its kernels need it: absent, they skip, unless the run asks for
it (`RTXVIZ_REQUIRE_NATIVE=1`: `make test` and CI), where a failed compile must fail them instead."""

from __future__ import annotations

import os

import pytest


def need_native(present: bool) -> None:
    """Skip the calling test when the compiled kernel it tests is absent; fail it if the run requires it."""
    if present:
        return
    why = "rtxviz._native is not built (python setup.py build_ext --inplace)"
    if os.environ.get("RTXVIZ_REQUIRE_NATIVE") == "1":
        pytest.fail(why)
    pytest.skip(why)
