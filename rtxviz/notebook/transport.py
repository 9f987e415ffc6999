"""The emitter's transport for a notebook: batches go over the widget's own comm instead of HTTP.

`watch(transport=WidgetTransport(channel))` reuses the emitter whole (rtxviz/events/emitter.py): the training
thread only encodes and queues (a full queue drops and counts), the sender thread batches every `flush_interval`
and calls `send`. Here `send` hands the batch to `channel(content, buffers)` (the widget's `send`: a comm message
on the kernel's IOPub socket, which never waits for the browser), so a front end that is slow, hidden or absent
never stalls training. What stays in memory is bounded: the emitter's queue, and the `Snapshot` of the last
step's events kept for notebooks saved with their widget state.

A batch is one comm message: ``{"kind": "events", "first_seq": n, "count": k, "dropped": d}`` with the events as
one NDJSON buffer (the bytes the emitter already encoded; no second encoding). Events are numbered in the order
they were queued, from 1, as the server numbers them, so the view can resume and skip what it already holds.

>>> sent = []
>>> t = WidgetTransport(lambda content, buffers: sent.append((content, buffers)))
>>> t.send(None, [b'{"kind":"run_start"}', b'{"kind":"node"}'], 0)
>>> sent[0][0]["first_seq"], sent[0][0]["count"], sent[0][1][0].count(b"\\n")
(1, 2, 1)
>>> t.send(None, [b'{"kind":"grad"}'], 0)
>>> sent[1][0]["first_seq"]
3
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

#: `channel(content, buffers)`: sends one message to the front end (the widget's `send`).
Channel = Callable[[dict, list[bytes]], None]

_STEP_BEGIN = b'"kind":"step_begin"'
_UNSAMPLED = b'"sampled":false'  # a step that `sample_every` skips records nothing: the last graph stays
_RUN_START = b'"kind":"run_start"'
_LEAF = b'"kind":"leaf"'
_PARAM = b'"param":true'


class Snapshot:
    """The events that draw the last graph: the run's start, the leaves (a leaf is announced once, in the step
    that first used it), then everything since the newest recorded step began (steps that `sample_every` skips
    do not count). Bounded: parameters are kept (as many as the model has); other leaves, oldest first, beyond
    `max_events // 4`; and the step's events beyond `max_events` are left out and counted in `truncated`.

    The widget keeps it in a synced traitlet, so a saved notebook, or one converted to HTML, draws its last graph
    with no kernel.

    >>> s = Snapshot(max_events=2)
    >>> lines = [b'{"kind":"run_start"}', b'{"kind":"leaf","param":true}', b'{"kind":"step_begin"}',
    ...          b'{"kind":"node"}', b'{"kind":"step_begin"}', b'{"kind":"node"}', b'{"kind":"grad"}']
    >>> for i, line in enumerate(lines):
    ...     s.add(i + 1, line)
    >>> [seq for seq, _ in s.events()], s.truncated
    ([1, 2, 5, 6], 1)
    """

    def __init__(self, max_events: int = 20_000) -> None:
        if max_events < 1:
            raise ValueError(f"notebook Snapshot: max_events must be >= 1, got {max_events}")
        self.max_events = max_events
        self.head: list[tuple[int, bytes]] = []   # run_start
        self.params: list[tuple[int, bytes]] = []
        self.leaves: deque[tuple[int, bytes]] = deque(maxlen=max(1, max_events // 4))
        self.step: list[tuple[int, bytes]] = []   # since the newest recorded step_begin
        self.truncated = 0
        self.version = 0

    def add(self, seq: int, line: bytes) -> None:
        self.version += 1
        if _RUN_START in line:
            self.head = [(seq, line)]
            return
        if _LEAF in line:
            (self.params if _PARAM in line else self.leaves).append((seq, line))
            return
        if _STEP_BEGIN in line and _UNSAMPLED not in line:
            self.step = []
            self.truncated = 0
        if len(self.step) >= self.max_events:
            self.truncated += 1
            return
        self.step.append((seq, line))

    def events(self) -> list[tuple[int, bytes]]:
        """In the order they were sent (by seq)."""
        return sorted(self.head + self.params + list(self.leaves) + self.step)

    def to_json(self) -> str:
        """``{"seqs": [...], "ndjson": "..."}``: compact (the events as the emitter encoded them, one a line)."""
        evs = self.events()
        return json.dumps({"seqs": [s for s, _ in evs], "truncated": self.truncated,
                           "ndjson": b"\n".join(line for _, line in evs).decode("utf-8")}, separators=(",", ":"))


class WidgetTransport:
    """An emitter `Transport` (rtxviz.events.emitter) that sends each batch over `channel`.

    `on_snapshot(json_text)` receives the snapshot at most every `snapshot_interval` seconds while events flow
    and once when the run closes (the widget stores it in its synced `snapshot` traitlet)."""

    def __init__(self, channel: Channel, on_snapshot: Callable[[str], None] | None = None,
                 snapshot_interval: float = 1.0, snapshot_max_events: int = 20_000) -> None:
        self.channel = channel
        self.on_snapshot = on_snapshot
        self.snapshot = Snapshot(snapshot_max_events)
        self.snapshot_interval = snapshot_interval
        self.next_seq = 1
        self.batches = 0
        self._last_snapshot = 0.0
        self._snapshot_version = 0
        self._lock = threading.Lock()

    def send(self, run: Any, lines: list[bytes], dropped: int) -> None:
        """Send one batch (raises if the channel does; the emitter then counts the batch as dropped)."""
        with self._lock:
            first = self.next_seq
            # `sent`: when the batch left the kernel (time.time(), the events' clock): the front end splits the
            # draw latency at it (benchmarks/bench_notebook.py)
            self.channel({"kind": "events", "first_seq": first, "count": len(lines), "dropped": dropped,
                          "sent": time.time()}, [b"\n".join(lines)])
            self.next_seq = first + len(lines)
            self.batches += 1
            add = self.snapshot.add
            for i, line in enumerate(lines):
                add(first + i, line)
            now = time.monotonic()
            if now - self._last_snapshot >= self.snapshot_interval:
                self._push_snapshot(now)

    def _push_snapshot(self, now: float) -> None:
        if self.on_snapshot is None or self.snapshot.version == self._snapshot_version:
            return
        self._last_snapshot = now
        self._snapshot_version = self.snapshot.version
        self.on_snapshot(self.snapshot.to_json())

    def close(self) -> None:
        """The run ended (the emitter's sender is done): the final snapshot goes to the widget."""
        with self._lock:
            self._push_snapshot(time.monotonic())
