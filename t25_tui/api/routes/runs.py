"""Runs and artifacts: their lists, one run, and one artifact's content."""

from __future__ import annotations

import json

from fastapi import APIRouter, Response

from core.domain.models import Artifact, Run, RunStatus
from t25_tui.api import document
from t25_tui.api.bodies import json_list
from t25_tui.api.services import Ops

router = APIRouter()

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


@router.get("/artifacts", response_model=list[Artifact], responses=document.READ)
async def artifacts(control: Ops, task: str | None = None) -> Response:
    return json_list(Artifact, await control.artifacts(task=task))


@router.get(
    "/artifacts/{ref}",
    response_class=Response,
    responses={200: _CONTENT, **document.READ},
)
async def artifact(control: Ops, ref: str) -> Response:
    """The content, verified against its SHA-256; its provenance is in `X-T25-Artifact`."""
    meta, content = await control.artifact(ref)
    return Response(
        content,
        media_type=meta.meta.media_type,
        headers={
            "X-T25-SHA256": meta.sha256,
            "X-T25-Kind": meta.meta.kind,
            "X-T25-Artifact": json.dumps(meta.model_dump(mode="json")),
        },
    )
