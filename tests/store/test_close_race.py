"""Closing the SQLite store while a reader is inside a query (the server stopping while a viewer's replay reads in
a worker thread) waits for that query, and a query after the close is refused with a reason: before, `close()`
closed the reader connection under the writer's lock only, and the query in flight crashed the process
(segmentation fault in sqlite3, seen in tests/web/test_api.py::test_token_required_everywhere).

The race runs in a child process: a crash there is an exit status here, not the end of the test session."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rtxviz.store import StoreUnavailable
from rtxviz.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]

RACE = textwrap.dedent("""
    import json, sys, tempfile, threading, time
    from rtxviz.store import StoreError
    from rtxviz.store.sqlite import SQLiteStore

    node = {"v": 1, "kind": "node", "t": 0.0, "step": 0, "op": "add", "inputs": [], "shape": [2],
            "dtype": "float32", "device": "cpu", "module": None, "rule": None, "saved_bytes": 0}
    ends = set()
    with tempfile.TemporaryDirectory() as tmp:
        for trial in range(int(sys.argv[1])):
            store = SQLiteStore(f"{tmp}/r{trial}.db")
            store.append("r", "r", [("node", 0, json.dumps({**node, "id": i})) for i in range(5000)])
            started, ended = threading.Event(), []

            def reader():
                started.set()
                try:
                    while True:
                        store.events("r", 0, 5000)
                except StoreError as exc:
                    ended.append(f"{type(exc).__name__}: {exc}")
                except Exception as exc:
                    ended.append(repr(exc))

            t = threading.Thread(target=reader)
            t.start()
            started.wait()
            time.sleep(0.01)  # the reader is in a query, or between two
            store.close()
            t.join(30)
            assert not t.is_alive() and len(ended) == 1, ended
            ends.add(ended[0].split(":")[0])
    print(sorted(ends))
""")


def test_closing_while_a_query_runs_waits_for_it_and_refuses_the_next():
    out = subprocess.run([sys.executable, "-c", RACE, "20"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"
    assert out.stdout.strip() == "['StoreUnavailable']", out.stdout


def test_a_closed_store_names_itself_closed_to_readers_and_writers(tmp_path):
    path = str(tmp_path / "closed.db")
    store = SQLiteStore(path)
    store.append("r", "r", [("note", None, '{"v":1,"kind":"note","t":0.0,"step":null,"text":"x"}')])
    store.close()
    with pytest.raises(StoreUnavailable, match=f"{path} is closed"):
        store.events("r")
    with pytest.raises(StoreUnavailable, match=f"{path} is closed"):
        store.append("r", "r", [("note", None, '{"v":1,"kind":"note","t":0.0,"step":null,"text":"y"}')])
    store.close()  # a second close is harmless
