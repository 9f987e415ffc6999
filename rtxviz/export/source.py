"""Read a recorded run's events: from the server's SQLite file or its REST API (paged), as decoded dicts.

>>> from rtxviz.store import open_store
>>> s = open_store(":memory:")
>>> _ = s.append("r1", "demo", [("step_begin", 0, '{"v":1,"kind":"step_begin","t":0,"step":0}')])
>>> [e["kind"] for e in events_from_store(s, "r1")]
['step_begin']
"""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from typing import Any

from ..engine.errors import RtxvizError
from ..store import RunStore, StoreError, is_postgres_url, open_store
from .jsonl import answer_detail

PAGE = 10_000


class RunNotFound(RtxvizError, LookupError):
    """No run with that id (or name) in the store or on the server."""


def events_from_store(store: RunStore, run_id: str) -> list[dict]:
    """Every event of `run_id` from a `rtxviz.store.RunStore`, in seq order."""
    if not store.has_run(run_id):
        raise RunNotFound(f"no run {run_id!r} in {store.path}; runs there: "
                          f"{[r['id'] for r in store.list_runs(20)]}")
    out: list[dict] = []
    after = 0
    while True:
        rows = store.events(run_id, after=after, limit=PAGE)
        for seq, text in rows:
            try:
                out.append(json.loads(text))
            except ValueError as exc:  # only a database written before the server took strict JSON only
                raise RtxvizError(f"run {run_id!r} event {seq} in {store.path} is not valid JSON ({exc})") from None
        if len(rows) < PAGE:
            return out
        after = rows[-1][0]


def resolve_run(runs: list[dict], run: str) -> str:
    """A run id from an id, a unique name, or "latest"."""
    if run == "latest":
        if not runs:
            raise RunNotFound("there are no recorded runs")
        return max(runs, key=lambda r: r.get("created", 0))["id"]
    ids = [r["id"] for r in runs]
    if run in ids:
        return run
    named = [r["id"] for r in runs if r.get("name") == run]
    if len(named) == 1:
        return named[0]
    if named:
        raise RunNotFound(f"several runs are named {run!r}: {named}; pass an id")
    raise RunNotFound(f"no run {run!r}; known runs: {ids[:20]}")


def events_from_db(path: str, run: str) -> tuple[str, list[dict]]:
    """(run id, events) from the server's SQLite file (or PostgreSQL URL); `run` is an id, a unique name or
    "latest"."""
    if not is_postgres_url(path) and not os.path.exists(path):
        raise RunNotFound(f"no database at {path!r} (the server's --db, default ~/.rtxviz/runs.db)")
    try:  # read-only: reading beside a running server, which holds the writer's lock, is fine
        store = open_store(path, read_only=True)
    except StoreError as exc:
        raise RtxvizError(str(exc)) from None
    try:
        run_id = resolve_run(store.list_runs(1000), run)
        return run_id, events_from_store(store, run_id)
    finally:
        store.close()


def _get_json(url: str, token: str | None, timeout: float) -> Any:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # the user's own server
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise RtxvizError(f"GET {url}: the server answered {exc.code}: {answer_detail(exc.read())}") from None
    except urllib.error.URLError as exc:
        raise RtxvizError(f"GET {url}: cannot reach the server ({exc.reason}); is `rtxviz serve` running?") from None


def events_from_server(url: str, run: str, token: str | None = None, timeout: float = 10.0) -> tuple[str, list[dict]]:
    """(run id, events) from a running server's REST API (``GET /api/runs``, ``/api/runs/{id}/events``)."""
    base = url.rstrip("/")
    run_id = resolve_run(_get_json(f"{base}/api/runs", token, timeout), run)
    out: list[dict] = []
    after = 0
    while True:
        q = urllib.parse.urlencode({"after": after, "limit": PAGE})
        page = _get_json(f"{base}/api/runs/{urllib.parse.quote(run_id)}/events?{q}", token, timeout)
        out.extend(page["events"])
        if not page.get("more") or page.get("next_after") is None:
            return run_id, out
        after = page["next_after"]
