"""REST reads under /api: runs, a run's events (paged), its steps, its graph, the schema; who is asking (/me).

A student's token reads only the student's own runs: another's run answers 404 exactly as a missing one does
(its existence is not revealed), on every route that names a run, DELETE included. Teachers read all.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Response
from starlette.concurrency import run_in_threadpool

from ..._version import __version__
from ...schema import SCHEMA_VERSION, json_schema
from ...store import RunStore
from ..deps import Principal, PrincipalDep, SettingsDep, StoreDep
from .ingest import RunIdPath

router = APIRouter(tags=["runs"])

_KIND = Annotated[list[str] | None, Query(max_length=32)]


@router.get("/health")
def health() -> dict[str, Any]:
    return {"ok": True, "version": __version__, "schema": SCHEMA_VERSION}


@router.get("/schema")
def schema() -> dict[str, Any]:
    """The event schema (JSON Schema per strictly modelled kind)."""
    return {"version": SCHEMA_VERSION, "kinds": json_schema()}


@router.get("/me")
def me(who: PrincipalDep) -> dict[str, Any]:
    """Who the token is: ``{"name": str or null (the admin), "teacher": bool, "reads_all": bool}`` (the page shows
    owners and the student filter when ``reads_all``)."""
    return {"name": who.name, "teacher": who.teacher, "reads_all": who.reads_all}


@router.get("/runs")
async def list_runs(store: StoreDep, who: PrincipalDep,
                    limit: Annotated[int, Query(ge=1, le=1000)] = 1000) -> list[dict[str, Any]]:
    """Every run the token may read, newest first: ``id``, ``name``, ``created``, ``status``, ``n_events``,
    ``dropped``, ``owner``, ... (a student's token: only the student's own)."""
    return await run_in_threadpool(store.list_runs, limit, who.sees_owner)


async def _run(store: RunStore, run_id: str, who: Principal) -> dict[str, Any]:
    run = await run_in_threadpool(store.get_run, run_id)
    if run is None or not who.may_read(run):  # another student's run reads as missing: the same words
        raise HTTPException(404, f"no run {run_id!r}; GET /api/runs lists them")
    return run


@router.get("/runs/{run_id}")
async def get_run(store: StoreDep, who: PrincipalDep, run_id: RunIdPath) -> dict[str, Any]:
    return await _run(store, run_id, who)


@router.delete("/runs/{run_id}")
async def delete_run(store: StoreDep, who: PrincipalDep, run_id: RunIdPath) -> dict[str, Any]:
    if not who.reads_all:
        await _run(store, run_id, who)
    if not await run_in_threadpool(store.delete_run, run_id):
        raise HTTPException(404, f"no run {run_id!r}; GET /api/runs lists them")
    return {"deleted": run_id}


def _events_response(run_id: str, rows: list[tuple[int, str]], limit: int) -> Response:
    # stored texts are already JSON: join them instead of decoding and re-encoding
    next_after = rows[-1][0] if rows else None
    more = "true" if len(rows) >= limit else "false"
    body = (f'{{"run_id":"{run_id}","next_after":{"null" if next_after is None else next_after},'
            f'"more":{more},"events":[{",".join(r[1] for r in rows)}]}}')
    return Response(body, media_type="application/json")


#: SQLite stores 64-bit signed integers: larger query numbers are 422s, never overflow errors.
_MAX_INT = 2**63 - 1
_Step = Annotated[int | None, Query(ge=0, le=_MAX_INT)]


@router.get("/runs/{run_id}/events")
async def run_events(store: StoreDep, settings: SettingsDep, who: PrincipalDep, run_id: RunIdPath,
                     after: Annotated[int, Query(ge=0, le=_MAX_INT)] = 0,
                     limit: Annotated[int, Query(ge=1)] = 1000, kind: _KIND = None,
                     step: _Step = None) -> Response:
    """A page of a run's events with seq > `after` (optionally only some kinds, or one step), in order."""
    await _run(store, run_id, who)
    limit = min(limit, settings.max_page)
    rows = await run_in_threadpool(store.events, run_id, after, limit, kind, step)
    return _events_response(run_id, rows, limit)


@router.get("/runs/{run_id}/steps")
async def run_steps(store: StoreDep, who: PrincipalDep, run_id: RunIdPath,
                    limit: Annotated[int, Query(ge=1, le=100_000)] = 10_000) -> list[dict[str, Any]]:
    """The run's steps: ``step``, ``seq`` (where it began), ``sampled``."""
    await _run(store, run_id, who)
    return await run_in_threadpool(store.steps, run_id, limit)


@router.get("/runs/{run_id}/graph")
async def run_graph(store: StoreDep, settings: SettingsDep, who: PrincipalDep, run_id: RunIdPath,
                    step: _Step = None,
                    after: Annotated[int, Query(ge=0, le=_MAX_INT)] = 0,
                    limit: Annotated[int, Query(ge=1)] = 10_000) -> Response:
    """The graph's structure: `leaf` and `node` events (of one step when given), paged like /events."""
    await _run(store, run_id, who)
    limit = min(limit, settings.max_page)
    rows = await run_in_threadpool(store.events, run_id, after, limit, ["leaf", "node"], step)
    return _events_response(run_id, rows, limit)
