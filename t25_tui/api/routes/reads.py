"""Health, the audit trail, cost and the configuration."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from core.domain.cost import CostSummary
from core.domain.models import MAX_ID
from t25_tui.api import document
from t25_tui.api.protocol import PROTOCOL, t25_version
from t25_tui.api.services import Control, Ops

router = APIRouter()


@router.get("/health", responses=document.answers())
async def health(control: Control) -> dict[str, Any]:
    """Whether serve is up, its store, its last event, and who it is: its worker protocol's
    version (t25_tui.api.protocol) and T25's."""
    return {
        "ok": True,
        "protocol": PROTOCOL,
        "version": t25_version(),
        "store": control.store.url.split(":", 1)[0],
        "last_event_id": await control.last_event_id(),
    }


AUDIT_PAGE = 500  # lines in a page of GET /audit, unless asked for fewer or more ...
AUDIT_PAGE_MAX = 5000  # ... up to this many
COSTS_NAMED_MAX = 200  # task ids one GET /cost/tasks takes (a URL stays short)


@router.get("/audit", responses=document.READ)
async def audit(
    control: Ops,
    task: str | None = None,
    after: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
    limit: Annotated[int, Query(ge=0, le=AUDIT_PAGE_MAX)] = AUDIT_PAGE,
) -> dict[str, Any]:
    """A page of the audit log: the entries after line `after` (one task's, with `task`),
    at most `limit`, with `next` (the `after` that reads on; null at the end), and the
    whole chain's verification and head (its last line's sequence number and hash).
    The verification is computed once and reused while the chain's head stays the same,
    so paging through a long log does not verify it again on every page."""
    trail = await control.audit_trail(task=task, after=after, limit=limit)
    head = trail.verdict.head
    return {
        "entries": [e.model_dump(mode="json") for e in trail.entries],
        "next": trail.next,
        "verified": trail.verdict.ok,
        "verification": trail.verdict.message,
        "lines": trail.verdict.lines,
        "bad_line": trail.verdict.bad_line,
        "head": head.model_dump(mode="json") if head else None,
    }


@router.get("/audit/disagreements", responses=document.READ)
async def audit_disagreements(control: Ops) -> dict[str, list[str]]:
    """What the audit log and the store disagree on: each line whose decision left no
    effect in the store, and each decision the store holds that no line records, by line
    then by event. The log and the decisions are read a page at a time."""
    return {"disagreements": await control.audit_disagreements()}


@router.get("/config", responses=document.READ)
async def configuration(control: Ops) -> dict[str, Any]:
    """t25.yaml as validated: projects, roles, limits, policies, cost rates, and under
    `effective` the roles, limits, QA checks and approval policy in force for each project
    (its own keys in place of the top-level ones). The store's address is left out: in
    production it names the database."""
    config = control.config
    body = config.model_dump(mode="json", exclude={"store"})
    for project, shown in zip(config.projects, body["projects"], strict=True):
        for section in ("roles", "limits", "qa", "approval"):  # what the file says, only
            own = getattr(project, section)
            shown[section] = (
                None if own is None else own.model_dump(mode="json", exclude_unset=True)
            )
    body["effective"] = {
        project.name: config.for_project(project.name).model_dump(
            mode="json", include={"roles", "limits", "qa", "approval"}
        )
        for project in config.projects
    }
    return body


@router.get("/cost/tasks", responses=document.READ)
async def cost_by_task(
    control: Ops, task: Annotated[list[str] | None, Query(max_length=COSTS_NAMED_MAX)] = None
) -> dict[str, float]:
    """Each task's summed run cost, by task id (the board's figure), of every task or of
    the `task`s named."""
    return await control.cost_by_task(task)


@router.get("/cost", response_model=CostSummary, responses=document.READ)
async def cost(control: Ops) -> CostSummary:
    return await control.cost()
