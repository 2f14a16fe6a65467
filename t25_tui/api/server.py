"""`t25 serve`: the control plane over REST and SSE, for remote workers and other faces.

`make_api` mounts the routers (t25_tui.api.routes) on one app and puts what they need — the
control plane, the run queue of remote workers, the event tail — in its state
(t25_tui.api.services). Operator actions build the same `Decision` the command line and the
cockpit build. Workers claim leases, stream output and complete under their fencing
token; a token that went stale or a lease that expired gets 409 `lease_lost` and nothing
it sent is kept. `/events` is Server-Sent Events with an `id:` per event, resumable from
`Last-Event-ID` out of the events table with no gap and no duplicate.

A refusal is `{error, hint, code}` with the status and the code of its error class
(t25_tui.api.errors), so a client raises what the server raised.

Security: serve binds to loopback unless told otherwise, and refuses to listen anywhere
else (every interface included) without `T25_OPERATOR_TOKEN`. Every operator endpoint needs
a token, on loopback too: the host's own (`.factory/operator-token`, made by serve, read
by the `t25` of the same checkout) or a named one. Worker endpoints always need a worker's
credential (`FACTORY_WORKER_CREDENTIAL`, or one named in T25_WORKER_CREDENTIALS; never from
t25.yaml), compared in constant time.
Both are checked before a byte of the body is read (t25_tui.api.gate), and bodies are
capped per endpoint; what a body may hold is t25_tui.api.bodies.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import ipaddress
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from core.config import held_secrets
from core.control.pipeline import Pipeline
from core.control.run_queue import LocalRunQueue
from core.control.service import ControlPlane
from core.errors import ConfigError, StoreUnavailable, T25Error
from t25_tui.api import document
from t25_tui.api import errors as wire
from t25_tui.api.bodies import invalid_request
from t25_tui.api.credentials import WORKERS_ENV, WorkerCredentials, local_operator, local_token
from t25_tui.api.gate import KEEP_ALIVE_S, DeadlineProtocol, RequestAdmission
from t25_tui.api.operators import TOKENS_ENV, Operators
from t25_tui.api.routes import decisions, diffs, events, reads, runs, tasks, worker
from t25_tui.api.services import Services, services_in
from t25_tui.api.tail import EventTail
from t25_tui.api.uploads import UPLOADS, LogUploads

CREDENTIAL_ENV = held_secrets.WORKER_CREDENTIAL
OPERATOR_ENV = held_secrets.OPERATOR_TOKEN
SHUTDOWN_GRACE_S = 10  # a stopping serve waits this long for requests in flight
RETRY_AFTER_S = 2  # what a 503 (the store unavailable for now) tells a client to wait
ROUTERS = (
    reads.router,
    tasks.router,
    diffs.router,
    decisions.router,
    runs.router,
    events.router,
    worker.router,
)


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
    operators: Operators | None = None,
    workers: WorkerCredentials | None = None,
) -> FastAPI:
    """The REST/SSE app over one control plane. Tests, `t25 serve` and `t25 tui --serve` share it.
    `operators` are the named tokens it accepts; `operator_token` alone is the single one;
    the host's own operator (`.factory/operator-token`) is always one more. `workers` are
    the credentials it accepts from workers (default: `worker_credential`, and the file
    T25_WORKER_CREDENTIALS names)."""
    if operators is None and operator_token:
        operators = Operators.single(operator_token)
    if not loopback and operators is None:
        raise ConfigError(
            "serve binds beyond loopback but T25_OPERATOR_TOKEN is not set",
            hint="set T25_OPERATOR_TOKEN, or bind to 127.0.0.1",
        )
    own = local_token(control.config.root)
    operators = (operators or Operators({})).adding(local_operator(), own)
    if workers is None:
        listed = os.environ.get(WORKERS_ENV, "").strip()
        workers = WorkerCredentials(worker_credential, Path(listed) if listed else None)
    api = FastAPI(
        title="T25 control plane",
        version="1",
        description="Tasks, runs, artifacts, events, decisions and the worker lease "
        "protocol of one T25 installation.",
    )
    api.state.t25 = Services(
        control=control,
        runs=LocalRunQueue(control, Pipeline(control)),
        tail=EventTail(control.store),
        uploads=LogUploads(
            control.config.root / ".factory" / UPLOADS, control.config.limits.max_log_bytes
        ),
    )
    for router in ROUTERS:
        api.include_router(router)
    api.add_exception_handler(T25Error, refused)
    api.add_exception_handler(RequestValidationError, invalid)
    api.add_exception_handler(StarletteHTTPException, http_error)
    projects = [p.name for p in control.config.projects]
    api.openapi = functools.partial(  # type: ignore[method-assign]  # FastAPI's documented override
        document.openapi, api, projects=projects
    )
    api.add_middleware(RequestAdmission, workers=workers, operators=operators)
    return api


# Starlette hands a handler any Exception; each is registered for one class, and narrows to it.


async def refused(_: Request, exc: Exception) -> JSONResponse:
    """A T25 error: its message, its hint, its code and its status (t25_tui.api.errors)."""
    if not isinstance(exc, T25Error):
        raise exc
    found = wire.wire_error(exc)
    headers = {"Retry-After": str(RETRY_AFTER_S)} if isinstance(exc, StoreUnavailable) else None
    return JSONResponse(
        {"error": exc.message, "hint": exc.hint, "code": found.code},
        status_code=found.status,
        headers=headers,
    )


async def invalid(_: Request, exc: Exception) -> JSONResponse:
    if not isinstance(exc, RequestValidationError):
        raise exc
    return JSONResponse(invalid_request(exc.errors()), status_code=422)


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    if not isinstance(exc, StarletteHTTPException):
        raise exc
    headers = dict(exc.headers or {})
    code = {404: wire.NO_ROUTE, 405: wire.METHOD_NOT_ALLOWED}.get(exc.status_code, wire.HTTP_ERROR)
    if exc.status_code == 405:  # Starlette names the methods of one route; a path has several
        headers["Allow"] = ", ".join(sorted(_methods_at(request)))
    return JSONResponse(
        {"error": str(exc.detail), "hint": None, "code": code},
        status_code=exc.status_code,
        headers=headers,
    )


def _methods_at(request: Request) -> set[str]:
    return {
        method
        for route in request.app.routes
        if isinstance(route, APIRoute) and route.matches(request.scope)[0] is Match.PARTIAL
        for method in route.methods or ()
    }


def http_server(
    control: ControlPlane, bind: str, *, handle_signals: bool = True, bound: bool = False
) -> uvicorn.Server:
    """A uvicorn server for `make_api` on `bind`. Embedded in the cockpit it leaves signals
    to its host (`handle_signals=False`), which stops it on SIGHUP/SIGTERM itself. `bound`:
    the caller holds the listening socket already and serves on it (the port is not probed).

    Beyond loopback without T25_OPERATOR_TOKEN it refuses (ConfigError) before any port
    is opened."""
    host, port = parse_bind(bind)
    token = held_secrets.get(OPERATOR_ENV)
    operators = configured_operators()
    if not is_loopback(host) and not (token or operators):
        where = (
            "every interface" if host in ("", "0.0.0.0", "::") else f"{host}, which is not loopback"
        )
        raise ConfigError(
            f"serve would listen on {where} ({bind}) without T25_OPERATOR_TOKEN",
            hint="set T25_OPERATOR_TOKEN for remote operators, or bind to 127.0.0.1",
        )
    if not bound:
        port_is_free(host, port)
    api = make_api(
        control,
        worker_credential=held_secrets.get(CREDENTIAL_ENV),
        operator_token=token,
        loopback=is_loopback(host),
        operators=operators,
    )
    return server_for(api, host, port, handle_signals=handle_signals)


def configured_operators() -> Operators | None:
    """The operators T25's environment names (T25_OPERATOR_TOKENS, with T25_OPERATOR_TOKEN),
    or None when it names none; the host's own operator is added where a server starts."""
    token = held_secrets.get(OPERATOR_ENV)
    listed = os.environ.get(TOKENS_ENV, "").strip()
    if listed:
        return Operators.read(Path(listed), token)
    return Operators.single(token) if token else None


