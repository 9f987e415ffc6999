"""rtxviz for PyTorch models (``pip install 'rtxviz[torch]'``): the live page, SVG drawings and debugging aids
for an ordinary PyTorch training loop. Importing `rtxviz` never imports torch; importing `rtxviz.torch` does.

>>> import torch, rtxviz.torch
>>> events = []
>>> with rtxviz.torch.record(torch.nn.Linear(2, 1)) as rec:
...     rec.model(torch.ones(1, 2)).sum().backward()
>>> sorted({e["kind"] for e in rec.events})[:3]
['backward_begin', 'backward_end', 'grad']
"""

from __future__ import annotations

from .anomaly import AnomalyError, detect_anomaly
from .record import Recording, record
from .recorder import TorchRecorder
from .watch import TorchRun, watch

__all__ = ["AnomalyError", "Recording", "TorchRecorder", "TorchRun", "detect_anomaly", "record", "watch"]
