"""The lease protocol of remote workers: `POST /worker/claim|heartbeat|prompt|events|complete|release`,
and `PUT /worker/log`.

These routes are the control plane's run queue (core.ports.RunQueue) over HTTP: each calls
the in-process run queue a local worker calls, so a remote worker and a local one are
held to the same lease. A call under a lease that expired or whose token is stale gets
409 `lease_lost`, and nothing it sent is kept. A claim, events, a completion or a release
sent again under the same `Idempotency-Key` gets the first answer again and is not done
twice (t25_tui.api.idempotency). A completion sent again under the lease that finished
its run is answered as done, even by a serve restarted since.

A run's log is uploaded before its completion, a chunk at a time (`PUT /worker/log`, each
chunk from an offset, kept once however often it is sent: t25_tui.api.uploads); the
completion names it by size and SHA-256, and serve keeps its own copy as the log artifact.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from core.control.run_queue import LocalRunQueue
from core.domain.events import Event
from core.domain.models import Lease, Run, RunStatus
from core.domain.reports import RunReport
from core.errors import InvalidInput, LeaseLost
from core.ports import Claim
from core.workspace.ownership import owner_of
from t25_tui.api import document
from t25_tui.api.bodies import (
    ClaimBody,
    CompleteBody,
    Count,
    EventsBody,
    LeaseBody,
    PromptBody,
    RunId,
    TaskId,
    TtlS,
    WorkerName,
)
from t25_tui.api.services import Control, Remembered, Runs, Uploads
from t25_tui.api.uploads import CHUNK_BYTES, LogUploads

router = APIRouter(prefix="/worker")

COMPLETING_S = 60.0  # the lease, proved before serve stores a log, holds this long to finish


@router.post(
    "/claim", responses={204: {"description": "no run is waiting"}, **document.answers(400)}
)
async def claim(runs: Runs, body: ClaimBody, request: Request, answers: Remembered) -> Response:
    async def claimed() -> Response:
        got = None
        if answers.failed_before(request):  # its first try may have taken a lease
            got = await _held_by(runs, body.worker)
        if got is None:
            got = await runs.claim(body.worker, body.ttl_s)
        if got is None:
            return Response(status_code=204)
        return JSONResponse(
            {
                "lease": got.lease.model_dump(mode="json"),
                "run": got.run.model_dump(mode="json"),
                "task": got.task.model_dump(mode="json"),
                "authors": [author.model_dump(mode="json") for author in got.authors],
                "resume": got.resume.model_dump(mode="json") if got.resume else None,
            }
        )

    return await answers.once(request, claimed, keep_empty=False)


@router.post("/heartbeat", responses=document.LEASE)
async def heartbeat(runs: Runs, body: LeaseBody) -> dict[str, Any]:
    return (await runs.heartbeat(body.lease, body.ttl_s)).model_dump(mode="json")


@router.post("/prompt", responses=document.LEASE)
async def prompt(runs: Runs, body: PromptBody) -> dict[str, str]:
    lease = await runs.heartbeat(body.lease, body.ttl_s)  # only the lease holder may ask
    run, task = await runs.leased(lease)
    made = await runs.prompt(lease, run, task, list(body.checks), continuing=body.continuing)
    return {"prompt": made}


@router.post("/events", status_code=204, responses=document.LEASE)
async def run_events(
    runs: Runs, body: EventsBody, request: Request, answers: Remembered
) -> Response:
    async def recorded() -> Response:
        lease = await runs.heartbeat(body.lease, body.ttl_s)  # a lost lease's output is dropped
        for sent in body.events:
            raw = sent.model_dump(exclude={"at", "task_id", "run_id", "seq"})
            kind = raw.pop("kind")
            raw.update(task_id=lease.task_id, run_id=lease.run_id)
            if sent.seq is not None:  # kept once, whichever serve takes it (0018)
                raw.update(sent=f"{lease.token}:{sent.seq}")
            await runs.record(lease, Event.registry[kind].model_validate(raw))
        return Response(status_code=204)

    return await answers.once(request, recorded)


@router.put(
    "/log",
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": f"the log's bytes from `offset`, at most {CHUNK_BYTES} of them",
            "content": {"application/octet-stream": {"schema": {"type": "string"}}},
        }
    },
    responses=document.LEASE,
)
async def upload_log(
    runs: Runs,
    uploads: Uploads,
    request: Request,
    run_id: RunId,
    task_id: TaskId,
    token: Count,
    worker: WorkerName,
    offset: Count,
    ttl_s: TtlS = 30.0,
) -> dict[str, int]:
    """One chunk of a run's log, under its lease (which it extends by `ttl_s`), from
    `offset`. Answers `received`: where to send from next. A chunk sent again is kept once;
    one past the end of what serve has is not kept (`received` says where that is)."""
    held = Lease(
        run_id=run_id, task_id=task_id, token=token, worker=worker, expires_at=datetime.now(UTC)
    )
    lease = await runs.heartbeat(held, ttl_s)  # a lost lease's log is dropped
    return {"received": await uploads.write(lease, offset, await request.body())}


@router.post("/complete", responses=document.LEASE)
async def complete(
    runs: Runs, uploads: Uploads, body: CompleteBody, request: Request, answers: Remembered
) -> Response:
    async def completed() -> Response:
        try:
            report = await _with_uploaded_log(runs, uploads, body.lease, body.report)
            task = await runs.pipeline.complete(body.lease, report)
        except (LeaseLost, InvalidInput) as exc:  # a retry may find its upload kept, removed
            if not await _completed_before(runs, body.lease):
                if isinstance(exc, LeaseLost):
                    uploads.discard(body.lease)  # a lost lease's log is dropped
                raise
            task = await runs.control.task(body.lease.task_id)
        uploads.discard(body.lease)  # kept in the store now
        return JSONResponse({"task": task.model_dump(mode="json") if task else None})

    return await answers.once(request, completed)


@router.get("/owner", responses=document.answers())
async def owner(control: Control) -> dict[str, str]:
    """The name of this installation in the ownership records of its worktrees
    (core.workspace.ownership): a worker on serve's own checkout makes its worktrees under
    it, so that serve and `t25 cleanup` may remove them after a merge."""
    return {"owner": owner_of(control.store.url)}


@router.post("/release", response_model=Run, responses=document.LEASE)
async def release(
    runs: Runs, uploads: Uploads, body: LeaseBody, request: Request, answers: Remembered
) -> Response:
    async def released() -> Response:
        uploads.discard(body.lease)
        return JSONResponse((await runs.released(body.lease)).model_dump(mode="json"))

    return await answers.once(request, released)


async def _with_uploaded_log(
    runs: LocalRunQueue, uploads: LogUploads, lease: Lease, report: RunReport
) -> RunReport:
    """The report with its log as serve's own copy, checked against what the worker said of
    it: the worker's `path` names nothing here. The lease first (LeaseLost): the log of a
    lease that is gone is none of serve's business."""
    result = report.result
    if result is None or result.log is None:
        return report
    await runs.heartbeat(lease, COMPLETING_S)
    log = await uploads.take(lease, result.log)
    return report.model_copy(update={"result": result.model_copy(update={"log": log})})


