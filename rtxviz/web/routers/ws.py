"""WebSockets: /api/runs/{run_id}/ws streams one run (stored events first, then live); /api/ws the run list.

Browsers cannot set headers on a WebSocket, so the token travels as ``?token=``. CORS does not cover
WebSockets, so the Origin header is checked here.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, WebSocket
from starlette.concurrency import run_in_threadpool

from ..deps import hub_of, origin_ok, store_of, token_ok
from .ingest import RunIdPath

router = APIRouter(tags=["stream"])


async def _refuse(ws: WebSocket) -> bool:
    if not token_ok(ws):
        await ws.close(code=1008, reason="missing or wrong token (?token=...)")
        return True
    if not origin_ok(ws):
        await ws.close(code=1008, reason="origin not allowed")
        return True
    return False


@router.websocket("/runs/{run_id}/ws")
async def run_stream(ws: WebSocket, run_id: RunIdPath, after: Annotated[int, Query(ge=0, le=2**63 - 1)] = 0) -> None:
    """Every event of the run with seq > `after`, in order: from the store, then live as it arrives."""
    if await _refuse(ws):
        return
    run = await run_in_threadpool(store_of(ws).get_run, run_id)
    await ws.accept()
    if run is None:  # not there yet: stream it once the emitter creates it
        run = {"id": run_id, "name": run_id, "status": "waiting"}
    await hub_of(ws).serve_run(ws, run_id, after, run)


@router.websocket("/ws")
async def lobby(ws: WebSocket) -> None:
    """The list of runs on connect, then a message whenever a run appears, ends or reports drops."""
    if await _refuse(ws):
        return
    runs = await run_in_threadpool(store_of(ws).list_runs, 1000)
    await ws.accept()
    await hub_of(ws).serve_lobby(ws, runs)
