"""`t25 tui --url`: the cockpit attached to a remote `t25 serve`, over REST and SSE.

`RemoteControlPlane` is the control plane's `Operations` (core.ports) over REST: every read
and decision the cockpit makes is a request, answered by the serve's own query service
and `decide`, so the checks and the audit are the same as on its own command line; a
refusal raises the class the serve raised. Events arrive on one SSE stream and are
published on a local EventBus, so the app cannot tell this control plane from a local
one. A stream that breaks is reopened from the last id seen (`Last-Event-ID`): nothing
is missed, nothing is shown twice, and the board is re-read once the link is back.

Given replicas (`t25 tui --url A --url B`: serves on one Postgres), a request or a stream
that one of them does not take goes to the next at once (t25_tui.api.worker_client.Http);
the stream resumes there from the same id, which is exact, since the ids are the store's.
The reconnection backoff comes only after every address failed in a row.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import httpx
from httpx_sse import SSEError, aconnect_sse

from core.config import held_secrets
from core.config.live import Reread
from core.config.schema import Config
from core.domain.audit import AuditEntry, AuditTrail, Verdict
from core.domain.backoff import Backoff
from core.domain.decisions import Decision
from core.domain.detail import TaskDetail
from core.domain.diffs import TaskDiff
from core.domain.events import Event, EventBus
from core.domain.evidence import ApprovalEvidence, MergeEvidence
from core.domain.models import (
    Artifact,
    AuditAnchor,
    Run,
    RunStatus,
    Task,
    TaskState,
    TaskType,
)
from core.errors import ArtifactCorrupted, ConfigError, ControlPlaneUnreachable, T25Error
from core.ports import Operations
from t25_tui.api.cockpit_costs import RemoteCosts
from t25_tui.api.credentials import operator_token
from t25_tui.api.verb_bodies import body_of
from t25_tui.api.worker_client import Http, refuse

log = logging.getLogger("t25.attach")

OPERATOR_ENV = held_secrets.OPERATOR_TOKEN
RECONNECT = Backoff(0.5, 10.0)  # waits before the event stream is reopened: 0.5 s doubling to 10 s
SILENCE_S = 45.0  # serve pings an idle stream every 15 s: this long without a byte is a dead link
# A decision is answered once it took effect; a merge (its checks, or a worker making it) may
# take minutes. One sent again to the next replica (its first went unanswered) is ruled on
# against the task as it is then: a decision that took effect is refused, never made twice.
DECISION_TIMEOUT = httpx.Timeout(10.0, read=900.0)
PAGE = 5000  # the most events the control plane returns per request
AUDIT_PAGE = 5000  # the most audit lines serve gives per request (GET /audit)


@asynccontextmanager
async def attach(
    urls: str | Sequence[str], token: str | None = None
) -> AsyncIterator[RemoteControlPlane]:
    """The control plane at `urls` (one serve, or replicas to fail over between, in
    order), following its events until exit."""
    http = Http(urls, token if token is not None else operator_token(None))
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


class RemoteControlPlane(RemoteCosts, Operations):
    """A `t25 serve`'s control plane, as the cockpit holds it: `Operations` over REST + SSE."""

    def __init__(self, http: Http, config: Config, cursor: int) -> None:
        self.http = http
        self.url = http.url  # where the event stream is attached, or last was
        self.config = config
        self.cursor = cursor  # the newest event id this cockpit has been given
        self.connected = False
        self.bus = EventBus()

    @classmethod
    async def connect(cls, http: Http) -> RemoteControlPlane:
        """Read the control plane's configuration; refuse clearly if it will not talk to us."""
        try:
            raw = await http.request("GET", "/config", refusals={401: ConfigError})
        except ConfigError as exc:
            raise ConfigError(
                f"{http.url} refused this cockpit: {exc.message}",
                hint="give the token serve knows you by: --token-file PATH, "
                f"T25_OPERATOR_TOKEN_FILE or {OPERATOR_ENV}",
            ) from None
        try:
            body = json.loads(raw.content)
            body.pop("effective", None)  # what each project's policy comes to: derived again here
            config = Config.model_validate(body)
        except (ValueError, AttributeError) as exc:
            raise ControlPlaneUnreachable(
                f"{http.url} answered /config with something that is not a T25 configuration",
                hint="is that a `t25 serve` of the same T25 version?",
            ) from exc
        health = (await http.request("GET", "/health")).json()
        return cls(http, config, int(health["last_event_id"]))

    def link(self) -> str:
        """The status line's word on the connection."""
        return f"attached to {self.url}" if self.connected else f"reconnecting to {self.url}…"

    # -- reads -----------------------------------------------------------------------------

    async def _get(self, path: str, **params: Any) -> httpx.Response:
        query = {k: v for k, v in params.items() if v is not None}
        return await self.http.request("GET", path, params=query)

    def reread_config(self) -> Reread | None:
        """Serve reads its t25.yaml where it decides: nothing to take here."""
        return None

    async def last_event_id(self) -> int:
        return self.cursor  # the event stream keeps it current; no request needed

    async def task(self, ref: str) -> Task:
        return (await self.detail(ref)).task

    async def tasks(
        self,
        *,
        states: Sequence[TaskState] | None = None,
        project: str | None = None,
        archived: bool = False,
        merged: bool | None = None,
        after: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Task]:
        if states is not None and not states:
            return []  # no state asked for: a query without `state` would mean every one
        wanted = [TaskState(s).value for s in states or ()] or None
        found = await self._get(
            "/tasks",
            state=wanted,
            project=project,
            archived=archived,
            merged=merged,
            after=after,
            limit=limit,
            order="newest" if newest_first else None,
        )
        return [Task.model_validate(t) for t in found.json()]

    async def task_counts(
        self,
        *,
        states: Sequence[TaskState] | None = None,
        project: str | None = None,
        archived: bool = False,
        merged: bool | None = None,
    ) -> dict[TaskState, int]:
        if states is not None and not states:
            return {}
        wanted = [TaskState(s).value for s in states or ()] or None
        found = await self._get(
            "/tasks/counts", state=wanted, project=project, archived=archived, merged=merged
        )
        return {TaskState(state): int(n) for state, n in found.json().items()}

    async def detail(self, ref: str, *, verify: bool = False) -> TaskDetail:
        found = await self._get(f"/tasks/{_ref(ref)}", verify=verify or None)
        return TaskDetail.model_validate_json(found.content)

    async def approval_evidence(self, ref: str) -> ApprovalEvidence:
        found = await self._get(f"/tasks/{_ref(ref)}/evidence/approval")
        return ApprovalEvidence.model_validate_json(found.content)

    async def merge_evidence(self, ref: str) -> MergeEvidence:
        found = await self._get(f"/tasks/{_ref(ref)}/evidence/merge")
        return MergeEvidence.model_validate_json(found.content)

    async def events(self, ref: str, *, after: int = 0, limit: int = 1000) -> list[Event]:
        """One task's events after `after`, in pages of at most PAGE (the serve's bound)."""
        out: list[Event] = []
        while len(out) < limit:
            page = (
                await self._get(
                    f"/tasks/{_ref(ref)}/events", after=after, limit=min(PAGE, limit - len(out))
                )
            ).json()
            out.extend(Event.from_json(e) for e in page)
            if len(page) < PAGE:
                break
            after = out[-1].id
        return out

    async def run_events(
        self, ref: str, *, before: int | None = None, limit: int = 500
    ) -> list[Event]:
        found = await self._get(f"/runs/{_ref(ref)}/events", before=before, limit=min(limit, PAGE))
        return [Event.from_json(e) for e in found.json()]

    async def run(self, ref: str) -> Run:
        return Run.model_validate_json((await self._get(f"/runs/{_ref(ref)}")).content)

    async def runs(self, *, task: str | None = None, status: RunStatus | None = None) -> list[Run]:
        found = await self._get("/runs", task=task, status=status and status.value)
        return [Run.model_validate(r) for r in found.json()]

    async def artifacts(self, *, task: str | None = None) -> list[Artifact]:
        found = await self._get("/artifacts", task=task)
        return [Artifact.model_validate(a) for a in found.json()]

    async def artifact(self, ref: str) -> tuple[Artifact, bytes]:
        """The content, checked here too against its SHA-256: it crossed a network."""
        response = await self._get(f"/artifacts/{_ref(ref)}")
        artifact = Artifact.model_validate_json(response.headers["X-T25-Artifact"])
        if hashlib.sha256(response.content).hexdigest() != artifact.sha256:
            raise ArtifactCorrupted(
                f"{artifact.id} arrived damaged: its content does not match its SHA-256"
            )
        return artifact, response.content

    async def diff(self, ref: str, *, attempt: int | None = None, stat: bool = False) -> TaskDiff:
        found = await self._get(f"/tasks/{_ref(ref)}/diff", attempt=attempt, stat=stat or None)
        return TaskDiff.model_validate_json(found.content)

    async def artifact_chunks(self, ref: str) -> AsyncIterator[bytes]:
        """The content as it arrives, checked here too against its SHA-256 after the last
        chunk: it crossed a network."""
        path = f"/artifacts/{_ref(ref)}"
        async with self.http.client.stream("GET", path) as response:
            if response.status_code >= 400:
                await response.aread()
                refuse(response, path)
            artifact = Artifact.model_validate_json(response.headers["X-T25-Artifact"])
            hashed = hashlib.sha256()
            async for chunk in response.aiter_bytes():
                hashed.update(chunk)
                yield chunk
        if hashed.hexdigest() != artifact.sha256:
            raise ArtifactCorrupted(
                f"{artifact.id} arrived damaged: its content does not match its SHA-256"
            )

    async def audit_trail(
        self, *, task: str | None = None, after: int = 0, limit: int | None = None
    ) -> AuditTrail:
        """Read page by page (serve gives at most AUDIT_PAGE lines at once) until `limit`
        entries or the end; the verdict is the last page's."""
        entries: list[AuditEntry] = []
        while True:
            want = AUDIT_PAGE if limit is None else min(AUDIT_PAGE, limit - len(entries))
            data = (await self._get("/audit", task=task, after=after, limit=want)).json()
            entries += [AuditEntry.model_validate(e) for e in data["entries"]]
            cursor = data.get("next")
            if cursor is None or (limit is not None and len(entries) >= limit) or want == 0:
                break
            after = int(cursor)
        head = data.get("head")
        verdict = Verdict(
            data["verified"],
            data["lines"],
            data["verification"],
            data["bad_line"],
            head=AuditAnchor.model_validate(head) if head else None,
        )
        more = limit is not None and cursor is not None
        return AuditTrail(entries=entries, verdict=verdict, next=int(cursor) if more else None)

    async def audit_disagreements(self) -> list[str]:
        """Serve walks the whole log for them: as long a wait as a decision's."""
        response = await self.http.request("GET", "/audit/disagreements", timeout=DECISION_TIMEOUT)
        return [str(problem) for problem in response.json()["disagreements"]]

    # -- writes ----------------------------------------------------------------------------

    async def _post(self, path: str, body: dict[str, Any]) -> Task:
        response = await self.http.request("POST", path, json=body)
        return Task.model_validate_json(response.content)

    async def new_task(
        self,
        title: str,
        *,
        actor: str,
        type: TaskType = TaskType.FEAT,
        description: str = "",
        project: str | None = None,
        request_key: str | None = None,
        priority: int = 0,
        after: Sequence[str] = (),
    ) -> Task:
        """Filed under a key of this filing's own, so a request sent again after a lost
        reply finds the task the first one filed."""
        body = {
            "title": title,
            "type": TaskType(type).value,
            "description": description,
            "project": project,
            "actor": actor,
            "request_key": request_key or uuid.uuid4().hex,
            "priority": priority,
            "after": list(after),
        }
        return await self._post("/tasks", body)

    async def decide(self, decision: Decision) -> Task:
        """The decision's route (`/tasks/{id}/{verb}`), its body what the verb takes
        (t25_tui.api.verb_bodies)."""
        path = f"/tasks/{_ref(decision.task)}/{decision.verb.value}"
        body = body_of(decision)
        # Serve answers a decision once it has taken effect: a merge's checks, or a worker's
        # merge, may take minutes.
        response = await self.http.request("POST", path, json=body, timeout=DECISION_TIMEOUT)
        return Task.model_validate_json(response.content)

    # -- events ----------------------------------------------------------------------------

    async def follow(self) -> None:
        """Publish the control plane's events on the bus, for as long as the cockpit runs.
        A stream that ends or breaks is reopened at the next address at once; once every
        address has failed in a row, after a pause (RECONNECT)."""
        waits = RECONNECT.pauses()
        failed = 0  # addresses that failed in a row
        while True:
            at = self.http.at
            why = "the stream ended"
            try:
                await self._stream()
            except (httpx.HTTPError, SSEError, T25Error, ValueError) as exc:
                why = str(exc) or type(exc).__name__
                log.info("event stream from %s broke: %s", self.url, why)
            if self.connected:  # it was up: the first retry comes soon again
                waits, failed = RECONNECT.pauses(), 0
            self._linked(False)
            self.http.move_on(at, why)
            failed += 1
            if failed >= len(self.http.urls):
                failed = 0
                await asyncio.sleep(next(waits))

    async def _stream(self) -> None:
        headers = {"Last-Event-ID": str(self.cursor)}
        timeout = httpx.Timeout(10.0, read=SILENCE_S)
        self.url = self.http.url
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


def _ref(ref: str) -> str:
    return quote(ref, safe="")
