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


#: Tests that check the CPU's own representation rather than the engine (a raw `.data` compared or assigned as a
#: numpy array, memory shared with a `.numpy()` copy, a "cpu" tensor made on the default device), or that reach
#: code outside the engine which still imports cupy by name. On a device they say nothing about the device path
#: and are skipped, each with its reason; everything else in tests/engine and tests/nn runs there.
HOST_ONLY: dict[str, str] = {
    "tests/engine/test_errors.py::test_device_mix": "its 'cpu' operand is made on the default device",
    "tests/engine/test_graph.py::test_detach_stops_the_gradient": "np.shares_memory of two .numpy() copies",
    "tests/engine/test_properties.py::test_zero_d_gradients_are_arrays": "asserts grad.data is a numpy ndarray",
    "tests/engine/test_pytorch_habits.py::test_constructors_take_pytorchs_arguments":
        "np.shares_memory(rtxviz.tensor(src).data, src): a device array against a host one",
    "tests/engine/test_graph_cache.py": "compares and assigns .data as numpy arrays throughout "
                                        "(tests/engine/test_strict_device.py replays a graph on the device)",
    "tests/engine/test_graph_cache_fold.py": "constant folding is for numpy arrays (a device's seed is made in "
                                             "each replay); the ops' replay kernels are checked on the device by "
                                             "test_op_harness",
    "tests/engine/test_pool_native.py": "the compiled kernels take numpy arrays only: on a device the ops run "
                                        "their array-library path, with nothing compiled to compare it with",
    "tests/engine/test_conv_native.py": "the compiled col2im takes numpy arrays only (see test_pool_native.py)",
    "tests/engine/test_row_kernels_native.py": "the compiled bias add and row sum take numpy arrays only (see "
                                               "test_pool_native.py)",
    "tests/engine/test_tanh_grad_native.py": "the compiled tanh backward takes numpy arrays only (see "
                                             "test_pool_native.py)",
    "tests/nn/test_optim.py::test_plain_sgd_compiled_and_numpy_updates_equal_p_plus_step_times_g_bit_for_bit":
        "compares the compiled SGD update, which takes numpy arrays only, with numpy's",
}


#: Ops whose harness examples use tensors the op's module makes at import (fixed targets, windows, an index), so on
#: the CPU: `import rtxviz` runs before this file can choose the device. (getitem: only the graph-cache replay of
#: its example with such an index.)
IMPORT_TIME_EXAMPLES = ("cross_entropy_grad/", "nll_loss_grad/", "nll_loss/", "max_pool2d_scatter/",
                        "max_pool2d_gather/", "test_graph_cache_replay_matches_eager[getitem/example1]")


def _host_only_reason(nodeid: str) -> str | None:
    path, _, name = nodeid.partition("::")
    if path == "tests/engine/test_op_harness.py" and any(
            f"[{op}" in name or op == name for op in IMPORT_TIME_EXAMPLES):
        return "the op's examples use tensors its module made at import, on the CPU"
    return HOST_ONLY.get(f"{path}::{name.partition('[')[0]}") or HOST_ONLY.get(path)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if TEST_DEVICE == "cpu":
        return
    for item in items:
        reason = _host_only_reason(item.nodeid)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"host-only, not run on {TEST_DEVICE}: {reason}"))


def pytest_report_header() -> str:
    return f"rtxviz test device: {TEST_DEVICE}"
