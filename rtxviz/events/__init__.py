"""The event stream: the schema (shared with the server), the engine hook, and the emitter (`watch`).

>>> import rtxviz.events as events
>>> events.SCHEMA_VERSION
1
"""

from __future__ import annotations

from ..schema import SCHEMA_VERSION, EventError, validate_event
from .emitter import HttpTransport, MemoryTransport, Run, current_run, step, watch
from .hook import EventHook
from .report import optimizer_step, report_gradcheck, report_optimizer_step

__all__ = [
    "SCHEMA_VERSION", "EventError", "EventHook", "HttpTransport", "MemoryTransport", "Run", "current_run",
    "optimizer_step", "report_gradcheck", "report_optimizer_step", "step", "validate_event", "watch",
]
