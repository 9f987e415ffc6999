"""Debugging aids: `detect_anomaly()` (the first NaN/Inf in forward or backward, with your source line) and
`grad_report(model)` (gradient norms, update ratios, dead ReLUs, parameters without gradient).

>>> from rtxviz.debug import detect_anomaly, grad_report
"""

from __future__ import annotations

from .anomaly import AnomalyError, AnomalyHook, Site, detect_anomaly
from .report import GradReport, ParamRow, ReluMonitor, ReluStat, Snapshot, grad_report, relu_monitor, snapshot

__all__ = [
    "AnomalyError", "AnomalyHook", "GradReport", "ParamRow", "ReluMonitor", "ReluStat", "Site", "Snapshot",
    "detect_anomaly", "grad_report", "relu_monitor", "snapshot",
]
