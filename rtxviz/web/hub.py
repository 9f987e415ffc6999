"""The hub: relays a run's events to every WebSocket watching it, each client with its own bounded queue.

Ingest calls `publish(run_id, first_seq, texts)` (never awaits a socket). Every client has an `asyncio.Queue` of
batches and one sender task. When a client's queue is full the oldest batch is dropped; the sender notices the
gap in sequence numbers and fills it from the store before sending the next live batch, so every client sees
every event, in order, exactly once, at its own pace, and a stalled tab stalls only itself (measured in
research/VIZ_ANCHORS.md §4.1: a loop of awaited sends lets one stuck socket starve all of them).

Messages (JSON text frames), all carrying ``"type"``:
- ``hello``: ``{"type": "hello", "v": 1, "run": {...}, "last_seq": N}`` once, on connect;
- ``events``: ``{"type": "events", "run_id": ..., "first_seq": N, "replay": bool, "events": [ ... ]}``; a live
  part of a larger batch (stored in parts: routers/ingest.py) also has ``"until": M``, the seq the batch ends at,
  so that a page can wait for the rest (committed right behind) before it draws;
- ``runs``: on the lobby socket, ``{"type": "runs", "run": {...}}`` when a run appears or changes (a lobby client
  that watches one owner's runs, a student's, gets only those).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from ..store import Notifying, RunStore

log = logging.getLogger("rtxviz.web")


class _Client:
    __slots__ = ("ws", "run_id", "queue", "next_seq", "dropped_batches", "owner")

    def __init__(self, ws: WebSocket, run_id: str | None, maxsize: int, next_seq: int) -> None:
        self.ws = ws
        #: a lobby client's filter: only runs of this owner (a student's lobby); None: every run
        self.owner: str | None = None
        self.run_id = run_id
        self.queue: asyncio.Queue = asyncio.Queue(maxsize)
        self.next_seq = next_seq
        self.dropped_batches = 0


class Hub:
    """Per-run sets of clients. Lives on the server's event loop: call `publish` from that loop only."""

    def __init__(self, store: RunStore, max_clients: int = 64, queue_batches: int = 64, replay_chunk: int = 2000,
                 send_timeout: float = 30.0) -> None:
        self.store = store
        self.max_clients, self.queue_batches = max_clients, queue_batches
        self.replay_chunk, self.send_timeout = replay_chunk, send_timeout
        self._runs: dict[str, set[_Client]] = {}
        self._lobby: set[_Client] = set()
        self._count = 0
        # a store that several server processes write (Notifying) may have viewers of a run in the others
        self._sees_every_viewer = not isinstance(store, Notifying)

    @property
    def client_count(self) -> int:
        return self._count

    def viewers(self, run_id: str) -> int | None:
        """How many pages stream run `run_id` (the lobby's are not counted: it shows runs as they start and end,
        not their events); None when other server processes may hold some."""
        return len(self._runs.get(run_id, ())) if self._sees_every_viewer else None

    # -- producers (ingest) ----------------------------------------------------------------------------------
    def publish(self, run_id: str, first_seq: int, texts: list[str], until: int | None = None) -> None:
        """Hand a committed batch to every client of the run; never blocks. `until`: the seq the post it is part
        of ends at (more of it follows when that is past the batch's last seq)."""
        clients = self._runs.get(run_id)
        if not clients:
            return
        # one shared message per batch: the first client to send it builds it, the others reuse the same string
        more = until if until is not None and until >= first_seq + len(texts) else None
        item = (first_seq, texts, [None, "" if more is None else f',"until":{more}'])
        for c in clients:
            _offer(c, item)

    def notified(self, run_id: str, first: int, last: int) -> None:
        """Another server process committed seqs `first`..`last` of the run (a PostgreSQL notification): every
        client of the run reads what it has not sent yet from the store, in order with the live batches (a range
        it already has is skipped). Never blocks; call it from the loop."""
        clients = self._runs.get(run_id)
        if not clients:
            return
        item = (first, None, last)  # no texts: the sender fetches them from the store
        for c in clients:
            _offer(c, item)

    def resync(self) -> None:
        """Announcements of other processes' ranges may have been missed (the store's listening connection was
        lost): every client reads whatever its run has that it has not sent yet from the store."""
        for run_id in list(self._runs):
            self.notified(run_id, 1, 2**63 - 1)

    def publish_run(self, run: dict[str, Any]) -> None:
        """Tell lobby clients that a run appeared or changed (those that watch one owner: only of that owner's)."""
        if not self._lobby:
            return
        item = (0, json.dumps({"type": "runs", "run": run}), None)
        owner = run.get("owner")
        for c in self._lobby:
            if c.owner is None or c.owner == owner:
                _offer(c, item)

    # -- consumers (WebSockets) --------------------------------------------------------------------------------
    async def serve_run(self, ws: WebSocket, run_id: str, after: int, run: dict[str, Any]) -> None:
        """Stream run `run_id` to `ws` from seq `after + 1` on: first from the store, then live."""
        client = _Client(ws, run_id, self.queue_batches, after + 1)
        if not await self._admit(ws, client):
            return
        self._runs.setdefault(run_id, set()).add(client)
        try:
            # off the loop: a store that several processes write asks its database (base.py)
            last = await asyncio.to_thread(self.store.last_seq, run_id)
            await ws.send_text(json.dumps({"type": "hello", "v": 1, "run": run, "last_seq": last}))
            await self._run_client(client, self._send_events)
        finally:
            self._forget(client, self._runs.get(run_id))
            if run_id in self._runs and not self._runs[run_id]:
                del self._runs[run_id]

    async def serve_lobby(self, ws: WebSocket, runs: list[dict[str, Any]], owner: str | None = None) -> None:
        """Send `runs`, then every run that appears or changes (only `owner`'s runs when given)."""
        client = _Client(ws, None, self.queue_batches, 0)
        client.owner = owner
        if not await self._admit(ws, client):
            return
        self._lobby.add(client)
        try:
            await ws.send_text(json.dumps({"type": "hello", "v": 1, "runs": runs}))
            await self._run_client(client, self._send_lobby)
        finally:
            self._forget(client, self._lobby)

    async def _admit(self, ws: WebSocket, client: _Client) -> bool:
        if self._count >= self.max_clients:
            await ws.close(code=1013, reason=f"too many viewers (max {self.max_clients})")
            return False
        self._count += 1
        return True

    def _forget(self, client: _Client, group: set | None) -> None:
        self._count -= 1
        if group is not None:
            group.discard(client)

    async def _run_client(self, client: _Client, sender: Callable) -> None:
        """Run the client's sender until it fails or the client goes away (we never read app messages, but
        reading is how a closed socket is noticed)."""
        send_task = asyncio.ensure_future(sender(client))
        try:
            await _drain_incoming(client.ws, send_task)
        finally:
            stopped_by_itself = send_task.done()
            send_task.cancel()
            # a send interrupted by the cancel can still end in an exception (the peer is gone): take it when the
            # task ends, or asyncio logs "Task exception was never retrieved" when the task is collected
            send_task.add_done_callback(_take_outcome)
        if stopped_by_itself:
            exc = send_task.exception() if not send_task.cancelled() else None
            if exc is not None and not isinstance(exc, WebSocketDisconnect | ConnectionError | TimeoutError):
                log.warning("rtxviz hub: client failed: %r", exc)
            try:  # the sender gave up (too slow, or failed): tell the peer
                await client.ws.close(code=1011 if exc is not None else 1000)
            except Exception:  # the peer is already gone
                pass

    async def _send(self, client: _Client, text: str) -> None:
        # a peer that reads nothing for send_timeout seconds is cut off rather than held forever. asyncio.timeout,
        # not wait_for: wait_for runs the send as a task of its own, and when it is cancelled it waits for that task
        # without taking its exception (a send interrupted because the peer left), which asyncio then logs as
        # "Task exception was never retrieved"
        async with asyncio.timeout(self.send_timeout):
            await client.ws.send_text(text)

    async def _send_events(self, client: _Client) -> None:
        run_id = client.run_id
        head = f'{{"type":"events","run_id":{json.dumps(run_id)},"first_seq":'
        await self._replay(client, head, upto=None)
        queue = client.queue
        while True:
            first, texts, shared = await queue.get()
            if texts is None:  # a range another process stored (`notified`): `shared` is its last seq
                if shared >= client.next_seq:
                    await self._replay(client, head, upto=shared)
                continue
            end = first + len(texts)
            if end <= client.next_seq:
                continue  # already sent (from the store)
            if first > client.next_seq:  # a gap: batches were dropped for this client, or published late
                await self._replay(client, head, upto=first - 1)
            skip = client.next_seq - first
            if skip > 0:  # partly sent from the store: this client needs its own, shorter message
                msg = f'{head}{first + skip},"replay":false{shared[1]},"events":[{",".join(texts[skip:])}]}}'
            else:
                msg = shared[0]
                if msg is None:
                    msg = shared[0] = f'{head}{first},"replay":false{shared[1]},"events":[{",".join(texts)}]}}'
            await self._send(client, msg)
            client.next_seq = end

    async def _replay(self, client: _Client, head: str, upto: int | None) -> None:
        """Send events from the store, from client.next_seq up to `upto` (None: everything stored now)."""
        store = self.store
        run_id = client.run_id
        if run_id is None:  # a lobby client: it has no events to replay
            return
        while True:
            rows = await asyncio.to_thread(store.events, run_id, client.next_seq - 1, self.replay_chunk,
                                           None, None, upto)
            if not rows:
                return
            first = rows[0][0]
            await self._send(client, f'{head}{first},"replay":true,"events":[{",".join(r[1] for r in rows)}]}}')
            client.next_seq = rows[-1][0] + 1
            if len(rows) < self.replay_chunk:
                return

    async def _send_lobby(self, client: _Client) -> None:
        while True:
            _, text, _ = await client.queue.get()
            await self._send(client, text)


def _take_outcome(task: asyncio.Future) -> None:
    if not task.cancelled():
        task.exception()


def _offer(client: _Client, item: Any) -> None:
    q = client.queue
    if q.full():
        try:
            q.get_nowait()  # drop the oldest; the sender refills the gap from the store
        except asyncio.QueueEmpty:
            pass
        client.dropped_batches += 1
    q.put_nowait(item)


async def _drain_incoming(ws: WebSocket, sender: asyncio.Future) -> None:
    """Read (and ignore) what the peer sends until it disconnects or the sender stops."""
    receive = asyncio.ensure_future(ws.receive())
    try:
        while True:
            await asyncio.wait({receive, sender}, return_when=asyncio.FIRST_COMPLETED)
            if sender.done():
                return
            if receive.result()["type"] == "websocket.disconnect":
                return
            receive = asyncio.ensure_future(ws.receive())
    finally:
        receive.cancel()
        receive.add_done_callback(_take_outcome)
