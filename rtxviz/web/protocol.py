"""The HTTP protocol the server runs: uvicorn's httptools protocol with a bound on how long one request may take to
arrive.

httptools (llhttp, in C) rather than uvicorn's pure-Python h11: it parses the request line, headers and body
chunks without building a Python event object per chunk, about 1 us an event less on the ingest bench's
2,000-event posts (benchmarks/README.md, fifth session).

uvicorn closes a keep-alive connection that stays idle (``timeout_keep_alive``), but not one that has sent part of
a request and then nothing more: a client that trickles header bytes (slowloris) holds its connection, and a
file descriptor, forever. `RequestTimeoutHttpTools` arms a timer when a connection opens, after every response and
when a request begins with no timer running; the timer stops once a whole request (headers and body) has arrived,
and if it fires first the connection is closed.

>>> cls = with_request_timeout(2.5)
>>> cls.request_timeout, issubclass(cls, RequestTimeoutHttpTools)
(2.5, True)
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

#: Seconds a client has to send a whole request (headers and body) once its connection is open or its previous
#: response went out. Ingest bodies are at most 16 MiB: on loopback they arrive in milliseconds.
DEFAULT_REQUEST_TIMEOUT = 30.0


class RequestTimeoutHttpTools(HttpToolsProtocol):
    """HttpToolsProtocol that closes a connection whose request is still incomplete `request_timeout` seconds after
    the connection opened, the previous response completed, or the request began."""

    request_timeout: float = DEFAULT_REQUEST_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._request_timer: asyncio.TimerHandle | None = None
        # requests fully arrived whose response has not completed yet: the app is answering (several when pipelined)
        self._requests_in = 0
        super().connection_made(transport)
        self._arm_request_timer()

    def _arm_request_timer(self) -> None:
        if self._request_timer is not None:
            self._request_timer.cancel()
        self._request_timer = self.loop.call_later(self.request_timeout, self._request_timed_out)

    def _disarm_request_timer(self) -> None:
        if self._request_timer is not None:
            self._request_timer.cancel()
            self._request_timer = None

    def _request_timed_out(self) -> None:
        self._request_timer = None
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            return  # closed already, or handed over to a WebSocket protocol
        if self._requests_in:
            return  # the request is in; the app is answering it (the timer starts again once it has)
        self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._request_timer is None:  # a request after one the app is still answering (pipelined)
            self._arm_request_timer()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._requests_in += 1
        self._disarm_request_timer()  # the whole request has arrived

    def on_response_complete(self) -> None:
        self._requests_in = max(0, self._requests_in - 1)
        super().on_response_complete()
        if not self.transport.is_closing() and not self._requests_in:
            self._arm_request_timer()  # the clock starts again for the next request on this connection

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_request_timer()
        super().connection_lost(exc)


def with_request_timeout(seconds: float) -> type[RequestTimeoutHttpTools]:
    """A `RequestTimeoutHttpTools` subclass with its own bound (uvicorn takes a protocol class: ``http=...``)."""
    if not seconds > 0:
        raise ValueError(f"request timeout must be > 0 seconds, got {seconds}")
    attrs: dict[str, Any] = {"request_timeout": float(seconds)}
    return type("RequestTimeoutHttpTools", (RequestTimeoutHttpTools,), attrs)