async def _completed_before(runs: LocalRunQueue, lease: Lease) -> bool:
    """The run was finished under this very lease: a completion sent again whose first try
    was done (its answer lost, or a 503 from a step after the run's own commit; a serve
    restarted between the tries), which is answered as done, not as a lost lease. A run
    the sweep failed when this lease lapsed on its last attempt looks the same; its
    worker is then told done where its result was in fact dropped."""
    run = await runs.control.run(lease.run_id)
    return (
        run.lease_token == lease.token
        and run.worker == lease.worker
        and run.status in (RunStatus.SUCCEEDED, RunStatus.FAILED)
    )


async def _held_by(runs: LocalRunQueue, worker: str) -> Claim | None:
    """The run `worker` holds a lease on. A worker claims only when it holds none, so a
    retried claim that finds one is its first try's: the claim was made, and the store went
    away before its run could be read back (a 503), or serve before it answered."""
    held = [r for r in await runs.control.runs(status=RunStatus.RUNNING) if r.worker == worker]
    if len(held) != 1 or (expires := held[0].lease_expires_at) is None:
        return None
    run = held[0]
    lease = Lease(
        run_id=run.id, task_id=run.task_id, token=run.lease_token, worker=worker, expires_at=expires
    )
    run, task = await runs.leased(lease)
    return await runs.claimed(lease, run, task)
