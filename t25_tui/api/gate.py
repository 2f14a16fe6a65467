"""What `t25 serve` settles before a request reaches its routes: who may send it, how much
it may carry, and how long its client may take.

FastAPI reads and parses a request's whole body before it resolves a single dependency, so
a credential checked there comes after the damage: any client could make serve buffer and
parse whatever it sent. `RequestAdmission` sits in front of the app and decides from the request line
and the headers alone — the credential first, then the declared size — and only then reads
the body, counting while it streams and stopping the moment it passes the route's cap. A
refusal is answered at once; the rest of the body never reaches the app and is never kept
(uvicorn drops it as it comes, for DRAIN_S at most, so a client that sends its whole body
before it reads still gets to see the answer).

uvicorn bounds the size of a request head but not the time it takes to arrive: its
keep-alive timer runs only between requests, and any byte resets it. A head trickled a byte
at a time held a connection, and a file descriptor, for ever. `DeadlineProtocol` closes a
connection whose request head is not complete HEADER_TIMEOUT_S after it began waiting for
one, or whose refused body is still coming DRAIN_S after the answer; `RequestAdmission` gives up on a
body that stalls for BODY_IDLE_S.
"""

from __future__ import annotations

import asyncio
import json

import h11
import pydantic_core
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from core.domain.text import MAX_ACTOR, MAX_DESCRIPTION, MAX_TITLE
from t25_tui.api import errors as wire
from t25_tui.api.credentials import WorkerCredentials
from t25_tui.api.operators import Operators
from t25_tui.api.protocol import HEADER as PROTOCOL_HEADER
from t25_tui.api.protocol import refused_worker, spoken
from t25_tui.api.uploads import CHUNK_BYTES

HEADER_TIMEOUT_S = 10.0  # a request head (request line and headers) arrives within this
BODY_IDLE_S = 30.0  # a body may pause this long between two reads (nginx: 60 s)
KEEP_ALIVE_S = 5  # an idle connection between two requests is closed after this
DRAIN_S = 5.0  # the rest of a refused body is read and thrown away this long at most

# JSON may spell any character as a `\uXXXX` escape, and one outside the BMP as a pair of
# them: 12 bytes for one character. Caps are sized from that worst case, so no body a
# person could legitimately send is refused for its size.
_JSON_BYTES_PER_CHAR = 12

# The largest operator body is a new task: its description, title and actor at their
# bounds (core.domain.text), and a few hundred bytes of field names and project. The same cap
# holds a worker's claim, heartbeat, release and prompt request (its QA checks' excerpts
# are 4 KiB of output each).
BODY_CAP = _JSON_BYTES_PER_CHAR * (MAX_DESCRIPTION + MAX_TITLE + MAX_ACTOR) + 16 * 2**10
# A worker sends its output in batches of at most 32 KiB of text plus one 64 KiB read
# (core.worker.output.OutputStream, adapters.process.CHUNK): under 100,000 characters, 1.2 MB
# escaped at the worst. 4 MiB leaves room for a few batches in one request.
OUTPUT_CAP = 4 * 2**20
# A completion names the run's log, uploaded before it a chunk at a time (`/worker/log`,
# t25_tui.api.uploads), and carries the final text, the diff and the prompt: 42 MiB, what
# they had beside the largest log when the log came in the completion's own body.
COMPLETION_CAP = 42 * 2**20
# One chunk of a run's log, raw bytes.
LOG_CHUNK_CAP = CHUNK_BYTES

MAX_FIELDS = 100  # fields in one JSON object: T25's widest body object has about 15

