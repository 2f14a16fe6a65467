"""`t25 tui --url`: the cockpit attached to a remote `t25 serve`, over REST and SSE.

The cockpit needs a few reads and the operator decisions from its control plane. Here each is
a REST call, and the control plane runs it through the same ControlPlane method as its own
command line, so the checks and the audit are the same. Events arrive on one SSE stream
and are published on a local EventBus, so the app cannot tell this control plane from a local
one. A stream that breaks is reopened from the last id seen (`Last-Event-ID`): nothing
is missed, nothing is shown twice, and the board is re-read once the link is back.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import httpx
from httpx_sse import SSEError, aconnect_sse

from core.config.schema import Config
from core.control.audit import AuditEntry, Verdict
from core.domain.events import Event, EventBus
from core.domain.models import Artifact, Run, RunStatus, Task, TaskState, TaskType
from core.errors import (
    ArtifactCorrupted,
    ConfigError,
    ControlPlaneUnreachable,
    NotFound,
    PolicyRefused,
    T25Error,
)
from t25_tui.api.worker_client import Http

log = logging.getLogger("t25.attach")

OPERATOR_ENV = "T25_OPERATOR_TOKEN"
REFUSALS: dict[int, type[T25Error]] = {404: NotFound, 409: PolicyRefused}
RETRY_S = (0.5, 10.0)  # first and longest wait before the event stream is reopened
SILENCE_S = 45.0  # serve pings an idle stream every 15 s: this long without a byte is a dead link
PAGE = 5000  # the most events the control plane returns per request


@asynccontextmanager
async def attach(url: str, token: str | None = None) -> AsyncIterator[RemoteControlPlane]:
    """A factory backed by the control plane at `url`, following its events until exit."""
    http = Http(url, token if token is not None else os.environ.get(OPERATOR_ENV))
    try:
        control = await RemoteControlPlane.connect(http)
        following = asyncio.create_task(control.follow(), name="t25-attach-events")
        try:
            yield control
        finally:
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)
    finally:
        await http.close()


class RemoteControlPlane:
    """What the cockpit asks of a ControlPlane (reads, decisions, bus, audit), over REST + SSE."""

    def __init__(self, http: Http, config: Config, cursor: int) -> None:
        self.http, self.url = http, http.url
        self.config = config
        self.cursor = cursor  # the newest event id this cockpit has been given
        self.connected = False
        self.bus = EventBus()
        self.store = RemoteStore(self)
        self.audit = RemoteAudit(self)

    @classmethod
    async def connect(cls, http: Http) -> RemoteControlPlane:
        """Read the control plane's configuration; refuse clearly if it will not talk to us."""
        try:
            raw = await http.request("GET", "/config", refusals={401: ConfigError})
        except ConfigError as exc:
            raise ConfigError(
                f"{http.url} refused this cockpit: {exc.message}",
                hint=f"set {OPERATOR_ENV} to the token `t25 serve` was started with",
            ) from None
        try:
            config = Config.model_validate_json(raw.content)
        except ValueError as exc:
            raise ControlPlaneUnreachable(
                f"{http.url} answered /config with something that is not a T25 configuration",
                hint="is that a `t25 serve` of the same T25 version?",
            ) from exc
        health = (await http.request("GET", "/health")).json()
        return cls(http, config, int(health["last_event_id"]))

    def link(self) -> str:
        """The status line's word on the connection."""
        return f"attached to {self.url}" if self.connected else f"reconnecting to {self.url}…"

    # -- reads and decisions -------------------------------------------------------------------

    async def get(self, path: str, **params: Any) -> Any:
        query = {k: v for k, v in params.items() if v is not None}
        return (await self.http.request("GET", path, params=query, refusals=REFUSALS)).json()

    async def post(self, path: str, body: dict[str, Any]) -> Task:
        response = await self.http.request("POST", path, json=body, refusals=REFUSALS)
        return Task.model_validate(response.json())

    async def task(self, ref: str) -> Task:
        return Task.model_validate((await self.get(f"/tasks/{_ref(ref)}"))["task"])

    async def new_task(
        self,
        title: str,
        *,
        actor: str,
        type: TaskType = TaskType.FEAT,
        description: str = "",
        project: str | None = None,
    ) -> Task:
        return await self.post(
            "/tasks",
            {
                "title": title,
                "type": TaskType(type).value,
                "description": description,
                "project": project,
                "actor": actor,
            },
        )

    async def answer(self, ref: str, text: str, *, actor: str) -> Task:
        return await self.post(f"/tasks/{_ref(ref)}/answer", {"text": text, "actor": actor})

    async def decide(self, verb: str, ref: str, actor: str, reason: str) -> Task:
        return await self.post(f"/tasks/{_ref(ref)}/{verb}", {"actor": actor, "reason": reason})

    async def approve(self, ref: str, *, actor: str, reason: str = "") -> Task:
        return await self.decide("approve", ref, actor, reason)

    async def reject(self, ref: str, *, actor: str, reason: str) -> Task:
        return await self.decide("reject", ref, actor, reason)

    async def merge(self, ref: str, *, actor: str, reason: str = "") -> Task:
        return await self.decide("merge", ref, actor, reason)

    async def cancel(self, ref: str, *, actor: str, reason: str = "") -> Task:
        return await self.decide("cancel", ref, actor, reason)

    async def retry(self, ref: str, *, actor: str, reason: str = "") -> Task:
        return await self.decide("retry", ref, actor, reason)

    async def archive(self, ref: str, *, actor: str, reason: str = "") -> Task:
        return await self.decide("archive", ref, actor, reason)

    # -- events --------------------------------------------------------------------------------

    async def follow(self) -> None:
        """Publish the control plane's events on the bus, for as long as the cockpit runs."""
        wait = RETRY_S[0]
        while True:
            try:
                await self._stream()
            except (httpx.HTTPError, SSEError, T25Error, ValueError) as exc:
                log.info("event stream from %s broke: %s", self.url, exc)
            if self.connected:  # it was up: the first retry comes soon again
                wait = RETRY_S[0]
            self._linked(False)
            await asyncio.sleep(wait)
            wait = min(wait * 2, RETRY_S[1])

    async def _stream(self) -> None:
        headers = {"Last-Event-ID": str(self.cursor)}
        timeout = httpx.Timeout(10.0, read=SILENCE_S)
        async with aconnect_sse(
            self.http.client, "GET", "/events", headers=headers, timeout=timeout
        ) as source:
            if source.response.status_code != 200:
                await source.response.aread()
                raise ControlPlaneUnreachable(f"/events answered {source.response.status_code}")
            self._linked(True)
            async for sse in source.aiter_sse():
                if sse.event == "reset":  # the control plane's store is not the one we followed
                    self.cursor = int(sse.json()["last_id"])
                    self.bus.resync()
                    return
                if not sse.id or not sse.data:  # the `retry:` field, a keepalive ping
                    continue
                event = Event.from_json(sse.json())
                if event.id > self.cursor:
                    self.cursor = event.id
                    self.bus.publish(event)

    def _linked(self, up: bool) -> None:
        if up != self.connected:
            self.connected = up
            self.bus.resync()  # the status line changes, and what was missed is re-read


