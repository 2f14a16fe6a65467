"""Tasks: file one, list them, read one's detail and its events."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError

from core.domain.detail import TaskDetail
from core.domain.evidence import ApprovalEvidence, MergeEvidence
from core.domain.models import MAX_ID, Task, TaskState
from core.ports import Operations
from t25_tui.api import document
from t25_tui.api.bodies import NewTaskBody, json_list
from t25_tui.api.services import Ops, actor_of

router = APIRouter()


def _configured(control: Operations, project: str | None, *where: str) -> None:
    """A `project` is one of t25.yaml's, as the document says: 422 otherwise, like any
    other value the document does not allow (and, like them, without echoing it)."""
    names = [p.name for p in control.config.projects]
    if project is not None and project not in names:
        listed = ", ".join(repr(n) for n in names[:-1])
        allowed = f"{listed} or {names[-1]!r}" if listed else repr(names[-1])
        raise RequestValidationError(
            [{"type": "literal_error", "loc": where, "msg": f"Input should be {allowed}"}]
        )


@router.get("/tasks", response_model=list[Task], responses=document.READ)
async def tasks(
    control: Ops,
    state: Annotated[list[TaskState] | None, Query()] = None,
    project: str | None = None,
    archived: bool = False,
    merged: bool | None = None,
    after: Annotated[str | None, Query(max_length=40)] = None,
    limit: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    order: Literal["oldest", "newest"] = "oldest",
) -> Response:
    """Tasks in filing order (`order=newest`: the newest first), of some states or one
    project of t25.yaml's, merged or not; a page of at most `limit` that goes on past the
    task `after`."""
    _configured(control, project, "query", "project")
    found = await control.tasks(
        states=state,
        project=project,
        archived=archived,
        merged=merged,
        after=after,
        limit=limit,
        newest_first=order == "newest",
    )
    return json_list(Task, found)


@router.get("/tasks/counts", responses=document.READ)
async def task_counts(
    control: Ops,
    state: Annotated[list[TaskState] | None, Query()] = None,
    project: str | None = None,
    archived: bool = False,
    merged: bool | None = None,
) -> dict[TaskState, int]:
    """How many of the tasks GET /tasks would give each state holds (a state with none
    is left out)."""
    _configured(control, project, "query", "project")
    return await control.task_counts(
        states=state, project=project, archived=archived, merged=merged
    )


@router.post("/tasks", status_code=201, response_model=Task, responses=document.DECIDE)
async def new_task(control: Ops, request: Request, body: NewTaskBody) -> Task:
    _configured(control, body.project, "body", "project")
    return await control.new_task(
        body.title,
        actor=actor_of(request, body.actor),
        type=body.type,
        description=body.description,
        project=body.project,
        request_key=body.request_key,
        priority=body.priority,
        after=body.after,
    )


@router.get(
    "/tasks/{ref}/evidence/approval", response_model=ApprovalEvidence, responses=document.READ
)
async def approval_evidence(control: Ops, ref: str) -> ApprovalEvidence:
    """What an approval of the task's plan is decided on: the spec, the plan and its
    SHA-256 (send it as `bound_to`), earlier rejections and answers, and an estimate of the
    stages left from this project's past runs."""
    return await control.approval_evidence(ref)


@router.get("/tasks/{ref}/evidence/merge", response_model=MergeEvidence, responses=document.READ)
async def merge_evidence(control: Ops, ref: str) -> MergeEvidence:
    """What a merge would take: the reviewed head, the commits (where serve has the
    checkout) and diff stat, the QA checks, the review rounds, the protected paths, and
    why a merge would be refused now (`refusal`, null when it may go ahead)."""
    return await control.merge_evidence(ref)


@router.get("/tasks/{ref}", response_model=TaskDetail, responses=document.READ)
async def task(control: Ops, ref: str, verify: bool = False) -> TaskDetail:
    """The task with its history, runs, artifacts and cost (`t25 task show`); `verify`
    re-hashes every artifact and names the damaged ones."""
    return await control.detail(ref, verify=verify)


@router.get("/tasks/{ref}/events", responses=document.READ)
async def task_events(
    control: Ops,
    ref: str,
    after: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
    limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
) -> list[dict[str, Any]]:
    """One task's events after `after`, oldest first (its history and its agents' output)."""
    return [e.to_json() for e in await control.events(ref, after=after, limit=limit)]
