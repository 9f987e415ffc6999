"""The server under faults (issue 17, points 6, 9, 10): TCP_NODELAY on accepted connections, a bound on half-sent
requests (slowloris), a full disk answered 507 with the reason, a damaged database 503, and a viewer that goes away
leaving no "Task exception was never retrieved" behind.
"""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import threading
import time
from typing import Any

import pytest
import uvicorn
from fastapi.testclient import TestClient

from rtxviz.cli.serve import bind_socket, uvicorn_config
from rtxviz.web import create_app
from rtxviz.web.hub import Hub

pytestmark = pytest.mark.timeout(120)
NDJSON = {"Content-Type": "application/x-ndjson"}


class SocketServer:
    """The server as `rtxviz serve` runs it: our listening socket, our uvicorn configuration, in a thread."""

    def __init__(self, app: Any, sock: socket.socket, **config: Any) -> None:
        self.sock = sock
        self.server = uvicorn.Server(uvicorn_config(app, log_level="error", **config))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)

    def __enter__(self) -> SocketServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "uvicorn did not start"
            time.sleep(0.01)
        self.port = self.sock.getsockname()[1]
        return self

    def accepted(self) -> list[socket.socket]:
        """The server side of every open connection."""
        return [p.transport.get_extra_info("socket") for p in list(self.server.server_state.connections)]

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def request(port: int, conn: socket.socket | None = None) -> tuple[socket.socket, bytes]:
    s = conn or socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        chunk = s.recv(65536)
        assert chunk, data
        data += chunk
    return s, data


def test_accepted_connections_have_tcp_nodelay():
    # issue 17.6: the listening socket was made with proto 0, so asyncio never set TCP_NODELAY on accepted ones,
    # and each keep-alive request waited ~40 ms (Nagle against delayed ACK). The option itself is what is tested.
    with SocketServer(create_app(db=":memory:"), bind_socket("127.0.0.1", 0)) as srv:
        conn, reply = request(srv.port)
        request(srv.port, conn)  # a second request on the same keep-alive connection
        assert b"200 OK" in reply
        (accepted,) = srv.accepted()
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        conn.close()


def test_without_ipproto_tcp_asyncio_leaves_nagle_on():
    # the cause, shown: the same server on a socket made as before (proto 0) gets no TCP_NODELAY
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    with SocketServer(create_app(db=":memory:"), sock) as srv:
        conn, _ = request(srv.port)
        (accepted,) = srv.accepted()
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
        conn.close()


