"""WebSockets: /api/runs/{run_id}/ws streams one run (stored events first, then live); /api/ws the run list.

Browsers cannot set headers on a WebSocket, so the token travels as ``?token=``. CORS does not cover
WebSockets, so the Origin header is checked here.

A student's token streams only the student's own runs: the lobby lists and announces only theirs, and a run
stream of a run that is another's, or does not exist yet, is closed with code 4404 (the same for both, so the
close reveals nothing; the page reconnects, so a student's own run that has not started yet opens once it does).
Teachers and the admin may watch a run before it exists ("waiting"), as without accounts.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, WebSocket
from starlette.concurrency import run_in_threadpool

from ..deps import AccountsDep, HubDep, Principal, Settings, SettingsDep, StoreDep, origin_ok
from .ingest import RunIdPath

router = APIRouter(tags=["stream"])

#: The close code of a run stream a student may not read (an application code: 4000-4999; not 1008, after which
#: the page stops reconnecting).
NO_SUCH_RUN = 4404


async def _admit(ws: WebSocket, settings: Settings, accounts: AccountsDep) -> Principal | None:
    """The socket's principal, or None once it has been closed (wrong token, foreign origin)."""
    who = await accounts.principal(ws)
    if who is None:
        await ws.close(code=1008, reason="missing or wrong token (?token=...)")
        return None
    if not origin_ok(ws, settings):
        await ws.close(code=1008, reason="origin not allowed")
        return None
    return who


@router.websocket("/runs/{run_id}/ws")
async def run_stream(ws: WebSocket, run_id: RunIdPath, settings: SettingsDep, store: StoreDep, hub: HubDep,
                     accounts: AccountsDep, after: Annotated[int, Query(ge=0, le=2**63 - 1)] = 0) -> None:
    """Every event of the run with seq > `after`, in order: from the store, then live as it arrives."""
    who = await _admit(ws, settings, accounts)
    if who is None:
        return
    run = await run_in_threadpool(store.get_run, run_id)
    if not who.reads_all and (run is None or not who.may_read(run)):
        # a student: another's run, or one nobody has created yet (whose owner is unknown, so whose events
        # could turn out to be another student's) reads as missing
        await ws.accept()  # accepted first, so that the client reads the code (a refused handshake is only 403)
        await ws.close(code=NO_SUCH_RUN, reason=f"no run {run_id!r}")
        return
    await ws.accept()
    if run is None:  # not there yet: stream it once the emitter creates it
        run = {"id": run_id, "name": run_id, "status": "waiting"}
    await hub.serve_run(ws, run_id, after, run)


@router.websocket("/ws")
async def lobby(ws: WebSocket, settings: SettingsDep, store: StoreDep, hub: HubDep, accounts: AccountsDep) -> None:
    """The list of runs on connect, then a message whenever a run appears, ends or reports drops (a student's
    token: only the student's own runs)."""
    who = await _admit(ws, settings, accounts)
    if who is None:
        return
    runs = await run_in_threadpool(store.list_runs, 1000, who.sees_owner)
    await ws.accept()
    await hub.serve_lobby(ws, runs, owner=who.sees_owner)
