"""Devices: cupy is never touched at import, and CPU devices compare and print as users expect."""

import subprocess
import sys

from rtxviz import Device, Tensor


def test_import_does_not_load_cupy_or_touch_a_gpu() -> None:
    code = "import sys, rtxviz; rtxviz.Tensor.ones([2]).sum(); assert 'cupy' not in sys.modules, 'cupy loaded'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cpu_device_identity_and_names() -> None:
    assert Device.cpu() == Device("cpu") == "cpu"
    assert str(Device.cpu()) == "cpu" and repr(Device.cpu()) == "Device('cpu')"
    assert Tensor.ones([2], device="cpu").device == Device.cpu()
    assert Tensor.ones([2]).to(Device.cpu()).device.kind == "cpu"
