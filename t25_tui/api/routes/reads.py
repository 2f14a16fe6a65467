"""Health, the audit trail, cost and the configuration."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import AwareDatetime, BeforeValidator

from core.domain.cost import COSTLIEST, CostSummary, TaskCost
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
COSTS_NAMED_MAX = 200  # task ids one GET /cost/tasks or /cost/tokens takes (a URL stays short)
COSTLIEST_MAX = 1000  # tasks one GET /cost/costliest lists
# RFC 3339, the document's `date-time`: alone, pydantic would also read a number as Unix time.
RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")


def _rfc3339(value: object) -> object:
    if isinstance(value, str) and RFC3339.fullmatch(value):
        return value
    raise ValueError("a time with its offset, as 2026-12-07T00:00:00Z")


Rfc3339Time = Annotated[AwareDatetime, BeforeValidator(_rfc3339)]


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


@router.get("/cost/tokens", responses=document.READ)
async def tokens_by_task(
    control: Ops, task: Annotated[list[str], Query(max_length=COSTS_NAMED_MAX)]
) -> dict[str, int]:
    """Each `task` named's tokens, every kind its runs reported, by task id (the board holds
    token budgets against it); a task with no runs is absent."""
    return await control.tokens_by_task(task)


@router.get("/cost", response_model=CostSummary, responses=document.READ)
async def cost(control: Ops, since: Rfc3339Time | None = None) -> CostSummary:
    """Every run's estimated cost, in total and by role, adapter, model and stage; with
    `since` (a time with its offset), of the runs that finished, or, not finished, were
    queued, at or after it."""
    return await control.cost(since=since)


@router.get("/cost/costliest", response_model=list[TaskCost], responses=document.READ)
async def costliest_tasks(
    control: Ops, limit: Annotated[int, Query(ge=1, le=COSTLIEST_MAX)] = COSTLIEST
) -> list[TaskCost]:
    """The `limit` tasks whose runs cost the most, each with its runs and their input and
    output tokens."""
    return await control.costliest_tasks(limit)