class RemoteStore:
    """The store reads the cockpit makes, answered by the control plane."""

    def __init__(self, remote: RemoteControlPlane) -> None:
        self.remote = remote

    async def last_event_id(self) -> int:
        return self.remote.cursor  # the event stream keeps it current; no request needed

    async def list_tasks(
        self,
        *,
        states: list[TaskState] | None = None,
        project: str | None = None,
        include_archived: bool = False,
    ) -> list[Task]:
        found = await self.remote.get(
            "/tasks",
            state=[s.value for s in states or ()] or None,
            project=project,
            archived=include_archived,
        )
        return [Task.model_validate(t) for t in found]

    async def list_runs(
        self, *, task_id: str | None = None, status: RunStatus | None = None
    ) -> list[Run]:
        found = await self.remote.get("/runs", task=task_id, status=status and status.value)
        return [Run.model_validate(r) for r in found]

    async def cost_by_task(self) -> dict[str, float]:
        return await self.remote.get("/cost/tasks")

    async def list_artifacts(self, *, task_id: str | None = None) -> list[Artifact]:
        return [
            Artifact.model_validate(a) for a in await self.remote.get("/artifacts", task=task_id)
        ]

    async def get_artifact(self, artifact_id: str) -> tuple[Artifact, bytes]:
        response = await self.remote.http.request(
            "GET", f"/artifacts/{_ref(artifact_id)}", refusals=REFUSALS
        )
        artifact = Artifact.model_validate_json(response.headers["X-T25-Artifact"])
        if hashlib.sha256(response.content).hexdigest() != artifact.sha256:
            raise ArtifactCorrupted(
                f"{artifact.id} arrived damaged: its content does not match its SHA-256"
            )
        return artifact, response.content

    async def events_after(self, after_id: int, *, task_id: str, limit: int = 1000) -> list[Event]:
        """One task's events after `after_id` (the control plane serves them per task)."""
        out: list[Event] = []
        while len(out) < limit:
            page = await self.remote.get(
                f"/tasks/{_ref(task_id)}/events", after=after_id, limit=min(PAGE, limit - len(out))
            )
            out.extend(Event.from_json(e) for e in page)
            if len(page) < PAGE:
                break
            after_id = out[-1].id
        return out


class RemoteAudit:
    """The audit log as the control plane reads and verifies it."""

    def __init__(self, remote: RemoteControlPlane) -> None:
        self.remote = remote

    async def snapshot(self, *, task: str | None = None) -> tuple[list[AuditEntry], Verdict]:
        data = await self.remote.get("/audit", task=task)
        verdict = Verdict(data["verified"], data["lines"], data["verification"], data["bad_line"])
        return [AuditEntry.model_validate(e) for e in data["entries"]], verdict


def _ref(ref: str) -> str:
    return quote(ref, safe="")
