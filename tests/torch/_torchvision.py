"""torchvision's models without its compiled ops.

PyPI's torchvision 0.28.0 fails to import beside the CPU torch 2.13.0 wheel ("operator torchvision::nms does not
exist": its compiled extension was built against another torch). Its import registers meta kernels for those
ops (torchvision/_meta_registrations.py), which is what fails; the models are pure Python and need none of them.
Stubbing that one module before the import loads the models; nothing here uses nms or other compiled ops.
"""

from __future__ import annotations

import sys
import types


def torchvision_models():
    """`torchvision.models`, importable beside this torch (see the module docstring)."""
    if "torchvision" not in sys.modules:
        sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    import torchvision

    return torchvision.models
