"""`t25 serve`: the control plane over REST and SSE, for remote workers and other faces.

Operator actions call the same Factory methods as the command line and the cockpit.
Workers claim leases, stream output and complete under their fencing token; a token
that went stale or a lease that expired gets 409 and nothing it sent is kept. `/events`
is Server-Sent Events with an `id:` per event, resumable from `Last-Event-ID` out of the
events table with no gap and no duplicate.

Security: serve binds to loopback unless told otherwise; beyond loopback every operator
endpoint needs `T25_OPERATOR_TOKEN`. Worker endpoints always need the credential from
`FACTORY_WORKER_CREDENTIAL` (never from t25.yaml), compared in constant time on bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import ipaddress
import json
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from core import cost
from core.errors import (
    ArtifactCorrupted,
    ConfigError,
    IllegalTransition,
    LeaseLost,
    NotFound,
    PolicyRefused,
    StaleState,
    StoreUnavailable,
    T25Error,
)
from core.events import Event
from core.models import (
    Artifact,
    CheckResult,
    Lease,
    Run,
    RunStatus,
    Task,
    TaskState,
    TaskType,
    artifact_id,
    run_id,
    task_id,
)
from core.pipeline import Pipeline, RunReport
from core.service import Factory

CREDENTIAL_ENV = "FACTORY_WORKER_CREDENTIAL"
OPERATOR_ENV = "T25_OPERATOR_TOKEN"
MAX_BODY = 64 * 2**20  # a completion carries the run's log
WAIT_S = 10.0  # an idle SSE stream re-checks the events table at least this often
TAIL_QUEUE = 256  # batches a slow SSE client may fall behind before it re-reads the table
SHUTDOWN_GRACE_S = 10.0  # a stopping serve waits this long for requests in flight
STATUS = {NotFound: 404, ConfigError: 400, PolicyRefused: 409, IllegalTransition: 409,
          StaleState: 409, LeaseLost: 409, ArtifactCorrupted: 422, StoreUnavailable: 503}
RETRY_AFTER_S = 2  # what a 503 (the store unavailable for now) tells a client to wait
HEADERS = {StoreUnavailable: {"Retry-After": str(RETRY_AFTER_S)}}
TAIL_PAUSES_S = (0.5, 10.0)  # the tail retrying an unavailable store: 0.5 s doubling to 10 s


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NewTaskBody(_Body):
    title: str = Field(min_length=1, max_length=500)
    type: TaskType = TaskType.FEAT
    description: str = Field("", max_length=100_000)
    project: str | None = None
    actor: str | None = None


class DecisionBody(_Body):
    actor: str | None = None
    reason: str = Field("", max_length=10_000)


class AnswerBody(_Body):
    actor: str | None = None
    text: str = Field(min_length=1, max_length=100_000)


class ClaimBody(_Body):
    worker: str = Field(min_length=1, max_length=200)
    ttl_s: float = Field(30.0, gt=0, le=3600)


class LeaseBody(_Body):
    lease: Lease
    ttl_s: float = Field(30.0, gt=0, le=3600)


class PromptBody(_Body):
    lease: Lease
    ttl_s: float = Field(30.0, gt=0, le=3600)
    checks: list[CheckResult] = []


class EventsBody(_Body):
    lease: Lease
    ttl_s: float = Field(30.0, gt=0, le=3600)
    events: list[dict[str, Any]] = Field(max_length=1000)


class CompleteBody(_Body):
    lease: Lease
    report: RunReport


class BodyLimit:
    """Refuse request bodies over `limit` bytes with 413, before they are read whole."""

    def __init__(self, app, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            response = JSONResponse({"error": f"request body over {self.limit} bytes"}, 413)
            return await response(scope, receive, send)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise HTTPException(413, f"request body over {self.limit} bytes")
            return message

        return await self.app(scope, limited, send)


def make_api(factory: Factory, *, worker_credential: str | None, operator_token: str | None,
             loopback: bool = True) -> FastAPI:
    """The REST/SSE app over one factory. Tests, `t25 serve` and `t25 tui --serve` share it."""
    if not loopback and not operator_token:
        raise ConfigError("serve binds beyond loopback but T25_OPERATOR_TOKEN is not set",
                          hint="set T25_OPERATOR_TOKEN, or bind to 127.0.0.1")
    api = FastAPI(title="T25 control plane", version="1",
                  description="Tasks, runs, artifacts, events, decisions and the worker lease "
                              "protocol of one T25 installation.")
    pipeline = Pipeline(factory)
    store = factory.store
    tail = api.state.tail = Tail(store)

    @api.exception_handler(T25Error)
    async def refused(_: Request, exc: T25Error) -> JSONResponse:
        status = next((code for kind, code in STATUS.items() if isinstance(exc, kind)), 400)
        headers = next((h for kind, h in HEADERS.items() if isinstance(exc, kind)), None)
        return JSONResponse({"error": exc.message, "hint": exc.hint}, status_code=status,
                            headers=headers)

    def operator(authorization: Annotated[str | None, Header()] = None) -> None:
        if operator_token and not _bearer_matches(authorization, operator_token):
            raise HTTPException(401, "an operator token is required (Authorization: Bearer …)")

    def worker(authorization: Annotated[str | None, Header()] = None) -> None:
        if not worker_credential:
            raise HTTPException(503, "this control plane was started without "
                                     "FACTORY_WORKER_CREDENTIAL; it accepts no workers")
        if not _bearer_matches(authorization, worker_credential):
            raise HTTPException(401, "the worker credential is missing or wrong")

    op = [Depends(operator)]
    wk = [Depends(worker)]

    @api.get("/health")
    async def health() -> dict[str, Any]:
        return {"ok": True, "store": store.url.split(":", 1)[0],
                "last_event_id": await store.last_event_id()}

    # -- tasks and decisions ----------------------------------------------------------------

    @api.get("/tasks", dependencies=op, response_model=list[Task])
    async def tasks(state: Annotated[list[TaskState] | None, Query()] = None,
                    project: str | None = None, archived: bool = False) -> Response:
        found = await store.list_tasks(states=state, project=project, include_archived=archived)
        return json_list(Task, found)

    @api.post("/tasks", dependencies=op, status_code=201)
    async def new_task(body: NewTaskBody) -> dict:
        task = await factory.new_task(body.title, actor=body.actor or "api", type=body.type,
                                      description=body.description, project=body.project)
        return task.model_dump(mode="json")

    @api.get("/tasks/{ref}", dependencies=op)
    async def task(ref: str) -> dict:
        found = await factory.task(ref)
        runs = await store.list_runs(task_id=found.id)
        artifacts = await store.list_artifacts(task_id=found.id)
        return {"task": found.model_dump(mode="json"),
                "runs": [r.model_dump(mode="json") for r in runs],
                "artifacts": [a.model_dump(mode="json") for a in artifacts],
                "cost": cost.summarize(runs).model_dump(mode="json")}

    for verb in ("approve", "reject", "cancel", "retry", "archive", "merge"):
        _decision_route(api, factory, verb, op)

    @api.post("/tasks/{ref}/answer", dependencies=op)
    async def answer(ref: str, body: AnswerBody) -> dict:
        return (await factory.answer(ref, body.text, actor=body.actor or "api")).model_dump(mode="json")

    @api.get("/tasks/{ref}/events", dependencies=op)
    async def task_events(ref: str, after: int = 0,
                          limit: Annotated[int, Query(ge=1, le=5000)] = 1000) -> list[dict]:
        """One task's events after `after`, oldest first (its history and its agents' output)."""
        found = await factory.task(ref)
        return [e.to_json() for e in await store.events_after(after, task_id=found.id, limit=limit)]

    @api.get("/runs", dependencies=op, response_model=list[Run])
    async def runs(task: str | None = None, status: RunStatus | None = None) -> Response:
        found = await store.list_runs(task_id=task_id(task) if task else None, status=status)
        return json_list(Run, found)

    @api.get("/runs/{ref}", dependencies=op)
    async def run(ref: str) -> dict:
        found = await store.get_run(run_id(ref))
        if found is None:
            raise NotFound(f"no run {run_id(ref)}")
        return found.model_dump(mode="json")

    @api.get("/artifacts", dependencies=op, response_model=list[Artifact])
    async def artifacts(task: str | None = None) -> Response:
        found = await store.list_artifacts(task_id=task_id(task) if task else None)
        return json_list(Artifact, found)

    @api.get("/artifacts/{ref}", dependencies=op)
    async def artifact(ref: str) -> Response:
        """The content, verified against its SHA-256; its provenance is in `X-T25-Artifact`."""
        meta, content = await store.get_artifact(artifact_id(ref))
        return Response(content, media_type=meta.meta.media_type,
                        headers={"X-T25-SHA256": meta.sha256, "X-T25-Kind": meta.meta.kind,
                                 "X-T25-Artifact": json.dumps(meta.model_dump(mode="json"))})

    @api.get("/audit", dependencies=op)
    async def audit(task: str | None = None) -> dict:
        entries, verdict = await factory.audit.snapshot(task=task)
        return {"entries": [e.model_dump(mode="json") for e in entries],
                "verified": verdict.ok, "verification": verdict.message,
                "lines": verdict.lines, "bad_line": verdict.bad_line}

    @api.get("/config", dependencies=op)
    async def configuration() -> dict:
        """t25.yaml as validated: projects, roles, limits, policies, cost rates. The store's
        address is left out: in production it names the database."""
        return factory.config.model_dump(mode="json", exclude={"store"})

    @api.get("/cost/tasks", dependencies=op)
    async def cost_by_task() -> dict[str, float]:
        """Each task's summed run cost, by task id (the board's figure)."""
        return await store.cost_by_task()

    @api.get("/cost", dependencies=op)
    async def costs() -> dict:
        return cost.summarize(await store.list_runs()).model_dump(mode="json")

    # -- events -----------------------------------------------------------------------------

    @api.get("/events", dependencies=op, response_class=EventSourceResponse)
    async def events(
        after: int | None = None,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ) -> AsyncIterator[ServerSentEvent]:
        cursor = int(last_event_id) if last_event_id and last_event_id.isdigit() else after or 0
        newest = await store.last_event_id()
        if cursor > newest:  # from another store, or one that was reset: start over
            yield ServerSentEvent(event="reset", data={"last_id": newest})
            cursor = 0
        async with tail.follow() as batches:
            while not tail.closed:  # catch up from the events table, then follow the tail
                caught_up = await tail.events_after(cursor, limit=500)
                for e in caught_up:
                    yield ServerSentEvent(id=str(e.id), event=e.kind, data=e.to_json())
                    cursor = e.id
                if caught_up:
                    continue
                batch = await batches.get()
                if batch is None:  # this client fell behind the tail: read the table again
                    continue
                for e in batch:
                    if e.id > cursor:  # the catch-up may have sent it already
                        yield ServerSentEvent(id=str(e.id), event=e.kind, data=e.to_json())
                        cursor = e.id

    # -- workers ----------------------------------------------------------------------------

    @api.post("/worker/claim", dependencies=wk)
    async def claim(body: ClaimBody) -> Response:
        lease = await store.claim_run(body.worker, body.ttl_s)
        if lease is None:
            return Response(status_code=204)
        claimed = await store.get_run(lease.run_id)
        task = await store.get_task(lease.task_id)
        return JSONResponse({"lease": lease.model_dump(mode="json"),
                             "run": claimed.model_dump(mode="json"),
                             "task": task.model_dump(mode="json")})

    @api.post("/worker/heartbeat", dependencies=wk)
    async def heartbeat(body: LeaseBody) -> dict:
        return (await store.heartbeat(body.lease, body.ttl_s)).model_dump(mode="json")

    @api.post("/worker/prompt", dependencies=wk)
    async def prompt(body: PromptBody) -> dict:
        lease = await store.heartbeat(body.lease, body.ttl_s)  # only the lease holder may ask
        claimed, task = await store.get_run(lease.run_id), await store.get_task(lease.task_id)
        return {"prompt": await pipeline.prompt_for(claimed, task, checks=body.checks)}

    @api.post("/worker/events", dependencies=wk, status_code=204)
    async def run_events(body: EventsBody) -> Response:
        await store.heartbeat(body.lease, body.ttl_s)  # a lost lease's output is not attached
        for raw in body.events:
            kind = raw.pop("kind", None)
            if kind not in ("run_started", "run_output"):
                raise HTTPException(422, f"workers send run_started and run_output, not {kind!r}")
            raw.update(task_id=body.lease.task_id, run_id=body.lease.run_id)
            await factory.record(Event.registry[kind].model_validate(raw))
        return Response(status_code=204)

    @api.post("/worker/complete", dependencies=wk)
    async def complete(body: CompleteBody) -> dict:
        task = await pipeline.complete(body.lease, body.report)
        return {"task": task.model_dump(mode="json") if task else None}

    @api.post("/worker/release", dependencies=wk)
    async def release(body: LeaseBody) -> dict:
        return (await store.release_run(body.lease)).model_dump(mode="json")

    api.add_middleware(BodyLimit, limit=MAX_BODY)
    return api


class Tail:
    """One reader of the events table for every SSE client of this process.

    Each wake (a write by any process, see Store.wait_for_events) costs one query, not
    one per client. A client subscribes before its own catch-up read, so every event is
    either in that read or in a batch after it; ids already sent are skipped.

    A store outage (StoreUnavailable) ends neither the reader nor the streams: both try
    again with backoff from where they were, so once the store is back every client gets
    each event written since, in order, once.
    """

    def __init__(self, store) -> None:
        self.store = store
        self.queues: set[asyncio.Queue] = set()
        self.reader: asyncio.Task | None = None
        self.closed = False
        self._closing = asyncio.Event()

    def close(self) -> None:
        """The server is stopping: every stream ends; its client resumes elsewhere by id."""
        self.closed = True
        self._closing.set()
        for queue in tuple(self.queues):
            _nudge(queue)

    @contextlib.asynccontextmanager
    async def follow(self):
        queue: asyncio.Queue = asyncio.Queue(maxsize=TAIL_QUEUE)
        self.queues.add(queue)
        try:
            if self.reader is None or self.reader.done():
                self.reader = asyncio.create_task(self._read(await self.store.last_event_id()))
            yield queue
        finally:
            self.queues.discard(queue)
            if not self.queues and self.reader:
                self.reader.cancel()
                self.reader = None

    async def events_after(self, cursor: int, *, limit: int) -> list[Event]:
        """A stream's own read of the table, through an outage: [] once the tail closes."""
        pauses = _backoff()
        while not self.closed:
            try:
                return await self.store.events_after(cursor, limit=limit)
            except StoreUnavailable:
                with contextlib.suppress(asyncio.TimeoutError):  # a stopping server ends it now
                    await asyncio.wait_for(self._closing.wait(), next(pauses))
        return []

    async def _read(self, cursor: int) -> None:
        pauses = _backoff()
        while True:
            try:
                await self.store.wait_for_events(cursor, WAIT_S)
                batch = await self.store.events_after(cursor, limit=1000)
            except StoreUnavailable:  # keep the cursor; what is written meanwhile comes later
                await asyncio.sleep(next(pauses))
                continue
            pauses = _backoff()
            if not batch:
                continue
            cursor = batch[-1].id
            for queue in tuple(self.queues):
                try:
                    queue.put_nowait(batch)
                except asyncio.QueueFull:  # a slow client: it re-reads the table instead
                    _nudge(queue)


