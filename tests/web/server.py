"""A real uvicorn server on a free loopback port in a thread (VIZ_ANCHORS §4.1), for tests and benchmarks."""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn


class ThreadServer:
    """`with ThreadServer(app) as url:` serves `app` on 127.0.0.1:<free port> until the block ends."""

    def __init__(self, app: Any) -> None:
        self.config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", ws="websockets-sansio",
                                     ws_per_message_deflate=False, lifespan="on")
        self.server = uvicorn.Server(self.config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30  # a loaded 2-core CI machine can take seconds
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
