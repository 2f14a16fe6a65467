"""Events: small immutable facts, persisted by the store, then published on the bus.

Every state change, run start, run output, run end, approval request and operator
decision is an Event. The store gives each one a monotonic `id` (SSE resumes from it);
the bus hands them to in-process subscribers. A subscriber that falls behind is never
allowed to slow a producer: its queue is emptied and it receives `Resync` carrying the
last id it did see, so it can catch up from the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from core.domain.models import Artifact, RunStatus, TaskState, Usage, utcnow


class Event(BaseModel):
    """Base of every event. `id` is 0 until the store has written it."""

    # Built on first use, as the domain values are (see core.domain.models._Value).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    kind: ClassVar[str] = "event"
    registry: ClassVar[dict[str, type[Event]]] = {}

    id: int = 0
    at: datetime = Field(default_factory=utcnow)
    task_id: str | None = None
    run_id: str | None = None
    # A remote worker's event: its lease's token and its place in the lease's outbox, so a
    # batch sent again to another serve is kept once (migration 0018). Never shown.
    sent: str | None = Field(default=None, exclude=True, repr=False)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Event.registry[cls.kind] = cls

    _envelope: ClassVar[set[str]] = {"id", "at", "task_id", "run_id", "sent"}

    def payload(self) -> dict[str, Any]:
        """The event's own fields, JSON-ready; the store keeps them beside the envelope."""
        return self.model_dump(mode="json", exclude=self._envelope)

    def to_json(self) -> dict[str, Any]:
        """The event as one flat JSON object, as REST and SSE carry it."""
        return {
            "id": self.id,
            "kind": self.kind,
            "at": self.at.isoformat(),
            "task_id": self.task_id,
            "run_id": self.run_id,
            **self.payload(),
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Event:
        """The inverse of `to_json`, for a reader on the far side of REST or SSE."""
        payload = dict(data)
        kind = payload.pop("kind")
        envelope = {key: payload.pop(key, None) for key in Event._envelope}
        del envelope["sent"]  # never carried: a worker's place in its outbox stays in the store
        return Event.restore(kind, payload, **envelope)

    @staticmethod
    def restore(
        kind: str,
        payload: dict[str, Any],
        *,
        id: int,
        at: datetime,
        task_id: str | None,
        run_id: str | None,
    ) -> Event:
        cls = Event.registry.get(kind)
        if cls is None:  # written by a newer T25: keep it readable rather than failing
            return UnknownEvent(
                id=id, at=at, task_id=task_id, run_id=run_id, original_kind=kind, data=payload
            )
        return cls(id=id, at=at, task_id=task_id, run_id=run_id, **payload)


class UnknownEvent(Event):
    kind = "unknown"
    original_kind: str
    data: dict[str, Any] = {}


class TaskCreated(Event):
    kind = "task_created"
    title: str
    type: str
    project: str
    actor: str


class TaskTransitioned(Event):
    kind = "task_transitioned"
    from_state: TaskState
    to_state: TaskState
    actor: str
    reason: str = ""
    # What a gate decides on, as the move set it (checks passed and on which head, the
    # review's verdict and head), and T25's seal of the move and its facts: a row or an
    # event anyone else wrote has no valid seal (core.control.history).
    facts: dict[str, Any] = {}
    seal: str | None = None


class TaskUpdated(Event):
    """A change to a task that is not a state change (archived, merged, loop counts)."""

    kind = "task_updated"
    fields: dict[str, Any]
    actor: str


class RunQueued(Event):
    kind = "run_queued"
    stage: TaskState
    role: str


class RunStarted(Event):
    kind = "run_started"
    worker: str
    adapter: str | None = None
    adapter_reason: str | None = None
    cli_version: str | None = None
    model: str | None = None
    attempt: int = 1
    head: str | None = None  # the task branch's head as the run began: where a reset goes back to


class RunOutput(Event):
    kind = "run_output"
    stream: str  # "stdout", "stderr", or "network" (a connection's record, core.domain.network)
    text: str


class RunFinished(Event):
    kind = "run_finished"
    status: RunStatus
    exit_code: int | None = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0


class ApprovalRequested(Event):
    kind = "approval_requested"
    plan_sha256: str
    risk: str
    files: list[str] = []


class InputRequested(Event):
    """An agent asked a question only a human can answer; the task waits in NEEDS_INPUT."""

    kind = "input_requested"
    stage: TaskState
    question: str


class DecisionRecorded(Event):
    """An operator's decision (approve, reject, merge, cancel, retry, archive, answer) that
    took effect, as its audit line says it: `bound_to` is what it was made on (an approval:
    the plan's `sha256:…`)."""

    kind = "decision_recorded"
    decision: str
    actor: str
    reason: str = ""
    bound_to: str | None = None


class WorktreeCleaned(Event):
    """After a merge or an archive: the worktree was removed, or kept and why."""

    kind = "worktree_cleaned"
    removed: bool
    reason: str


class MergeLanded(Event):
    """A merge landed: the task's branch merged into `into` as `commit`, and `pushed` says
    in one line whether the default branch went to the remote (empty: not said here, as
    for a merge a worker made, whose run's note says it)."""

    kind = "merge_landed"
    into: str
    commit: str
    pushed: str = ""

    def line(self) -> str:
        """`merged T-1 into main as 54f8d6b`, with what the push did after a `;`."""
        said = (
            f"merged {self.task_id} into {self.into or 'the default branch'} as {self.commit[:7]}"
        )
        return f"{said}; {self.pushed}" if self.pushed else said


class ArtifactStored(Event):
    kind = "artifact_stored"
    artifact_id: str
    artifact_kind: str
    sha256: str

    @classmethod
    def of(cls, artifact: Artifact, *, at: datetime | None = None) -> ArtifactStored:
        """The event that says `artifact` was kept: at the time it was, unless `at`."""
        return cls(
            at=at or artifact.created_at,
            task_id=artifact.meta.task_id,
            run_id=artifact.meta.run_id,
            artifact_id=artifact.id,
            artifact_kind=artifact.meta.kind.value,
            sha256=artifact.sha256,
        )


class Resync:
    """Delivered to a subscriber that fell behind: re-read the store after `last_id`."""

    __slots__ = ("last_id",)

    def __init__(self, last_id: int) -> None:
        self.last_id = last_id

    def __repr__(self) -> str:
        return f"Resync(last_id={self.last_id})"


class Subscription:
    """One subscriber's bounded view of the bus. Iterate it, or `await get()`."""

    def __init__(self, bus: EventBus, maxsize: int) -> None:
        self._bus = bus
        self._queue: asyncio.Queue[Event | Resync] = asyncio.Queue(maxsize)
        self.last_id = 0
        self.overflows = 0

    def _offer(self, event: Event | Resync) -> None:
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            # Never block the producer: drop what is queued and ask for a resync.
            self.overflows += 1
            while not self._queue.empty():
                self._queue.get_nowait()
            self._queue.put_nowait(Resync(self.last_id))

    async def get(self) -> Event | Resync:
        item = await self._queue.get()
        if isinstance(item, Event):
            self.last_id = max(self.last_id, item.id)
        return item

    def get_nowait(self) -> Event | Resync | None:
        try:
            item = self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None
        if isinstance(item, Event):
            self.last_id = max(self.last_id, item.id)
        return item

    def close(self) -> None:
        self._bus._subscribers.discard(self)

    def __aiter__(self) -> AsyncIterator[Event | Resync]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event | Resync]:
        while True:
            yield await self.get()


class EventBus:
    """In-process fan-out of persisted events to subscribers with bounded queues."""

    def __init__(self) -> None:
        self._subscribers: set[Subscription] = set()

    def subscribe(self, maxsize: int = 10_000) -> Subscription:
        sub = Subscription(self, maxsize)
        self._subscribers.add(sub)
        return sub

    def resync(self) -> None:
        """The events feeding the bus were interrupted: every subscriber re-reads the store."""
        for sub in tuple(self._subscribers):
            sub._offer(Resync(sub.last_id))

    def publish(self, event: Event) -> None:
        """Hand a persisted event to every subscriber; never waits."""
        for sub in tuple(self._subscribers):
            sub._offer(event)
