"""The lease protocol of remote workers: `POST /worker/claim|heartbeat|prompt|events|complete|release`.

These routes are the control plane's run queue (core.ports.RunQueue) over HTTP: each calls
the in-process run queue a local worker calls, so a remote worker and a local one are
held to the same lease. A call under a lease that expired or whose token is stale gets
409 `lease_lost`, and nothing it sent is kept. A claim, events, a completion or a release
sent again under the same `Idempotency-Key` gets the first answer again and is not done
twice (t25_tui.api.idempotency). A completion sent again under the lease that finished
its run is answered as done, even by a serve restarted since.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from core.control.run_queue import LocalRunQueue
from core.domain.events import Event
from core.domain.models import Lease, Run, RunStatus, TaskState
from core.errors import LeaseLost
from core.ports import Claim
from t25_tui.api import document
from t25_tui.api.bodies import ClaimBody, CompleteBody, EventsBody, LeaseBody, PromptBody
from t25_tui.api.services import Remembered, Runs

router = APIRouter(prefix="/worker")


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
            }
        )

    return await answers.once(request, claimed)


@router.post("/heartbeat", responses=document.LEASE)
async def heartbeat(runs: Runs, body: LeaseBody) -> dict[str, Any]:
    return (await runs.heartbeat(body.lease, body.ttl_s)).model_dump(mode="json")


@router.post("/prompt", responses=document.LEASE)
async def prompt(runs: Runs, body: PromptBody) -> dict[str, str]:
    lease = await runs.heartbeat(body.lease, body.ttl_s)  # only the lease holder may ask
    run, task = await runs.leased(lease)
    return {"prompt": await runs.prompt(lease, run, task, list(body.checks))}


@router.post("/events", status_code=204, responses=document.LEASE)
async def run_events(
    runs: Runs, body: EventsBody, request: Request, answers: Remembered
) -> Response:
    async def recorded() -> Response:
        lease = await runs.heartbeat(body.lease, body.ttl_s)  # a lost lease's output is dropped
        for sent in body.events:
            raw = sent.model_dump(exclude={"at", "task_id", "run_id"})
            kind = raw.pop("kind")
            raw.update(task_id=lease.task_id, run_id=lease.run_id)
            await runs.record(lease, Event.registry[kind].model_validate(raw))
        return Response(status_code=204)

    return await answers.once(request, recorded)


@router.post("/complete", responses=document.LEASE)
async def complete(
    runs: Runs, body: CompleteBody, request: Request, answers: Remembered
) -> Response:
    async def completed() -> Response:
        try:
            task = await runs.pipeline.complete(body.lease, body.report)
        except LeaseLost:
            if not await _completed_before(runs, body.lease):
                raise
            task = await runs.control.task(body.lease.task_id)
        return JSONResponse({"task": task.model_dump(mode="json") if task else None})

    return await answers.once(request, completed)


@router.post("/release", response_model=Run, responses=document.LEASE)
async def release(runs: Runs, body: LeaseBody, request: Request, answers: Remembered) -> Response:
    async def released() -> Response:
        return JSONResponse((await runs.released(body.lease)).model_dump(mode="json"))

    return await answers.once(request, released)


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
    away before its run could be read back (a 503)."""
    held = [r for r in await runs.control.runs(status=RunStatus.RUNNING) if r.worker == worker]
    if len(held) != 1 or (expires := held[0].lease_expires_at) is None:
        return None
    run = held[0]
    lease = Lease(
        run_id=run.id, task_id=run.task_id, token=run.lease_token, worker=worker, expires_at=expires
    )
    run, task = await runs.leased(lease)
    authors = await runs.pipeline.authors(task) if run.stage is TaskState.REVIEW else ()
    return Claim(lease, run, task, authors)
