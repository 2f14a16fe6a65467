"""The HTTP client of a `t25 serve` (and its replicas), and the run queue a remote worker
leases from over it.

`t25 worker --url` (t25_tui.runtime.work_remotely) loads the local t25.yaml (repositories,
roles, QA checks), claims runs from a `t25 serve` control plane through `HttpRunQueue`,
works them in local worktrees with the local agent CLIs, streams output back and
completes under its fencing token. A refusal raises the class the server raised (its
code, t25_tui.api.errors): when the lease is gone (409 `lease_lost`) the agent is stopped
and nothing more is sent. A call serve did not take (no answer, 502, 503, 504) is retried
under one idempotency key while the lease holds (`HttpRunQueue`); output waits in an
outbox meanwhile (t25_tui.api.outbox). Given more than one URL (`--url A --url B`: serve
replicas on one Postgres), a call that one of them did not take goes to the next at once
(`Http`); the backoff comes only after every address failed. On SIGTERM or SIGINT it hands
its leases back.

Every request says the worker protocol's version (t25_tui.api.protocol); before its first
claim, and again after serve was away, the run queue reads serve's from `/health`, and a
serve of another version (a 426 later on too) ends the worker with ProtocolMismatch,
before any agent runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pydantic

from core.config.held_secrets import WORKER_CREDENTIAL as CREDENTIAL_ENV
from core.domain.agent import RunLog
from core.domain.backoff import Backoff
from core.domain.events import Event, RunStarted
from core.domain.models import Author, CheckResult, Lease, ResumableSession, Run, Task
from core.domain.reports import RunReport
from core.errors import (
    ControlPlaneUnreachable,
    CredentialRefused,
    InvalidInput,
    LeaseLost,
    ProtocolMismatch,
    T25Error,
)
from core.ports import Claim
from t25_tui.api import errors as wire
from t25_tui.api.idempotency import HEADER as IDEMPOTENCY_HEADER
from t25_tui.api.idempotency import RETRY_HEADER
from t25_tui.api.outbox import Outbox
from t25_tui.api.protocol import HEADER as PROTOCOL_HEADER
from t25_tui.api.protocol import PROTOCOL, refused_serve, spoken
from t25_tui.api.uploads import CHUNK_BYTES as UPLOAD_CHUNK_BYTES

log = logging.getLogger("t25.remote")

TRANSIENT_STATUSES = frozenset({502, 503, 504})  # serve, or its store, away for now
RETRY = Backoff(0.5, 5.0, jitter=0.2)  # pauses between tries of a call serve did not take
# The time a try needs before its lease lapses: the last pause is cut short to leave it,
# so a serve back just before the lapse still hears the worker.
LAST_TRY_S = 1.0
CREDENTIAL_PAUSES = (1.0, 3.0)  # a refused credential is tried twice more, then given up
RELEASE_PATIENCE_S = 5.0  # a release not taken by then is left to the lease's lapse
# Serve closes a connection idle for KEEP_ALIVE_S (5 s, t25_tui.api.gate). A client that kept
# one as long (httpx's default) could send a request on it as serve closes it, and read
# nothing back; so the client lets an idle connection go well before.
IDLE_CONNECTION_S = 2.0
LIMITS = httpx.Limits(
    max_connections=100, max_keepalive_connections=20, keepalive_expiry=IDLE_CONNECTION_S
)


class Http:
    """A client of a `t25 serve` and its replicas: their base URLs, a bearer secret,
    refusals as T25 errors.

    Requests go to one address at a time (`url`). One that does not answer, or answers
    502, 503 or 504, moves this client on to the next address at once (one log line
    says so), and the request is sent there; it stays there until that one fails in
    turn. Replicas share one Postgres, so any of them can answer any request."""

    def __init__(
        self, urls: str | Sequence[str], secret: str | None, *, timeout_s: float = 30.0
    ) -> None:
        listed = [urls] if isinstance(urls, str) else list(urls)
        if not listed:
            raise ValueError("a client needs at least one URL")
        self.urls = [u.rstrip("/") for u in listed]
        self.at = 0  # the address in use
        headers = {PROTOCOL_HEADER: str(PROTOCOL)}
        if secret:
            headers["Authorization"] = f"Bearer {secret}"
        self.clients = [
            httpx.AsyncClient(base_url=u, timeout=timeout_s, headers=headers, limits=LIMITS)
            for u in self.urls
        ]

    @property
    def url(self) -> str:
        """The address in use."""
        return self.urls[self.at]

    @property
    def client(self) -> httpx.AsyncClient:
        """The HTTP client of the address in use."""
        return self.clients[self.at]

    async def close(self) -> None:
        for client in self.clients:
            await client.aclose()

    def move_on(self, failed: int, why: str) -> None:
        """The address at index `failed` failed (`why`): use the next one, unless another
        request has moved on from it already."""
        if len(self.urls) > 1 and self.at == failed:
            self.at = (failed + 1) % len(self.urls)
            log.warning("switching to %s after %s failed (%s)", self.url, self.urls[failed], why)

    async def send(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """Send one request and return what was answered, trying each address at most once:
        the first answer that is not 502, 503 or 504, else the last such answer. When no
        address answered at all (refused connection, reset, timeout) it raises
        ControlPlaneUnreachable."""
        last: httpx.Response | ControlPlaneUnreachable | None = None
        for _ in self.urls:
            at = self.at
            try:
                response = await self.clients[at].request(method, path, **kw)
            except httpx.HTTPError as exc:
                why = str(exc) or type(exc).__name__
                last = ControlPlaneUnreachable(
                    f"{self.urls[at]}{path}: {why}",
                    hint="is `t25 serve` running there, and reachable from this host?",
                )
                last.__cause__ = exc
            else:
                if response.status_code not in TRANSIENT_STATUSES:
                    return response
                last, why = response, f"{path} answered {response.status_code}"
            self.move_on(at, why)
        if isinstance(last, ControlPlaneUnreachable):
            raise last
        assert last is not None
        return last

    async def request(
        self,
        method: str,
        path: str,
        *,
        refusals: Mapping[int, type[T25Error]] | None = None,
        otherwise: type[T25Error] = T25Error,
        **kw: Any,
    ) -> httpx.Response:
        """Send one request (`send`). A status of 400 or more raises the error class the
        server raised (its `code`, t25_tui.api.errors) with its message and hint; a refusal
        that names no class (the admission check's, or a code this client does not know) raises
        `refusals[status]`, or `otherwise`."""
        response = await self.send(method, path, **kw)
        refuse(response, path, refusals=refusals, otherwise=otherwise)
        return response


def refuse(
    response: httpx.Response,
    path: str,
    *,
    refusals: Mapping[int, type[T25Error]] | None = None,
    otherwise: type[T25Error] = T25Error,
) -> None:
    """Raise what a status of 400 or more says (see `Http.request`); nothing below 400."""
    if response.status_code < 400:
        return
    said = refusal(response)
    raised = wire.error_class(said.code)
    if raised is not None:
        raise raised(said.error, hint=said.hint)
    expected = (refusals or {}).get(response.status_code)
    if expected is not None:  # an answer the caller expects
        raise expected(said.error, hint=said.hint)
    raise otherwise(f"{path} answered {response.status_code}: {said.error}", hint=said.hint)


@dataclass(frozen=True)
class Refusal:
    """What a refused request was told: T25's `error`, `hint` and `code`, or what there was."""

    error: str
    hint: str | None = None
    code: str | None = None


def refusal(response: httpx.Response) -> Refusal:
    """What a refused request said: T25's `error`/`hint`/`code`, FastAPI's `detail`, or the text."""
    try:
        body = response.json()
    except ValueError:
        return Refusal(response.text[:200] or response.reason_phrase)
    if not isinstance(body, dict):
        return Refusal(str(body)[:200])
    detail = body.get("detail")
    if isinstance(detail, list) and detail:
        return _first_invalid(detail[0])
    hint, code = body.get("hint"), body.get("code")
    return Refusal(
        str(body.get("error") or detail or body)[:500],
        hint=hint if isinstance(hint, str) else None,
        code=code if isinstance(code, str) else None,
    )


def _first_invalid(first: Any) -> Refusal:
    """FastAPI's own request validation: the field, and what was wrong with it."""
    if not isinstance(first, dict):
        return Refusal(str(first)[:200])
    where = ".".join(str(part) for part in first.get("loc", ())[1:])
    return Refusal(f"{where}: {first.get('msg')}" if where else str(first.get("msg")))


class HttpRunQueue:
    """The run queue (core.ports.RunQueue) of a `t25 serve`, over its REST API, riding out
    short outages; of its replicas too, failing over between them (`Http`).

    Every call is retried with backoff (`RETRY`) when no serve answers, or each answers
    502, 503 or 504 (restarting, its store away), under one `Idempotency-Key` per logical
    call, which serve honours for claim, events, complete and release: a call whose answer
    was lost is answered again, not done twice. A call under a lease is retried while the
    lease would still hold (the last time serve extended it, plus its ttl), then raises
    LeaseLost: the run is not ours any more. A claim is retried for `lease_ttl_s`, then
    raises what it met. Output is buffered per lease (t25_tui.api.outbox) and sent in order;
    a completion first waits for its run's output, then uploads its log in chunks
    (`upload_log`: each retried like any call, kept once by serve however often it is sent). Only a 409 (`lease_lost`) stops an
    agent. A 401 or 403 is tried again after a short pause, then raises CredentialRefused.
    """

    def __init__(
        self,
        urls: str | Sequence[str],
        credential: str,
        *,
        lease_ttl_s: float = 30.0,
        timeout_s: float = 30.0,
        retry: Backoff = RETRY,
        credential_pauses: tuple[float, ...] = CREDENTIAL_PAUSES,
    ) -> None:
        self.lease_ttl_s = lease_ttl_s  # every call that proves the lease also extends it
        self.timeout_s = timeout_s
        self.retry = retry
        self.credential_pauses = credential_pauses
        self.http = Http(urls, credential, timeout_s=timeout_s)
        self.holds: dict[tuple[str, int], float] = {}  # lease -> when it would lapse (monotonic)
        self.outboxes: dict[tuple[str, int], Outbox] = {}
        self.agreed = False  # serve's protocol was read and is ours; again after an outage

    async def close(self) -> None:
        senders = [o.sender for o in self.outboxes.values() if o.sender is not None]
        for outbox in self.outboxes.values():
            outbox.close()
        await asyncio.gather(*senders, return_exceptions=True)
        await self.http.close()

    def _prune(self) -> None:
        """Forget leases that lapsed a while ago: lost, their worker said nothing more."""
        long_ago = time.monotonic() - 2 * self.lease_ttl_s
        for key in [k for k, lapses in self.holds.items() if lapses < long_ago]:
            self.holds.pop(key, None)
            outbox = self.outboxes.pop(key, None)
            if outbox is not None:
                outbox.close()

    def _held(self, lease: Lease, ttl_s: float) -> None:
        """Serve extended `lease` by `ttl_s` just now."""
        self.holds[_key(lease)] = time.monotonic() + ttl_s

    def _lapses(self, lease: Lease) -> float:
        return self.holds.get(_key(lease), time.monotonic() + self.lease_ttl_s)

    async def _post(
        self, path: str, body: dict[str, Any], *, until: float, lease: Lease | None
    ) -> httpx.Response:
        """POST `body`, retried until `until` (monotonic) as the class says. Past it, a call
        under a lease raises LeaseLost; a claim raises the last failure."""
        return await self._retried("POST", path, until=until, lease=lease, json=body)

    async def _retried(
        self, method: str, path: str, *, until: float, lease: Lease | None, **kw: Any
    ) -> httpx.Response:
        """Send one call (`kw`: its body, query and headers), retried as `_post` says."""
        headers = {IDEMPOTENCY_HEADER: str(uuid.uuid4()), **kw.pop("headers", {})}
        pauses = self.retry.pauses()
        refused = iter(self.credential_pauses)
        tries = 0
        while True:
            tries += 1
            if tries > 1:
                headers[RETRY_HEADER] = str(tries)
            left = until - time.monotonic()
            try:
                response = await self.http.send(
                    method,
                    path,
                    headers=headers,
                    **kw,
                    # each address of a round gets its share of the time left, so that a
                    # replica that hangs leaves the next one time to answer
                    timeout=max(1.0, min(self.timeout_s, left / len(self.http.urls))),
                )
                if response.status_code in (401, 403):
                    await self._refused(response, path, next(refused, None))
                    continue
                if response.status_code not in TRANSIENT_STATUSES:
                    # The server's error class, from its code: LeaseLost when the lease is
                    # gone, StaleState when a decision beat this run's. A 409 with no code
                    # (an older serve) means the lease is gone.
                    refuse(response, path, refusals={409: LeaseLost}, otherwise=T25Error)
                    return response
                said = refusal(response)
                failure: T25Error = ControlPlaneUnreachable(
                    f"{path} answered {response.status_code}: {said.error}", hint=said.hint
                )
            except ControlPlaneUnreachable as exc:
                failure = exc
            self.agreed = False  # the serve that answers next may be another one
            left = until - time.monotonic()
            if left <= LAST_TRY_S:  # no time for another try before the lease lapses
                if lease is None:
                    raise failure
                raise LeaseLost(
                    f"gave up on {path} for {lease.run_id} after {tries} tries: its lease "
                    f"has lapsed by now ({failure.message})",
                    hint="the run goes back to the queue; check the link to serve",
                )
            pause = min(next(pauses), left - LAST_TRY_S)  # the last try lands in time
            log.warning("%s failed (%s); trying again in %.1f s", path, failure, pause)
            await asyncio.sleep(pause)

    async def _refused(self, response: httpx.Response, path: str, pause: float | None) -> None:
        """Serve refused the worker credential: tried again after `pause` (a credential
        being rotated), or CredentialRefused once the pauses are spent."""
        if pause is None:
            raise CredentialRefused(
                f"serve refused the worker credential ({response.status_code}): "
                f"{refusal(response).error}",
                hint=f"check {CREDENTIAL_ENV}: it must be the one `t25 serve` at "
                f"{self.http.url} was started with",
            )
        log.warning("%s answered %d; trying again in %.1f s", path, response.status_code, pause)
        await asyncio.sleep(pause)

    async def agree(self, until: float) -> None:
        """Read serve's protocol from `/health` (none said: version 1), retried as a claim is
        until `until` (monotonic); raise ProtocolMismatch, saying which side to upgrade,
        unless it is this worker's."""
        health = (await self._retried("GET", "/health", until=until, lease=None)).json()
        said = health.get("protocol") if isinstance(health, dict) else None
        serve = spoken(None if said is None else str(said))
        version = health.get("version") if isinstance(health, dict) else None
        if why := refused_serve(serve, version if isinstance(version, str) else None):
            raise ProtocolMismatch(why)
        self.agreed = True

    async def owner(self) -> str | None:
        """The name serve's installation gives its worktrees (core.workspace.ownership);
        None from a serve that does not say (an older one refuses the path, or its answer
        names none)."""
        until = time.monotonic() + self.lease_ttl_s
        try:
            response = await self._retried("GET", "/worker/owner", until=until, lease=None)
        except (ControlPlaneUnreachable, CredentialRefused, ProtocolMismatch):
            raise
        except T25Error as exc:
            log.warning("serve does not name its installation (%s)", exc)
            return None
        try:
            named = response.json().get("owner")
        except (ValueError, AttributeError):  # not JSON, or not an object
            named = None
        return named if isinstance(named, str) and named else None

    async def claim(self, worker: str, ttl_s: float) -> Claim | None:
        self._prune()
        asked = time.monotonic()
        if not self.agreed:
            await self.agree(until=asked + ttl_s)
        response = await self._post(
            "/worker/claim", {"worker": worker, "ttl_s": ttl_s}, until=asked + ttl_s, lease=None
        )
        if response.status_code == 204:
            return None
        data = response.json()
        lease = Lease.model_validate(data["lease"])
        self.holds[_key(lease)] = asked + ttl_s
        try:
            return Claim(
                lease,
                Run.model_validate(data["run"]),
                Task.model_validate(data["task"]),
                tuple(Author.model_validate(a) for a in data.get("authors", [])),
                ResumableSession.model_validate(data["resume"]) if data.get("resume") else None,
            )
        except pydantic.ValidationError as exc:  # a serve that should have said its version
            await self.release(lease)
            raise ProtocolMismatch(
                f"serve sent a claim this worker cannot read ({_first_error(exc)}); "
                f"the run is handed back: upgrade this worker to serve's T25"
            ) from exc

    async def heartbeat(self, lease: Lease, ttl_s: float) -> Lease:
        response = await self._under(lease, "/worker/heartbeat", {"ttl_s": ttl_s}, ttl_s)
        return Lease.model_validate(response.json())

    async def prompt(
        self,
        lease: Lease,
        run: Run,
        task: Task,
        checks: list[CheckResult],
        *,
        continuing: bool = False,
    ) -> str:
        body = {
            "ttl_s": self.lease_ttl_s,
            "checks": [c.model_dump(mode="json") for c in checks],
            "continuing": continuing,
        }
        response = await self._under(lease, "/worker/prompt", body, self.lease_ttl_s)
        return str(response.json()["prompt"])

    async def record(self, lease: Lease, event: Event) -> None:
        """Put `event` in its lease's outbox; it is sent in order, soon (t25_tui.api.outbox).
        A `RunStarted` is waited for: serve holds it before the agent starts (store.reaping)."""
        key = _key(lease)
        outbox = self.outboxes.get(key)
        if outbox is None:

            async def send(events: list[dict[str, Any]]) -> None:
                body = {"ttl_s": self.lease_ttl_s, "events": events}
                await self._under(lease, "/worker/events", body, self.lease_ttl_s)

            outbox = self.outboxes[key] = Outbox(lease.run_id, send)
        outbox.put({"kind": event.kind, **event.model_dump(mode="json", exclude={"id"})})
        if isinstance(event, RunStarted):  # the agent starts once serve holds the fact: a
            await outbox.drain()  # lapse of this lease then costs the run its attempt

    async def complete(self, lease: Lease, report: RunReport) -> None:
        """Send the run's output still waiting, its log (`upload_log`), then its report."""
        await self._flushed(lease)
        log = report.result.log if report.result is not None else None
        body = {"report": report.model_dump(mode="json")}
        try:
            if log is not None:
                await self.upload_log(lease, log)
            try:
                await self._under(lease, "/worker/complete", body)
            except InvalidInput:
                if log is None:
                    raise
                # The serve that took the completion has not all of the log: another replica
                # took the upload. Once more, to this one.
                await self.upload_log(lease, log)
                await self._under(lease, "/worker/complete", body)
        finally:
            self._forget(lease)

    async def upload_log(self, lease: Lease, log: RunLog) -> None:
        """Send the run's log file to serve a chunk at a time (`PUT /worker/log`), each from
        where serve says its copy ends: a chunk whose answer was lost is sent again and kept
        once. Each call proves the lease and extends it. Never holds more than a chunk."""
        query = {
            "run_id": lease.run_id,
            "task_id": lease.task_id,
            "token": lease.token,
            "worker": lease.worker,
            "ttl_s": self.lease_ttl_s,
        }
        offset = 0
        for _ in range(3 * (log.size // UPLOAD_CHUNK_BYTES) + 10):  # serve may send us back
            chunk = await asyncio.to_thread(_read_at, log.path, offset)
            response = await self._retried(
                "PUT",
                "/worker/log",
                until=self._lapses(lease),
                lease=lease,
                params=query | {"offset": offset},
                content=chunk,
                headers={"Content-Type": "application/octet-stream"},
            )
            self._held(lease, self.lease_ttl_s)
            offset = int(response.json()["received"])
            if offset >= log.size:
                return
        raise T25Error(
            f"serve did not take the log of {lease.run_id}: it kept asking for it again",
            hint="check that one serve (or replicas on one store) answers this worker",
        )

    async def release(self, lease: Lease) -> None:
        """Hand the run back; when serve cannot be reached soon, its lease lapses by itself."""
        outbox = self.outboxes.get(_key(lease))
        if outbox is not None:
            outbox.close()
        until = min(self._lapses(lease), time.monotonic() + RELEASE_PATIENCE_S)
        try:
            await self._post("/worker/release", _lease(lease), until=until, lease=lease)
        except LeaseLost as exc:
            log.info("release of %s: %s", lease.run_id, exc)
        finally:
            self._forget(lease)

    async def _under(
        self, lease: Lease, path: str, body: dict[str, Any], ttl_s: float | None = None
    ) -> httpx.Response:
        """POST under `lease` while it would hold; a call that extends it (`ttl_s`) says so."""
        response = await self._post(
            path, _lease(lease) | body, until=self._lapses(lease), lease=lease
        )
        if ttl_s is not None:
            self._held(lease, ttl_s)
        return response

    async def _flushed(self, lease: Lease) -> None:
        outbox = self.outboxes.get(_key(lease))
        if outbox is not None:
            await outbox.drain()

    def _forget(self, lease: Lease) -> None:
        key = _key(lease)
        self.holds.pop(key, None)
        outbox = self.outboxes.pop(key, None)
        if outbox is not None:
            outbox.close()


def _first_error(exc: pydantic.ValidationError) -> str:
    """The first field a model refused, and why."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def _read_at(path: Path, offset: int) -> bytes:
    """At most one upload's chunk of a file, from `offset`."""
    with open(path, "rb") as file:
        file.seek(offset)
        return file.read(UPLOAD_CHUNK_BYTES)


def _key(lease: Lease) -> tuple[str, int]:
    return lease.run_id, lease.token


def _lease(lease: Lease) -> dict[str, Any]:
    return {"lease": lease.model_dump(mode="json")}
