"""Sharing a run: one self-contained HTML file, a JSON-lines file `rtxviz serve` can import, a Chrome trace.

>>> from rtxviz.export import chrome_trace, write_jsonl, export_html, trace_recorder
"""

from __future__ import annotations

from .html import CONTRACT, ExportError, app_is_built, build_html, embed_json, export_html
from .jsonl import encode_event, import_jsonl, import_jsonl_to_db, read_jsonl, write_jsonl
from .source import RunNotFound, events_from_db, events_from_server, events_from_store
from .trace import TraceRecorder, chrome_trace, trace_recorder, write_trace

__all__ = [
    "CONTRACT", "ExportError", "RunNotFound", "TraceRecorder", "app_is_built", "build_html", "chrome_trace",
    "embed_json", "encode_event", "events_from_db", "events_from_server", "events_from_store", "export_html",
    "import_jsonl", "import_jsonl_to_db", "read_jsonl", "trace_recorder", "write_jsonl", "write_trace",
]