_CAPS = {
    "/worker/events": OUTPUT_CAP,
    "/worker/complete": COMPLETION_CAP,
    "/worker/log": LOG_CHUNK_CAP,
}
OPEN_PATHS = frozenset({"/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
WORKER_PREFIX = "/worker/"


def body_cap(path: str) -> int:
    return _CAPS.get(path, BODY_CAP)


class Refusal(Exception):
    """A request answered before it reaches the app, as `{error, hint, code}`.

    The answer goes out at once, whatever is left of the body; uvicorn then reads that
    remainder and throws it away (never buffering it) for at most DRAIN_S, so that an
    ordinary client, which sends its whole body before it reads, gets to see the answer.
    `close` ends the connection instead."""

    def __init__(
        self,
        status: int,
        code: str,
        error: str,
        hint: str | None = None,
        *,
        headers: dict[str, str] | None = None,
        close: bool = False,
    ) -> None:
        super().__init__(error)
        self.status, self.code, self.error, self.hint = status, code, error, hint
        self.headers = {**(headers or {}), **({"Connection": "close"} if close else {})}

    async def answer(self, send: Send) -> None:
        body = json.dumps({"error": self.error, "hint": self.hint, "code": self.code}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *((k.lower().encode(), v.encode()) for k, v in self.headers.items()),
        ]
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})


class RequestAdmission:
    """ASGI middleware: the credential, then the body's size, then the body, in that order.

    Worker routes (`/worker/…`) need a worker's credential (`t25_tui.api.credentials`)
    and this serve's protocol version (`t25_tui.api.protocol`; none said is version 1);
    every other route but OPEN_PATHS needs an operator's token, and that operator's role
    (`t25_tui.api.operators`). The app then gets the body whole, in one message, so it
    never waits on a client.
    """

    def __init__(self, app: ASGIApp, *, workers: WorkerCredentials, operators: Operators) -> None:
        self.app = app
        self.workers = workers
        self.operators = operators
        self.body_idle_s = BODY_IDLE_S

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            self._admit(scope)
            body = await self._body(scope, receive)
        except Refusal as refusal:
            await refusal.answer(send)
            return
        if body is None:  # the client went away while sending it
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if delivered:
                return await receive()  # from now on only `http.disconnect` can come
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def _admit(self, scope: Scope) -> None:
        path = scope["path"]
        if path in OPEN_PATHS:
            return
        given = _bearer(scope)
        if path.startswith(WORKER_PREFIX):
            if not self.workers.any:
                raise Refusal(
                    503,
                    wire.NO_WORKER_CREDENTIAL,
                    "this control plane was started without FACTORY_WORKER_CREDENTIAL or "
                    "T25_WORKER_CREDENTIALS; it accepts no workers",
                    hint="restart `t25 serve` with one of them set",
                )
            worker = self.workers.match(given)
            if worker is None:
                raise Refusal(
                    401,
                    wire.UNAUTHORIZED,
                    "the worker credential is missing, wrong or revoked",
                    hint="send Authorization: Bearer $FACTORY_WORKER_CREDENTIAL",
                    headers={"WWW-Authenticate": 'Bearer realm="worker"'},
                )
            if why := refused_worker(spoken(_header(scope, PROTOCOL_HEADER))):
                raise Refusal(426, wire.PROTOCOL_MISMATCH, why)  # before anything is leased
            scope.setdefault("state", {})["worker"] = worker
        else:
            operator = self.operators.match(given)
            if operator is None:
                raise Refusal(
                    401,
                    wire.UNAUTHORIZED,
                    "an operator token is required",
                    hint="on this host `t25` sends .factory/operator-token itself; elsewhere "
                    "use --token-file or T25_OPERATOR_TOKEN_FILE",
                    headers={"WWW-Authenticate": 'Bearer realm="operator"'},
                )
            if why := operator.refusal(scope["method"], path):
                raise Refusal(403, wire.FORBIDDEN, why, hint="ask an operator with that role")
            scope.setdefault("state", {})["operator"] = operator  # the actor of its decisions

    async def _body(self, scope: Scope, receive: Receive) -> bytes | None:
        cap = body_cap(scope["path"])
        for name, value in scope["headers"]:
            if name == b"content-length" and int(value) > cap:  # h11 has checked it is a number
                raise _too_large(cap)
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                message = await asyncio.wait_for(receive(), self.body_idle_s)
            except TimeoutError:
                raise Refusal(
                    408,
                    wire.BODY_STALLED,
                    f"the request body stalled for {self.body_idle_s:g} s",
                    hint="send the body without pausing",
                    close=True,
                ) from None
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > cap:  # a chunked body, or one longer than it said: stop reading now
                raise _too_large(cap)
            chunks.append(chunk)
            if not message.get("more_body", False):
                body = b"".join(chunks)
                _check_json(scope, body)
                return body