def port_is_free(host: str, port: int) -> None:
    """Refuse, in one line with a hint, an address something already listens on: uvicorn
    would otherwise log its own error and exit 3 after T25 said it was serving."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host or "0.0.0.0", port))  # `:PORT`: every interface
        except OSError as exc:
            if exc.errno not in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
                raise
            why = {
                errno.EADDRINUSE: "is in use (another `t25 serve`, or another program)",
                errno.EACCES: "needs privileges this user lacks",
                errno.EADDRNOTAVAIL: "is not an address of this machine",
            }[exc.errno]
            raise ConfigError(
                f"serve cannot listen on {host or '*'}:{port}: the address {why}",
                hint=f"choose another port (--bind {host or '127.0.0.1'}:{port + 1}, or "
                "serve.bind in t25.yaml), or stop what listens there "
                f"(`ss -ltnp 'sport = :{port}'` names it)",
            ) from None


class _Server(uvicorn.Server):
    """uvicorn for one `make_api` app: its SSE streams end when it stops, and its host may
    keep the signals to itself."""

    def __init__(self, config: uvicorn.Config, api: FastAPI, *, handle_signals: bool) -> None:
        super().__init__(config)
        self.api, self.handle_signals = api, handle_signals

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if self.handle_signals:
            with super().capture_signals():
                yield
        else:
            yield

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        services_in(self.api).tail.close()
        await super().shutdown(sockets)


def server_for(
    api: FastAPI, host: str, port: int, *, handle_signals: bool = True
) -> uvicorn.Server:
    """uvicorn for one `make_api` app: its SSE streams end when it stops (they would hold a
    graceful shutdown open for ever), and any other request gets SHUTDOWN_GRACE_S. A
    request head must arrive within gate.HEADER_TIMEOUT_S; a connection idle between
    requests is closed after KEEP_ALIVE_S."""
    config = uvicorn.Config(
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
    return _Server(config, api, handle_signals=handle_signals)


__all__ = [
    "configured_operators",
    "http_server",
    "is_loopback",
    "make_api",
    "parse_bind",
    "server_for",
    "services_in",
]