def _backoff() -> Iterator[float]:
    pause, longest = TAIL_PAUSES_S
    while True:
        yield pause
        pause = min(pause * 2, longest)


def _nudge(queue: asyncio.Queue) -> None:
    """Replace what a stream has queued with None: "look at the table (and at `closed`)"."""
    while not queue.empty():
        queue.get_nowait()
    queue.put_nowait(None)


@functools.cache
def _list_of(model: type[BaseModel]) -> TypeAdapter:
    return TypeAdapter(list[model])


def json_list(model: type[BaseModel], items: list) -> Response:
    """A list of models as JSON in one step: the board of a remote cockpit reads thousands of
    tasks and runs, and FastAPI's own encoding of that many dicts costs several times more."""
    return Response(_list_of(model).dump_json(items), media_type="application/json")


def _decision_route(api: FastAPI, factory: Factory, verb: str, deps: list) -> None:
    async def decide(ref: str, body: DecisionBody) -> dict:
        task = await getattr(factory, verb)(ref, actor=body.actor or "api", reason=body.reason)
        return task.model_dump(mode="json")

    decide.__name__ = verb
    api.post(f"/tasks/{{ref}}/{verb}", dependencies=deps, name=verb,
             summary=f"{verb.capitalize()} a task (the same decision as `t25 {verb}`)")(decide)


