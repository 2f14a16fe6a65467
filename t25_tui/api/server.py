"""`t25 serve`: the control plane over REST and SSE, for remote workers and other faces.

Operator actions call the same ControlPlane methods as the command line and the cockpit.
Workers claim leases, stream output and complete under their fencing token; a token
that went stale or a lease that expired gets 409 and nothing it sent is kept. `/events`
is Server-Sent Events with an `id:` per event, resumable from `Last-Event-ID` out of the
events table with no gap and no duplicate.

Security: serve binds to loopback unless told otherwise, and refuses to listen anywhere
else (every interface included) without `T25_OPERATOR_TOKEN`; with the token set, every
operator endpoint needs it. Worker endpoints always need the credential from
`FACTORY_WORKER_CREDENTIAL` (never from t25.yaml), compared in constant time on bytes.
Both are checked before a byte of the body is read, and bodies are capped per endpoint
(`serve_limits`); what a body may hold is `serve_requests`.
"""

# No `from __future__ import annotations`: routes name types that make_api builds (the
# configured projects), and FastAPI must see those annotations as objects, not strings.
import asyncio
import contextlib
import functools
import ipaddress
import json
import os
import re
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Header, Query, Request, Response, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel, TypeAdapter, create_model
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from core.control import cost
from core.control.pipeline import Pipeline
from core.control.service import ControlPlane
from core.domain.events import Event
from core.domain.models import (
    MAX_ID,
    Artifact,
    Run,
    RunStatus,
    Task,
    TaskState,
    artifact_id,
    run_id,
    task_id,
)
from core.errors import (
    ArtifactCorrupted,
    AuditError,
    ConfigError,
    IllegalTransition,
    LeaseLost,
    NotFound,
    PolicyRefused,
    StaleState,
    StoreUnavailable,
    T25Error,
)
from t25_tui.api.bodies import (
    AnswerBody,
    ClaimBody,
    CompleteBody,
    DecisionBody,
    ErrorBody,
    EventsBody,
    LeaseBody,
    NewTaskBody,
    PromptBody,
    invalid_request,
)
from t25_tui.api.gate import KEEP_ALIVE_S, DeadlineProtocol, Gate

CREDENTIAL_ENV = "FACTORY_WORKER_CREDENTIAL"
OPERATOR_ENV = "T25_OPERATOR_TOKEN"
RETRY_MS = 3000  # an SSE client that lost its stream reconnects after this (`retry:`)
WAIT_S = 10.0  # an idle SSE stream re-checks the events table at least this often
TAIL_QUEUE = 256  # batches a slow SSE client may fall behind before it re-reads the table
SHUTDOWN_GRACE_S = 10.0  # a stopping serve waits this long for requests in flight
STATUS = {
    NotFound: 404,
    ConfigError: 400,
    PolicyRefused: 409,
    IllegalTransition: 409,
    StaleState: 409,
    LeaseLost: 409,
    ArtifactCorrupted: 422,
    StoreUnavailable: 503,
    AuditError: 503,
}
RETRY_AFTER_S = 2  # what a 503 (the store unavailable for now) tells a client to wait
HEADERS = {StoreUnavailable: {"Retry-After": str(RETRY_AFTER_S)}}
TAIL_PAUSES_S = (0.5, 10.0)  # the tail retrying an unavailable store: 0.5 s doubling to 10 s

_ANSWERS = {
    400: "the input was refused (text with control characters, a bad configuration)",
    401: "the credential is missing or wrong",
    404: "no such task, run or artifact (or the id is not one)",
    408: "the request body stalled",
    409: "the task's state, or the lease, does not allow it",
    413: "the request body is over this endpoint's cap",
    422: "the request does not match this endpoint's fields",
    503: "the control plane cannot serve this now (no worker credential, the store is down, "
    "the audit log cannot be written)",
}
_EVENT_ID = re.compile(r"[0-9]{1,19}", re.ASCII)


def is_loopback(host: str) -> bool:
    """Only 127.0.0.0/8, ::1 and `localhost`: "" (every interface), 0.0.0.0 and :: are not."""
    host = host.strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback and (address.version == 4 or address == ipaddress.IPv6Address("::1"))


