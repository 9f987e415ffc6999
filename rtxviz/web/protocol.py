"""The HTTP protocol the server runs: uvicorn's h11 protocol with a bound on how long one request may take to arrive.

uvicorn closes a keep-alive connection that stays idle (``timeout_keep_alive``), but not one that has sent part of
a request and then nothing more: a client that trickles header bytes (slowloris) holds its connection, and a
file descriptor, forever. `RequestTimeoutH11` arms a timer when a connection opens and after every response; if
the next request has not fully arrived (headers and body) when it fires, the connection is closed.

>>> cls = with_request_timeout(2.5)
>>> cls.request_timeout, issubclass(cls, RequestTimeoutH11)
(2.5, True)
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

#: Seconds a client has to send a whole request (headers and body) once its connection is open or its previous
#: response went out. Ingest bodies are at most 16 MiB: on loopback they arrive in milliseconds.
DEFAULT_REQUEST_TIMEOUT = 30.0


class RequestTimeoutH11(H11Protocol):
    """H11Protocol that closes a connection whose request is still incomplete `request_timeout` seconds after the
    connection opened or the previous response completed."""

    request_timeout: float = DEFAULT_REQUEST_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._request_timer: asyncio.TimerHandle | None = None
        self._arm_request_timer()

    def _arm_request_timer(self) -> None:
        timer = getattr(self, "_request_timer", None)
        if timer is not None:
            timer.cancel()
        self._request_timer = self.loop.call_later(self.request_timeout, self._request_timed_out)

    def _disarm_request_timer(self) -> None:
        timer = getattr(self, "_request_timer", None)
        if timer is not None:
            timer.cancel()
            self._request_timer = None

    def _request_timed_out(self) -> None:
        self._request_timer = None
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            return  # closed already, or handed over to a WebSocket protocol
        if self.conn.their_state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.SWITCHED_PROTOCOL):
            return  # the request is in; the app is answering it
        self.transport.close()

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state in (h11.DONE, h11.SWITCHED_PROTOCOL):
            self._disarm_request_timer()  # the whole request has arrived

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_request_timer()  # the clock starts again for the next request on this connection

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_request_timer()
        super().connection_lost(exc)


def with_request_timeout(seconds: float) -> type[RequestTimeoutH11]:
    """A `RequestTimeoutH11` subclass with its own bound (uvicorn takes a protocol class: ``Config(http=...)``)."""
    if not seconds > 0:
        raise ValueError(f"request timeout must be > 0 seconds, got {seconds}")
    attrs: dict[str, Any] = {"request_timeout": float(seconds)}
    return type("RequestTimeoutH11", (RequestTimeoutH11,), attrs)