def _bearer_matches(header: str | None, secret: str) -> bool:
    given = (header or "").removeprefix("Bearer ").strip().encode()
    return hmac.compare_digest(given, secret.encode())


def http_server(factory: Factory, bind: str, *, handle_signals: bool = True):
    """A uvicorn server for `make_api` on `bind`. Embedded in the cockpit it leaves signals
    to its host (`handle_signals=False`), which stops it on SIGHUP/SIGTERM itself."""
    import os

    host, _, port = bind.rpartition(":")
    api = make_api(factory, worker_credential=os.environ.get(CREDENTIAL_ENV),
                   operator_token=os.environ.get(OPERATOR_ENV), loopback=is_loopback(host))
    return server_for(api, host.strip("[]"), int(port), handle_signals=handle_signals)


def server_for(api: FastAPI, host: str, port: int, *, handle_signals: bool = True):
    """uvicorn for one `make_api` app: its SSE streams end when it stops (they would hold a
    graceful shutdown open for ever), and any other request gets SHUTDOWN_GRACE_S."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            if handle_signals:
                with super().capture_signals():
                    yield
            else:
                yield

        async def shutdown(self, sockets=None) -> None:
            api.state.tail.close()
            await super().shutdown(sockets)

    return Server(uvicorn.Config(api, host=host, port=port, log_level="warning",
                                 lifespan="off", timeout_graceful_shutdown=SHUTDOWN_GRACE_S))
