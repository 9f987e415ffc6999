"""The rtxviz server: FastAPI app (ingest, REST, WebSocket, static files), per-client hub; runs kept by rtxviz.store.

>>> from rtxviz.web import create_app
>>> app = create_app(db=":memory:")
>>> app.title
'rtxviz'
"""

from __future__ import annotations

from .app import Settings, create_app

__all__ = ["Settings", "create_app"]
