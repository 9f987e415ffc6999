"""WebSockets: /api/runs/{run_id}/ws streams one run (stored events first, then live); /api/ws the run list.

Browsers cannot set headers on a WebSocket, so the token travels as ``?token=``. CORS does not cover
WebSockets, so the Origin header is checked here.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, WebSocket
from starlette.concurrency import run_in_threadpool

from ..deps import HubDep, Settings, SettingsDep, StoreDep, origin_ok, token_ok
from .ingest import RunIdPath

router = APIRouter(tags=["stream"])


async def _refuse(ws: WebSocket, settings: Settings) -> bool:
    if not token_ok(ws, settings):
        await ws.close(code=1008, reason="missing or wrong token (?token=...)")
        return True
    if not origin_ok(ws, settings):
        await ws.close(code=1008, reason="origin not allowed")
        return True
    return False


@router.websocket("/runs/{run_id}/ws")
async def run_stream(ws: WebSocket, run_id: RunIdPath, settings: SettingsDep, store: StoreDep, hub: HubDep,
                     after: Annotated[int, Query(ge=0, le=2**63 - 1)] = 0) -> None:
    """Every event of the run with seq > `after`, in order: from the store, then live as it arrives."""
    if await _refuse(ws, settings):
        return
    run = await run_in_threadpool(store.get_run, run_id)
    await ws.accept()
    if run is None:  # not there yet: stream it once the emitter creates it
        run = {"id": run_id, "name": run_id, "status": "waiting"}
    await hub.serve_run(ws, run_id, after, run)


@router.websocket("/ws")
async def lobby(ws: WebSocket, settings: SettingsDep, store: StoreDep, hub: HubDep) -> None:
    """The list of runs on connect, then a message whenever a run appears, ends or reports drops."""
    if await _refuse(ws, settings):
        return
    runs = await run_in_threadpool(store.list_runs, 1000)
    await ws.accept()
    await hub.serve_lobby(ws, runs)