def parse_bind(bind: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:8725` for IPv6; `:8725` for every interface) as (host, port)."""
    host, colon, port = bind.rpartition(":")
    if not colon or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise ConfigError(
            f"serve cannot listen on {bind!r}: expected HOST:PORT",
            hint="for example --bind 127.0.0.1:8725",
        )
    return host.strip("[]"), int(port)


def make_api(
    control: ControlPlane,
    *,
    worker_credential: str | None,
    operator_token: str | None,
    loopback: bool = True,
) -> FastAPI:
    """The REST/SSE app over one control plane. Tests, `t25 serve` and `t25 tui --serve` share it."""
    if not loopback and not operator_token:
        raise ConfigError(
            "serve binds beyond loopback but T25_OPERATOR_TOKEN is not set",
            hint="set T25_OPERATOR_TOKEN, or bind to 127.0.0.1",
        )
    api = FastAPI(
        title="T25 control plane",
        version="1",
        description="Tasks, runs, artifacts, events, decisions and the worker lease "
        "protocol of one T25 installation.",
    )
    pipeline = Pipeline(control)
    store = control.store
    tail = api.state.tail = Tail(store)

    @api.exception_handler(T25Error)
    async def refused(_: Request, exc: T25Error) -> JSONResponse:
        status = next((code for kind, code in STATUS.items() if isinstance(exc, kind)), 400)
        headers = next((h for kind, h in HEADERS.items() if isinstance(exc, kind)), None)
        return JSONResponse(
            {"error": exc.message, "hint": exc.hint}, status_code=status, headers=headers
        )

    @api.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(invalid_request(exc.errors()), status_code=422)

    @api.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # Starlette names the methods of one route; a path has several
            headers["Allow"] = ", ".join(
                sorted(
                    {
                        m
                        for r in api.routes
                        if isinstance(r, APIRoute) and r.matches(request.scope)[0] is Match.PARTIAL
                        for m in r.methods
                    }
                )
            )
        return JSONResponse(
            {"error": str(exc.detail), "hint": None}, status_code=exc.status_code, headers=headers
        )

    # The Gate checks the credentials; these only declare them in the OpenAPI document.
    operator = HTTPBearer(
        scheme_name="operatorToken",
        auto_error=False,
        description="T25_OPERATOR_TOKEN, as `Authorization: Bearer …`",
    )
    worker = HTTPBearer(
        scheme_name="workerCredential",
        auto_error=False,
        description="FACTORY_WORKER_CREDENTIAL, as `Authorization: Bearer …`",
    )
    op = [Security(operator)] if operator_token else []
    wk = [Security(worker)]

    def answers(*codes: int, secured: bool = True) -> dict[int | str, dict[str, Any]]:
        every = {408, 413, 422, 503, *codes} | ({401} if secured else set())
        # Refusals are JSON even where the route answers something else (an event stream).
        error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        return {code: {"description": _ANSWERS[code], "content": error} for code in sorted(every)}

    read = answers(404, secured=bool(operator_token))  # an operator's GET
    decide = answers(400, 404, 409, secured=bool(operator_token))
    lease = answers(400, 404, 409)

    projects = tuple(p.name for p in control.config.projects)
    Project = Literal[projects]  # type: ignore[valid-type]
    NewTask = create_model("NewTaskBody", __base__=NewTaskBody, project=(Project | None, None))  # type: ignore[call-overload]

    @api.get("/health", responses=answers(secured=False))
    async def health() -> dict[str, Any]:
        return {
            "ok": True,
            "store": store.url.split(":", 1)[0],
            "last_event_id": await store.last_event_id(),
        }

    # -- tasks and decisions ----------------------------------------------------------------

    @api.get("/tasks", dependencies=op, response_model=list[Task], responses=read)
    async def tasks(
        state: Annotated[list[TaskState] | None, Query()] = None,
        project: Project | None = None,
        archived: bool = False,
    ) -> Response:
        found = await store.list_tasks(states=state, project=project, include_archived=archived)
        return json_list(Task, found)

    @api.post("/tasks", dependencies=op, status_code=201, response_model=Task, responses=decide)
    async def new_task(body: NewTask) -> dict:  # type: ignore[valid-type]
        task = await control.new_task(
            body.title,
            actor=body.actor or "api",
            type=body.type,
            description=body.description,
            project=body.project,
        )
        return task.model_dump(mode="json")

    @api.get("/tasks/{ref}", dependencies=op, responses=read)
    async def task(ref: str) -> dict:
        found = await control.task(ref)
        runs = await store.list_runs(task_id=found.id)
        artifacts = await store.list_artifacts(task_id=found.id)
        return {
            "task": found.model_dump(mode="json"),
            "runs": [r.model_dump(mode="json") for r in runs],
            "artifacts": [a.model_dump(mode="json") for a in artifacts],
            "cost": cost.summarize(runs).model_dump(mode="json"),
        }

    for verb in ("approve", "reject", "cancel", "retry", "archive", "merge"):
        _decision_route(api, control, verb, op, decide)

    @api.post("/tasks/{ref}/answer", dependencies=op, response_model=Task, responses=decide)
    async def answer(ref: str, body: AnswerBody) -> dict:
        return (await control.answer(ref, body.text, actor=body.actor or "api")).model_dump(
            mode="json"
        )

    @api.get("/tasks/{ref}/events", dependencies=op, responses=read)
    async def task_events(
        ref: str,
        after: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
        limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
    ) -> list[dict]:
        """One task's events after `after`, oldest first (its history and its agents' output)."""
        found = await control.task(ref)
        return [e.to_json() for e in await store.events_after(after, task_id=found.id, limit=limit)]

    @api.get("/runs", dependencies=op, response_model=list[Run], responses=read)
    async def runs(task: str | None = None, status: RunStatus | None = None) -> Response:
        found = await store.list_runs(task_id=task_id(task) if task else None, status=status)
        return json_list(Run, found)

    @api.get("/runs/{ref}", dependencies=op, response_model=Run, responses=read)
    async def run(ref: str) -> dict:
        found = await store.get_run(run_id(ref))
        if found is None:
            raise NotFound(f"no run {run_id(ref)}")
        return found.model_dump(mode="json")

    @api.get("/artifacts", dependencies=op, response_model=list[Artifact], responses=read)
    async def artifacts(task: str | None = None) -> Response:
        found = await store.list_artifacts(task_id=task_id(task) if task else None)
        return json_list(Artifact, found)

    artifact_content = {
        "content": {
            kind: {} for kind in ("text/plain", "text/markdown", "text/x-diff", "application/json")
        },
        "description": "the artifact's content, as it was kept",
    }

    @api.get(
        "/artifacts/{ref}",
        dependencies=op,
        response_class=Response,
        responses={200: artifact_content, **read},
    )
    async def artifact(ref: str) -> Response:
        """The content, verified against its SHA-256; its provenance is in `X-T25-Artifact`."""
        meta, content = await store.get_artifact(artifact_id(ref))
        return Response(
            content,
            media_type=meta.meta.media_type,
            headers={
                "X-T25-SHA256": meta.sha256,
                "X-T25-Kind": meta.meta.kind,
                "X-T25-Artifact": json.dumps(meta.model_dump(mode="json")),
            },
        )

    @api.get("/audit", dependencies=op, responses=read)
    async def audit(task: str | None = None) -> dict:
        entries, verdict = await control.audit.snapshot(task=task_id(task) if task else None)
        return {
            "entries": [e.model_dump(mode="json") for e in entries],
            "verified": verdict.ok,
            "verification": verdict.message,
            "lines": verdict.lines,
            "bad_line": verdict.bad_line,
        }

    @api.get("/config", dependencies=op, responses=read)
    async def configuration() -> dict:
        """t25.yaml as validated: projects, roles, limits, policies, cost rates. The store's
        address is left out: in production it names the database."""
        return control.config.model_dump(mode="json", exclude={"store"})

    @api.get("/cost/tasks", dependencies=op, responses=read)
    async def cost_by_task() -> dict[str, float]:
        """Each task's summed run cost, by task id (the board's figure)."""
        return await store.cost_by_task()

    @api.get("/cost", dependencies=op, responses=read)
    async def costs() -> dict:
        return cost.summarize(await store.list_runs()).model_dump(mode="json")

    # -- events -----------------------------------------------------------------------------

    @api.get("/events", dependencies=op, response_class=EventSourceResponse, responses=read)
    async def events(
        after: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ) -> AsyncIterator[ServerSentEvent]:
        """Every event after `Last-Event-ID` (or `after`), then each new one as it is written.
        An id this store never gave (from another store, one that was reset, or not an id at
        all) gets a `reset` event carrying the newest id, and the stream from the start."""
        yield ServerSentEvent(comment="t25 events", retry=RETRY_MS)
        cursor = after
        if last_event_id is not None:
            given = last_event_id.strip()
            cursor = int(given) if _EVENT_ID.fullmatch(given) and int(given) <= MAX_ID else -1
        newest = await store.last_event_id()
        if not 0 <= cursor <= newest:
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

    @api.post(
        "/worker/claim",
        dependencies=wk,
        responses={204: {"description": "no run is waiting"}, **answers(400)},
    )
    async def claim(body: ClaimBody) -> Response:
        lease = await store.claim_run(body.worker, body.ttl_s)
        if lease is None:
            return Response(status_code=204)
        claimed = await store.get_run(lease.run_id)
        task = await store.get_task(lease.task_id)
        return JSONResponse(
            {
                "lease": lease.model_dump(mode="json"),
                "run": claimed.model_dump(mode="json"),
                "task": task.model_dump(mode="json"),
            }
        )

    @api.post("/worker/heartbeat", dependencies=wk, responses=lease)
    async def heartbeat(body: LeaseBody) -> dict:
        return (await store.heartbeat(body.lease, body.ttl_s)).model_dump(mode="json")

    @api.post("/worker/prompt", dependencies=wk, responses=lease)
    async def prompt(body: PromptBody) -> dict:
        lease = await store.heartbeat(body.lease, body.ttl_s)  # only the lease holder may ask
        claimed, task = await store.get_run(lease.run_id), await store.get_task(lease.task_id)
        return {"prompt": await pipeline.prompt_for(claimed, task, checks=body.checks)}

    @api.post("/worker/events", dependencies=wk, status_code=204, responses=lease)
    async def run_events(body: EventsBody) -> Response:
        await store.heartbeat(body.lease, body.ttl_s)  # a lost lease's output is not attached
        for sent in body.events:
            raw = sent.model_dump(exclude={"at", "task_id", "run_id"})
            kind = raw.pop("kind")
            raw.update(task_id=body.lease.task_id, run_id=body.lease.run_id)
            await control.record(Event.registry[kind].model_validate(raw))
        return Response(status_code=204)

    @api.post("/worker/complete", dependencies=wk, responses=lease)
    async def complete(body: CompleteBody) -> dict:
        task = await pipeline.complete(body.lease, body.report)
        return {"task": task.model_dump(mode="json") if task else None}

    @api.post("/worker/release", dependencies=wk, response_model=Run, responses=lease)
    async def release(body: LeaseBody) -> dict:
        return (await store.release_run(body.lease)).model_dump(mode="json")

    def openapi() -> dict[str, Any]:  # FastAPI's document, with the refusals' one shape
        if api.openapi_schema is None:
            doc = FastAPI.openapi(api)
            doc["components"]["schemas"]["ErrorBody"] = ErrorBody.model_json_schema()
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]
    api.add_middleware(Gate, worker_credential=worker_credential, operator_token=operator_token)
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


def _decision_route(
    api: FastAPI, control: ControlPlane, verb: str, deps: list, responses: dict
) -> None:
    async def decide(ref: str, body: DecisionBody) -> dict:
        task = await getattr(control, verb)(ref, actor=body.actor or "api", reason=body.reason)
        return task.model_dump(mode="json")

    decide.__name__ = verb
    api.post(
        f"/tasks/{{ref}}/{verb}",
        dependencies=deps,
        name=verb,
        response_model=Task,
        responses=responses,
        summary=f"{verb.capitalize()} a task (the same decision as `t25 {verb}`)",
    )(decide)


def http_server(control: ControlPlane, bind: str, *, handle_signals: bool = True):
    """A uvicorn server for `make_api` on `bind`. Embedded in the cockpit it leaves signals
    to its host (`handle_signals=False`), which stops it on SIGHUP/SIGTERM itself.

    Beyond loopback without T25_OPERATOR_TOKEN it refuses (ConfigError) before any port
    is opened."""
    host, port = parse_bind(bind)
    token = os.environ.get(OPERATOR_ENV)
    if not is_loopback(host) and not token:
        where = (
            "every interface" if host in ("", "0.0.0.0", "::") else f"{host}, which is not loopback"
        )
        raise ConfigError(
            f"serve would listen on {where} ({bind}) without T25_OPERATOR_TOKEN",
            hint="set T25_OPERATOR_TOKEN for remote operators, or bind to 127.0.0.1",
        )
    api = make_api(
        control,
        worker_credential=os.environ.get(CREDENTIAL_ENV),
        operator_token=token,
        loopback=is_loopback(host),
    )
    return server_for(api, host, port, handle_signals=handle_signals)


def server_for(api: FastAPI, host: str, port: int, *, handle_signals: bool = True):
    """uvicorn for one `make_api` app: its SSE streams end when it stops (they would hold a
    graceful shutdown open for ever), and any other request gets SHUTDOWN_GRACE_S. A
    request head must arrive within serve_limits.HEADER_TIMEOUT_S; a connection idle
    between requests is closed after KEEP_ALIVE_S."""
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

    return Server(
        uvicorn.Config(
            api,
            host=host,
            port=port,
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            http=DeadlineProtocol,
            ws="none",
            timeout_keep_alive=KEEP_ALIVE_S,
        )
    )