def closed_within(s: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed `s` (None if it was still open after `seconds`)."""
    start = time.monotonic()
    s.settimeout(seconds)
    try:
        while s.recv(65536):
            pass
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return time.monotonic() - start


@pytest.mark.parametrize("half", [
    b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n",                                   # headers never end
    b"POST /api/runs/r/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-ndjson\r\n"
    b"Content-Length: 1000\r\n\r\n{\"v\": 1,",                                             # the body never ends
])
def test_a_half_sent_request_is_closed_within_the_bound(half):
    # issue 17.10: a slowloris connection was never closed
    with SocketServer(create_app(db=":memory:"), bind_socket("127.0.0.1", 0), request_timeout=0.5) as srv:
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(half)
        time.sleep(0.2)
        s.sendall(b"X-Trickle: 1")  # still trickling: does not reset the bound
        took = closed_within(s, 10)
        assert took is not None and took < 5, "the half-sent request was not closed within 5 s"
        # a well-behaved keep-alive client is unaffected: requests, a pause shorter than the bound, requests
        conn, reply = request(srv.port)
        time.sleep(0.3)
        _, again = request(srv.port, conn)
        assert b"200 OK" in reply and b"200 OK" in again
        conn.close()


def test_a_slow_answer_is_not_cut_by_the_request_bound(tmp_path):
    # the bound is on the request arriving; once it is in, the app takes the time it needs
    async def app(scope: dict, receive: Any, send: Any) -> None:  # an app that takes 1 s to answer
        if scope["type"] != "http":
            return
        await asyncio.sleep(1.0)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"11")]})
        await send({"type": "http.response.body", "body": b'{"ok":true}'})

    with SocketServer(app, bind_socket("127.0.0.1", 0), request_timeout=0.3) as srv:
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(f"GET /api/slow HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n\r\n".encode())
        s.settimeout(10)
        data = b""
        while not data.endswith(b"}"):
            chunk = s.recv(65536)
            assert chunk, data
            data += chunk
        assert b"200 OK" in data
        s.close()


def test_a_request_trickled_after_a_response_is_closed_within_the_bound():
    # the bound starts again after each response: a keep-alive client that answers one request honestly and then
    # trickles the next is cut off too
    with SocketServer(create_app(db=":memory:"), bind_socket("127.0.0.1", 0), request_timeout=0.5) as srv:
        s, reply = request(srv.port)
        assert b"200 OK" in reply
        s.sendall(b"GET /api/health HTTP/1.1\r\n")
        time.sleep(0.2)
        s.sendall(b"Host: 127.0.0.1\r\n")
        took = closed_within(s, 10)
        assert took is not None and took < 5, "the trickled second request was not closed within 5 s"


def test_pipelined_requests_are_all_answered_however_long_the_app_takes():
    # two requests in one write: both have arrived, so neither answer is cut by the bound, however slow
    async def app(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await asyncio.sleep(0.6)
        body = json.dumps({"path": scope["path"]}).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    with SocketServer(app, bind_socket("127.0.0.1", 0), request_timeout=0.3) as srv:
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(b"".join(f"GET /{p} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode() for p in ("one", "two")))
        s.settimeout(10)
        data = b""
        while data.count(b"}") < 2:
            chunk = s.recv(65536)
            assert chunk, data
            data += chunk
        assert data.count(b"200 OK") == 2 and b'"/one"' in data and b'"/two"' in data
        s.close()


def test_a_full_disk_is_507_with_the_reason_and_recovers(tmp_path):
    # issue 17.9: a full disk answered 500 with no reason (the log said "cannot rollback")
    with TestClient(create_app(db=str(tmp_path / "runs.db"))) as client:
        line = json.dumps({"v": 1, "kind": "my.tool", "t": 1.0, "step": None, "pad": "x" * 2000})
        assert client.post("/api/runs/r/events", content=line, headers=NDJSON).status_code == 200
        store = client.app.state.store
        pages = store._w.execute("PRAGMA page_count").fetchone()[0]
        store._w.execute(f"PRAGMA max_page_count = {pages + 4}")
        body = "\n".join([line] * 50)
        r = None
        for _ in range(50):
            r = client.post("/api/runs/r/events", content=body, headers=NDJSON)
            if r.status_code != 200:
                break
        assert r is not None and r.status_code == 507, r.text
        assert "full" in r.json()["detail"] and str(tmp_path / "runs.db") in r.json()["detail"]
        last = client.get("/api/runs/r").json()["n_events"]
        store._w.execute("PRAGMA max_page_count = 1073741823")
        r = client.post("/api/runs/r/events", content=line, headers=NDJSON)
        assert r.status_code == 200 and r.json()["first_seq"] == last + 1


def test_a_damaged_database_is_503_with_the_reason(tmp_path):
    import os

    from rtxviz.store import SQLiteStore

    path = tmp_path / "runs.db"
    s = SQLiteStore(str(path))
    for i in range(40):
        s.append(f"r{i % 4}", None, [("my.tool", None, json.dumps({"v": 1, "kind": "my.tool", "t": 1.0,
                                                                     "pad": "x" * 1000}))] * 20)
    s._w.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    s.close()
    with TestClient(create_app(db=str(path))) as client:
        size = path.stat().st_size
        with open(path, "r+b") as f:
            f.seek(size // 2)
            f.write(os.urandom(size // 2 - 8192))
        codes = {client.get(f"/api/runs/r{i}/events", params={"limit": 10_000}).status_code for i in range(4)}
        assert 503 in codes and 500 not in codes
        r = client.post("/api/runs/r0/events", content='{"v": 1, "kind": "my.tool", "t": 1.0, "step": null}',
                        headers=NDJSON)
        assert r.status_code == 503 and "damaged" in r.json()["detail"] and str(path) in r.json()["detail"]


class _GoneSocket:
    """A WebSocket whose peer has gone: receive() reports the disconnect; a send in progress, when cancelled,
    fails the way a transport that has lost its peer does (an error instead of the cancellation)."""

    def __init__(self) -> None:
        self.sending = asyncio.Event()
        self.sent = 0

    async def send_text(self, text: str) -> None:
        self.sent += 1
        if self.sent == 1:
            return  # the hello goes out; the first batch of events is in progress when the peer goes
        self.sending.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise RuntimeError("the peer went away mid-send") from None

    async def receive(self) -> dict:
        await self.sending.wait()
        return {"type": "websocket.disconnect", "code": 1006}

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        pass


def test_a_viewer_that_goes_away_leaves_no_unretrieved_task_exception():
    # issue 17.10: the hub logged "Task exception was never retrieved" when a viewer disconnected
    from rtxviz.store import SQLiteStore

    reports: list[str] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: reports.append(ctx["message"]))
        store = SQLiteStore(":memory:")
        store.append("r", None, [("my.tool", None, '{"v":1,"kind":"my.tool","t":1.0}')])
        hub = Hub(store)
        await hub.serve_run(_GoneSocket(), "r", 0, {"id": "r"})  # type: ignore[arg-type]
        assert hub.client_count == 0
        gc.collect()
        await asyncio.sleep(0)

    # a thread of its own: another test may have left an event loop running on this one (asyncio.run refuses then)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # surfaced below, in the test's thread
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    assert not errors, errors
    gc.collect()
    assert not [m for m in reports if "never retrieved" in m], reports


def test_a_websocket_outlives_the_request_bound():
    # the bound is on the upgrade request arriving; the WebSocket that follows lives as long as it is used
    from websockets.sync.client import connect

    app = create_app(db=":memory:")
    with SocketServer(app, bind_socket("127.0.0.1", 0), request_timeout=0.3) as srv:
        with connect(f"ws://127.0.0.1:{srv.port}/api/runs/r/ws", compression=None) as ws:
            assert json.loads(ws.recv(timeout=10))["type"] == "hello"
            time.sleep(1.0)  # past the bound
            line = json.dumps({"v": 1, "kind": "my.tool", "t": 1.0, "step": None})
            s, _ = request(srv.port)  # a keep-alive connection for the post
            s.sendall(f"POST /api/runs/r/events HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nContent-Type: "
                      f"application/x-ndjson\r\nContent-Length: {len(line)}\r\n\r\n{line}".encode())
            msg = json.loads(ws.recv(timeout=10))
            assert msg["type"] == "events" and msg["events"][0]["kind"] == "my.tool"
            s.close()
