"""The operator decisions over REST: `POST /tasks/{id}/approve|reject|answer|merge|cancel|retry|archive|acknowledge|recheck|reset`.

Each route builds the `Decision` the command line and the cockpit build and hands it to the
control plane's `decide`: the same check, the same audit line, the same event.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request

from core.domain.decisions import Decision, Verb
from core.domain.models import Task, TaskState
from t25_tui.api import document
from t25_tui.api.bodies import (
    AnswerBody,
    ApprovalBody,
    DecisionBody,
    EditBody,
    MergeBody,
    ResetBody,
)
from t25_tui.api.services import Ops, actor_of

router = APIRouter()


@router.post(
    "/tasks/{ref}/approve",
    response_model=Task,
    responses=document.DECIDE,
    summary="Approve a task's plan (the same decision as `t25 approve`)",
)
async def approve(control: Ops, request: Request, ref: str, body: ApprovalBody) -> Task:
    """`bound_to`, when given, is the plan the approver read (`sha256:…`): if the plan has
    changed since, the approval is refused (409)."""
    decision = Decision(
        verb=Verb.APPROVE,
        task=ref,
        actor=actor_of(request, body.actor),
        text=body.reason,
        bound_to=body.bound_to,
    )
    return await control.decide(decision)


@router.post(
    "/tasks/{ref}/answer",
    response_model=Task,
    responses=document.DECIDE,
    summary="Answer a task's question (the same decision as `t25 answer`)",
)
async def answer(control: Ops, request: Request, ref: str, body: AnswerBody) -> Task:
    actor = actor_of(request, body.actor)
    decision = Decision(verb=Verb.ANSWER, task=ref, actor=actor, text=body.text)
    return await control.decide(decision)


@router.post(
    "/tasks/{ref}/merge",
    response_model=Task,
    responses=document.DECIDE,
    summary="Merge a task (the same decision as `t25 merge`)",
)
async def merge(control: Ops, request: Request, ref: str, body: MergeBody) -> Task:
    """`allow_paths` names each protected path the change touches (`protected_paths` of the
    task); a merge that leaves one out is refused (409), the paths listed."""
    decision = Decision(
        verb=Verb.MERGE,
        task=ref,
        actor=actor_of(request, body.actor),
        text=body.reason,
        allow_paths=tuple(body.allow_paths),
    )
    return await control.decide(decision)


@router.post(
    "/tasks/{ref}/reset",
    response_model=Task,
    responses=document.DECIDE,
    summary="Send a task back to a stage it passed (the same decision as `t25 reset`)",
)
async def reset(control: Ops, request: Request, ref: str, body: ResetBody) -> Task:
    """`to` is the working stage to go back to; the task's branch returns to the commit that
    stage began from (its head kept under `refs/t25/archive/`), and the audit line is bound
    to that commit. Refused (409) going forward, or on a merged or archived task."""
    decision = Decision(
        verb=Verb.RESET,
        task=ref,
        actor=actor_of(request, body.actor),
        text=body.reason,
        stage=TaskState(body.to),
    )
    return await control.decide(decision)


@router.post(
    "/tasks/{ref}/edit",
    response_model=Task,
    responses=document.DECIDE,
    summary="Edit a task's title, description, type or priority (as `t25 task edit`)",
)
async def edit(control: Ops, request: Request, ref: str, body: EditBody) -> Task:
    """Only the fields given change; refused (409) once the task has gone past where that
    field may change, and (422) when none is given."""
    named = {"title": body.title, "description": body.description, "priority": body.priority}
    changes: dict[str, str | int] = {k: v for k, v in named.items() if v is not None}
    if body.type is not None:
        changes["type"] = body.type.value
    decision = Decision(
        verb=Verb.EDIT,
        task=ref,
        actor=actor_of(request, body.actor),
        text=body.reason,
        changes=changes,
    )
    return await control.decide(decision)


def _decision(verb: Verb) -> Callable[[Ops, Request, str, DecisionBody], Awaitable[Task]]:
    async def decide(control: Ops, request: Request, ref: str, body: DecisionBody) -> Task:
        actor = actor_of(request, body.actor)
        decision = Decision(verb=verb, task=ref, actor=actor, text=body.reason)
        return await control.decide(decision)

    decide.__name__ = verb.value
    return decide


for _verb in (Verb.REJECT, Verb.CANCEL, Verb.RETRY, Verb.ARCHIVE, Verb.ACKNOWLEDGE, Verb.RECHECK):
    router.add_api_route(
        f"/tasks/{{ref}}/{_verb.value}",
        _decision(_verb),
        methods=["POST"],
        name=_verb.value,
        response_model=Task,
        responses=document.DECIDE,
        summary=f"{_verb.value.capitalize()} a task (the same decision as `t25 {_verb.value}`)",
    )
