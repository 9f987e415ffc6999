"""Fixtures for the notebook widget's tests: the widget's comm, recorded (the comm package's seam that ipykernel
fills in a kernel), so the Python side is tested message by message without a kernel or a browser; and one real
JupyterLab for the whole session (it takes ~30 s to start on a loaded 2-core machine): each end-to-end test
writes its notebook into its folder."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm

pytest.importorskip("anywidget", reason="the notebook extra (pip install -e '.[dev]') is not installed")


class RecordingComm(BaseComm):
    """A comm that keeps every message the kernel side publishes, as ipykernel's would put them on IOPub.
    `block` (a threading.Event) makes custom messages wait until it is set: a channel that does not move."""

    block: threading.Event | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.messages: list[tuple[str, dict, list[bytes]]] = []
        super().__init__(*args, **kwargs)

    def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None,
                    **keys: Any) -> None:
        if self.block is not None and msg_type == "comm_msg" and (data or {}).get("method") == "custom":
            self.block.wait()
        self.messages.append((msg_type, data or {}, [bytes(b) for b in (buffers or [])]))

    # what the front end receives -------------------------------------------------------------------------------
    def batches(self) -> list[tuple[dict, list[dict]]]:
        """The custom `events` messages: (content, the events of its NDJSON buffer)."""
        out = []
        for kind, data, buffers in self.messages:
            if kind == "comm_msg" and data.get("method") == "custom" and data["content"].get("kind") == "events":
                out.append((data["content"], [json.loads(line) for line in buffers[0].split(b"\n") if line]))
        return out

    def state_updates(self, key: str) -> list[Any]:
        """The values of traitlet `key` the kernel synced to the front end, in order."""
        return [data["state"][key] for kind, data, _ in self.messages
                if kind == "comm_msg" and data.get("method") == "update" and key in data.get("state", {})]


@pytest.fixture
def comms(monkeypatch: pytest.MonkeyPatch) -> list[RecordingComm]:
    """Every comm the widgets open during the test, in order."""
    made: list[RecordingComm] = []

    def create(*args: Any, **kwargs: Any) -> RecordingComm:
        c = RecordingComm(*args, **kwargs)
        made.append(c)
        return c

    monkeypatch.setattr(comm, "create_comm", create)
    return made


WIDGET_JS = Path(__file__).resolve().parents[2] / "rtxviz" / "notebook" / "static" / "widget.js"


@pytest.fixture(scope="session")
def jupyterlab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One JupyterLab (tests/notebook/jupyterlab_server.py) serving a session folder, `server.root`."""
    from ..browser.shared_browser import missing
    from .jupyterlab_server import JupyterLab

    reason = missing() or (None if WIDGET_JS.is_file() else f"{WIDGET_JS} not built: run `make setup`")
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("lab") / "notebooks"
    root.mkdir()
    server = JupyterLab(root).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """The shared headless Chromium (tests/browser/shared_browser.py), held for a module's tests."""
    from ..browser.shared_browser import acquire, release

    b = acquire()
    try:
        yield b
    finally:
        release()