def _check_json(scope: Scope, body: bytes) -> None:
    """Refuse a JSON body that Python's parser would take but that is not JSON (a lone
    surrogate escape, which no UTF-8 text and so no store can hold; NaN; Infinity), and one
    with an object wider than MAX_FIELDS: pydantic would build an error for each field it
    does not know, and a million of them took seconds and a gigabyte. FastAPI parses the
    body again; this parse costs a fraction of that one."""
    if not body or _content_type(scope) not in ("", "json"):
        return
    try:
        parsed = pydantic_core.from_json(body, allow_inf_nan=False)
    except ValueError as exc:
        raise Refusal(
            422,
            wire.INVALID_JSON,
            f"the request body is not valid JSON ({exc})",
            hint="send UTF-8 JSON; a surrogate escape must be one of a pair",
        ) from None
    pending: list[object] = [parsed]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            if len(value) > MAX_FIELDS:
                raise Refusal(
                    422,
                    wire.INVALID_JSON,
                    f"the request body has an object of {len(value):,} fields; "
                    f"no T25 endpoint takes more than {MAX_FIELDS}",
                    hint="/openapi.json describes every endpoint's fields",
                )
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)


def _content_type(scope: Scope) -> str:
    """ "json" for a JSON media type, "" for none, "other" for any other (FastAPI's reading)."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            kind = value.split(b";")[0].strip().lower()
            return "json" if kind == b"application/json" or kind.endswith(b"+json") else "other"
    return ""


def _too_large(cap: int) -> Refusal:
    return Refusal(
        413,
        wire.BODY_TOO_LARGE,
        f"the request body is over this endpoint's {cap:,} bytes",
        hint="see the endpoint's limits in docs/guides/production.md",
    )


def _header(scope: Scope, name: str) -> str | None:
    """The value of header `name`, or None."""
    wanted = name.lower().encode()
    for key, value in scope["headers"]:
        if key == wanted:
            return bytes(value).decode("latin-1")
    return None


def _bearer(scope: Scope) -> bytes:
    """The token of `Authorization: Bearer …`, or b"" (which matches no credential)."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" else b""
    return b""


class DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, with a deadline on each request head and on each drain.

    The head clock starts when the connection opens, and again when the first byte of a
    later request arrives; the connection is closed if the head is not complete by then.
    A body still arriving after its request was answered (refused by the admission check) is read and
    dropped for DRAIN_S at most. An idle connection between two requests is uvicorn's
    keep-alive timeout's.
    """

    header_timeout_s = HEADER_TIMEOUT_S
    drain_s = DRAIN_S
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn takes a Transport where asyncio says BaseTransport
        super().connection_made(transport)
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def _watch(self) -> None:
        if self.conn.their_state is h11.IDLE:  # waiting for a head
            self._arm(self.header_timeout_s)
        elif (
            self.conn.their_state is h11.SEND_BODY and self.conn.our_state is not h11.SEND_RESPONSE
        ):
            self._arm(self.drain_s)  # answered already: what comes is thrown away
        else:  # a request is in: the app, and the admission check's body deadline, have it
            self._cancel()

    def _arm(self, seconds: float) -> None:
        if self._deadline is None:
            self._deadline = self.loop.call_later(seconds, self._too_slow)

    def _cancel(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.logger.info(
                "closing a connection whose client was too slow (state %s)", self.conn.their_state
            )
            self.transport.close()
