"""GET /api/runs/{run_id}/history?name=...: one value's gradient norm and update/weight ratio over the run's steps.

The store keeps one short row per value per step, made from the stored events (SQLite's when it is read;
rtxviz/store/history.py says how values are named and where each number comes from). The answer is columnar,
so 10,000 steps are about a quarter of a megabyte of JSON: ``{"run_id", "name", "steps": [...], "grad_norm":
[...], "update_ratio": [...], "nonfinite": [...]}`` (null where a number was not sent, or was NaN/Inf; nonfinite
1 where the gradient held NaN/Inf). A name with no history (a constant, an input, a typo) answers empty columns;
an unknown run 404, and so does another student's run on a class server (rtxviz/web/deps.py's Principal).
"""

from __future__ import annotations

from typing import Annotated

import orjson
from fastapi import APIRouter, Query, Response
from starlette.concurrency import run_in_threadpool

from ...store.history import history_columns, use_decoder
from ..deps import PrincipalDep, StoreDep
from .ingest import RunIdPath
from .runs import _run

router = APIRouter(tags=["runs"])

# the store makes the history from the events it stores; orjson decodes them about 4x faster than the standard
# library, which the store is limited to (so a server's store decodes with it from here on)
use_decoder(orjson.loads)


@router.get("/runs/{run_id}/history")
async def run_history(store: StoreDep, who: PrincipalDep, run_id: RunIdPath,
                      name: Annotated[str, Query(min_length=1, max_length=1024,
                                                 description="the value's key: module|op|k, or L:<leaf name>")],
                      limit: Annotated[int, Query(ge=1, le=1_000_000)] = 100_000) -> Response:
    """The per-step history of one graph value, in step order (at most `limit` steps)."""
    await _run(store, run_id, who)  # another student's run answers 404, as every read of it does
    rows = await run_in_threadpool(store.history, run_id, name, limit)
    # encoded by orjson here: FastAPI's own encoding walks every one of the 40,000 values of 10,000 steps first
    body = orjson.dumps({"run_id": run_id, "name": name, **history_columns(rows)})
    return Response(body, media_type="application/json")
