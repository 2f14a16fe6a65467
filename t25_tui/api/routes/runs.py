"""Runs and artifacts: their lists, one run, a run's events from its end, and one artifact's
content."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from fastapi.responses import StreamingResponse

from core.domain.models import MAX_ID, Artifact, Run, RunStatus, artifact_id
from t25_tui.api import document
from t25_tui.api.bodies import json_list
from t25_tui.api.services import Control, Ops

router = APIRouter()

STREAMED_OVER = 2**20  # an artifact larger than this is streamed, not held

_CONTENT = {
    "content": {
        kind: {} for kind in ("text/plain", "text/markdown", "text/x-diff", "application/json")
    },
    "description": "the artifact's content, as it was kept",
}


@router.get("/runs", response_model=list[Run], responses=document.READ)
async def runs(control: Ops, task: str | None = None, status: RunStatus | None = None) -> Response:
    return json_list(Run, await control.runs(task=task, status=status))


@router.get("/runs/{ref}", response_model=Run, responses=document.READ)
async def run(control: Ops, ref: str) -> Run:
    return await control.run(ref)


@router.get("/runs/{ref}/events", responses=document.READ)
async def run_events(
    control: Ops,
    ref: str,
    before: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    limit: Annotated[int, Query(ge=1, le=5000)] = 500,
) -> list[dict[str, Any]]:
    """One run's newest events below id `before` (its newest without it), oldest first: a
    run read from its end, page by page (the log pane and `t25 logs --follow` open so)."""
    return [e.to_json() for e in await control.run_events(ref, before=before, limit=limit)]


@router.get("/artifacts", response_model=list[Artifact], responses=document.READ)
async def artifacts(control: Ops, task: str | None = None) -> Response:
    return json_list(Artifact, await control.artifacts(task=task))


@router.get(
    "/artifacts/{ref}",
    response_class=Response,
    responses={200: _CONTENT, **document.READ},
)
async def artifact(control: Control, ref: str) -> Response:
    """The content, verified against its SHA-256; its provenance is in `X-T25-Artifact`.
    A large one (a run's log) is streamed from the store a chunk at a time, never held: it
    is read through once to verify it (a 422 when it is damaged), then sent."""
    store = control.store
    meta, content = await store.stream_artifact(artifact_id(ref))
    headers = {
        "X-T25-SHA256": meta.sha256,
        "X-T25-Kind": meta.meta.kind,
        "X-T25-Artifact": json.dumps(meta.model_dump(mode="json")),
    }
    if meta.size <= STREAMED_OVER:
        whole = b"".join([chunk async for chunk in content])
        return Response(whole, media_type=meta.meta.media_type, headers=headers)
    async for _ in content:  # verified to its end before a status is given
        pass
    _, content = await store.stream_artifact(meta.id)
    return StreamingResponse(content, media_type=meta.meta.media_type, headers=headers)
