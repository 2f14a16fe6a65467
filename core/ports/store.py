"""The Store contract: what T25 keeps, and the guarantees every backend gives.

Backends live in the `store` package (embedded SQLite, Postgres); nothing above it
knows which one it has. Methods return domain objects, never driver rows.

The contract comes in roles, one protocol each, with the guarantees that role keeps (the
contract suite in tests/contract/store checks each):

    TaskStore         projects and tasks: compare-and-set transitions, decisions
    EventLog          the events table every process reads: gap-free ids, wake-ups
    RunLeases         the run queue: leases with fencing tokens, the reaper, run costs
    ArtifactStore     content stored once per SHA-256, verified on reading
    AuditAnchorStore  where the audit log's last line is anchored, and its lock
    AuditChainStore   the audit chain itself, kept in the store (Postgres only)

`Store` is all of them, what a backend implements. A part of T25 that needs one role
takes that role (the audit log an AuditAnchorStore, serve's event tail an EventLog), so its
signature says what it uses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from core.domain.audit import ChainLine
from core.domain.cost import CostGroup, TaskCost
from core.domain.events import Event
from core.domain.evidence import PastCosts
from core.domain.models import (
    Artifact,
    ArtifactKind,
    ArtifactMeta,
    AuditAnchor,
    Lease,
    NewRun,
    NewTask,
    Project,
    Run,
    RunOutcome,
    RunStatus,
    Task,
    TaskState,
)

# How long T25 waits out a store that is away (StoreUnavailable) before it gives up: the
# sweeper's outage (core.control.sweeper), the record of a merge git landed
# (core.control.merge_record). `t25 serve --store-patience` sets it for serve.
STORE_PATIENCE_S = 300.0


@dataclass(frozen=True)
class DecisionWrite:
    """What one operator decision changes in the store, written in one transaction.

    The decision's audit line is durable before this is written (core.control.audit); its
    anchor moves here, with the change it records, so an anchored line is a decision that
    took effect and a line left unanchored (a process that stopped) is one that did not.
    A decision with an effect outside the store (a merge: git) anchors its line before
    that effect instead, and leaves `anchor` None here. On a store that keeps the chain
    itself (AuditChainStore), the line is not written before: `lines` carries it, inserted
    here with its anchor, so the line and its decision's effect commit together.
    """

    task_id: str
    expected: TaskState  # the compare-and-set: the state the decision was checked in
    change: Event  # TaskTransitioned (a state change) or TaskUpdated (fields only)
    announce: Event  # DecisionRecorded, written after `change`
    fields: Mapping[str, Any] = field(default_factory=dict)
    anchor: AuditAnchor | None = None  # moved from `previous` by compare-and-set
    previous: AuditAnchor | None = None
    enqueue: NewRun | None = None  # the run of the stage the decision moves the task into
    cancel_runs: bool = False  # the task's queued and running runs end (a cancel)
    lines: tuple[ChainLine, ...] = ()  # the chain's new lines, ending at `anchor`


@dataclass(frozen=True)
class NewArtifact:
    """An artifact a write keeps with its other rows: its provenance, and its content as
    bytes or as a file on this host (stored a chunk at a time, never read whole). The
    store writes its `ArtifactStored` event with it."""

    meta: ArtifactMeta
    content: bytes | Path


@dataclass(frozen=True)
class TaskMove:
    """What code's decision on a finished run writes, in one transaction: the artifacts it
    kept (each with its ArtifactStored), the task's compare-and-set with its event (a
    TaskTransitioned, or a TaskUpdated for its fields only), the run of the working stage
    it enters, and the events that follow it (a question asked, an approval requested)."""

    task_id: str
    expected: TaskState  # the compare-and-set: the state the decision was made in
    change: Event  # TaskTransitioned (a state change) or TaskUpdated (fields only)
    fields: Mapping[str, Any] = field(default_factory=dict)
    enqueue: NewRun | None = None  # the run of the stage it moves the task into
    kept: tuple[NewArtifact, ...] = ()
    then: tuple[Event, ...] = ()  # written after the change (and its run)


class TaskStore(Protocol):
    """Projects and tasks.

    - `apply_transition` is compare-and-set: it changes the task only if it is still in
      `expected`, and writes the TaskTransitioned event in the same transaction. Of two
      deciders racing from the same state exactly one wins; the other gets StaleState.
    - `enter_stage` is the same compare-and-set, with the run of the stage it enters
      queued in the same transaction: a task is never in a working stage with its run
      lost between two writes.
    - `move_task` is the same compare-and-set for code's decision on a finished run, with
      the artifacts it kept, the next stage's run and the events that follow, in one
      transaction.
    - `apply_decision` writes everything one operator decision changes in one
      transaction: the task's compare-and-set with its event, the decision's
      announcement, its audit anchor and what follows from it in the store (the next
      stage's run, the task's runs cancelled). All of it, or nothing.
    - A write retried after its reply was lost (the connection died after the commit)
      has the effect of one: `create_task` files no second task, a compare-and-set finds
      its own event and returns it instead of refusing as stale.
    """

    async def upsert_project(self, project: Project) -> Project: ...
    async def list_projects(self) -> list[Project]: ...

    async def create_task(self, new: NewTask, *, actor: str) -> tuple[Task, Event]:
        """Give the task the next id and write it with its TaskCreated event, atomically.
        Filed again under the same `new.request_key`: the task and event already there."""
        ...

    async def get_task(self, task_id: str) -> Task | None: ...

    async def list_tasks(
        self,
        *,
        states: list[TaskState] | None = None,
        project: str | None = None,
        include_archived: bool = False,
        merged: bool | None = None,
        after: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        without_active_runs: bool = False,
    ) -> list[Task]:
        """Tasks by id, oldest first (newest first when asked), merged or not when asked;
        `after` a task's id, the list goes on past it in that order; at most `limit`; only
        those with no run queued or running, when asked (the sweeper's pass)."""
        ...

    async def has_active_runs(self) -> bool:
        """Whether any run is queued or running: one look at the queue's indexes, however
        long it is."""
        ...

    async def count_tasks(
        self,
        *,
        states: list[TaskState] | None = None,
        project: str | None = None,
        include_archived: bool = False,
        merged: bool | None = None,
    ) -> dict[TaskState, int]:
        """How many of the tasks `list_tasks` would give each state holds (a state with
        none is left out)."""
        ...

    async def apply_transition(
        self, task_id: str, expected: TaskState, event: Event, fields: dict[str, Any]
    ) -> tuple[Task, Event]:
        """CAS the task from `expected` to `event.to_state`, set `fields`, write `event`.

        Raises NotFound for an unknown task, StaleState if it is no longer in `expected`.
        """
        ...

    async def enter_stage(
        self, task_id: str, expected: TaskState, event: Event, fields: dict[str, Any], run: NewRun
    ) -> tuple[Task, list[Event]]:
        """`apply_transition` into `run.stage` and `enqueue_run(run)`, in one transaction;
        the task as it became and the events (TaskTransitioned, then RunQueued). As
        `enqueue_run`, a stage that has its queued or running run keeps it."""
        ...

    async def update_task(
        self, task_id: str, expected: TaskState, fields: dict[str, Any], event: Event
    ) -> tuple[Task, Event]:
        """Set non-state `fields` (see MUTABLE_TASK_FIELDS) if the task is still in
        `expected`, and write `event`, atomically. StaleState otherwise."""
        ...

    async def apply_decision(self, write: DecisionWrite) -> tuple[Task, list[Event]]:
        """Apply `write` in one transaction; return the task as it became and the events
        written, in order (the change, the announcement, then the run queued, if any).

        NotFound for an unknown task; StaleState if the task is no longer in
        `write.expected` or the anchor is no longer at `write.previous`. Then nothing is
        written."""
        ...

    async def move_task(self, move: TaskMove) -> tuple[Task, list[Event]]:
        """Write `move` in one transaction; return the task as it became and the events
        written, in order (each ArtifactStored, the change, the run queued, then `then`).
        As `enter_stage`, a stage that has its queued or running run keeps it.

        NotFound for an unknown task; StaleState if it is no longer in `move.expected`.
        Then nothing is written. Retried after a lost reply, it has the effect of one."""
        ...


class EventLog(Protocol):
    """The events every process reads.

    - Event ids are strictly increasing and never reused; `events_after` returns them in
      id order with no gap a reader could miss: once it has returned an id, no event
      with a lower id can still appear (Postgres settles a horizon under concurrent
      writers for this; see store/migrations/postgres/0001_initial.sql).
    - Every process sees every event. The events table is the truth; `wait_for_events`
      only wakes a reader, which then reads `events_after` its cursor. Writes wake
      readers in the same process at once and in other processes within moments
      (Postgres: coalesced LISTEN/NOTIFY, sent outside the writing statements; SQLite:
      polling the newest id).
    """

    async def append_event(self, event: Event) -> Event:
        """Write an event; return it carrying its id."""
        ...

    async def events_after(
        self,
        after_id: int,
        *,
        task_id: str | None = None,
        limit: int = 1000,
        kind: str | None = None,
        stream: str | None = None,
    ) -> list[Event]:
        """The events after id `after_id` in id order, at most `limit`: one task's, with
        `task_id`; of one kind, with `kind`; with `kind` `run_output`, only that `stream`'s.
        Every task's decisions (`DecisionRecorded.kind`) are one walk of an index of their
        own (migration 0017), and a task's events of a kind one range of another (0018),
        however many other events there are."""
        ...

    async def run_events_before(
        self, run_id: str, *, before: int | None = None, limit: int = 500
    ) -> list[Event]:
        """One run's newest events with an id below `before` (its newest of all with None),
        at most `limit`, in id order: one backward walk of an index on (run, id) (migration
        0019), however long the run. None is past what `events_after` would return yet, so
        a reader that goes on with `events_after` from the newest id misses nothing."""
        ...

    async def last_event_id(self) -> int:
        """The newest event id a reader can start from without missing anything after it."""
        ...

    async def wait_for_events(self, after_id: int, timeout_s: float) -> bool:
        """Wait until an event newer than `after_id` exists (True), at most `timeout_s` (False).

        Sees events written by any process on the same store, not only this one. A True
        is a cue to read `events_after(after_id)`; it carries no events itself."""
        ...


class RunLeases(Protocol):
    """The run queue and its leases.

    A task's stage has at most one queued or running run (a unique index on both
    backends): `enqueue_run` of a stage that has one writes nothing and returns that run,
    so a retried enqueue or a sweep racing a completion never doubles a stage's work.

    `claim_run` hands each queued run to exactly one claimer, with a fencing token no
    other claim of any run in the store had, and a deadline from the database clock.
    `heartbeat`, `complete_run` and `release_run` succeed only with the current token,
    presented by the worker it was given to, before the deadline; otherwise LeaseLost,
    and nothing the late (or impostor) worker sent is kept. Claiming, extending, completing
    and reaping are each one conditional statement (never a read, then a write), so a
    completion racing the reaper at the deadline has exactly one winner. `reap_expired`
    returns runs whose lease lapsed to the queue after a backoff that doubles with each
    attempt used, or fails them once they used all their attempts; a run in backoff never
    holds up the runs behind it.
    """

    async def enqueue_run(self, new: NewRun) -> tuple[Run, Event]:
        """Queue a run and write its RunQueued event, atomically; if the task's stage has
        its queued or running run already, that run and the event that queued it. With
        `new.while_in_stage`, StaleState (nothing written) if the task has left that stage."""
        ...

    async def now(self) -> datetime:
        """The store's clock: what lease deadlines and run times are measured by. Stall
        checks compare a run's times with this, never with a process's own clock."""
        ...

    async def get_run(self, run_id: str) -> Run | None: ...
    async def list_runs(
        self, *, task_id: str | None = None, status: RunStatus | None = None
    ) -> list[Run]: ...

    async def cost_by_task(self, task_ids: Sequence[str] | None = None) -> dict[str, float]:
        """Each task's summed run cost (a task with no runs is absent), of every task or of
        `task_ids`: the board's figure, without reading every run."""
        ...

    async def tokens_by_task(self, task_ids: Sequence[str]) -> dict[str, int]:
        """Each of `task_ids`' tokens, every kind its runs reported (a task with no runs is
        absent): what a token budget is held against, without reading the runs."""
        ...

    async def cost_groups(self, *, since: datetime | None = None) -> list[CostGroup]:
        """Every run summed by role, adapter, model and stage in one read (`t25 cost`, the
        cost pane); with `since`, only the runs that finished at or after it, or, not
        finished, were queued at or after it."""
        ...

    async def costliest_tasks(self, limit: int) -> list[TaskCost]:
        """The `limit` tasks whose runs cost the most, each with its runs and their input
        and output tokens; of equal cost, the task that ran first comes first."""
        ...

    async def past_costs(
        self, *, project: str, roles: Mapping[str, str | None]
    ) -> dict[str, PastCosts]:
        """For each of `roles` (a role, and the model its runs chose or used, or None: any),
        the project's succeeded runs of it summed per task, all in one read: an approval's
        estimate of the stages left. A role with no such run is left out."""
        ...

    async def claim_run(self, worker: str, ttl_s: float) -> Lease | None:
        """Lease the oldest queued run to `worker`, or None when the queue is empty."""
        ...

    async def heartbeat(self, lease: Lease, ttl_s: float) -> Lease:
        """Extend a live lease; LeaseLost if it expired or its token is stale."""
        ...

    async def complete_run(self, lease: Lease, outcome: RunOutcome) -> tuple[Run, Event]:
        """Finish a run under its lease and write its RunFinished event, atomically.

        LeaseLost if the lease expired or the token is stale; then nothing is written."""
        ...

    async def complete_run_keeping(
        self, lease: Lease, outcome: RunOutcome, kept: Sequence[NewArtifact]
    ) -> tuple[Run, list[Event]]:
        """`complete_run` and the run's own artifacts (`kept`, each with its ArtifactStored
        after the RunFinished), in one transaction: a run recorded finished has its
        artifacts, and a lease lost keeps none of them."""
        ...

    async def release_run(self, lease: Lease) -> Run:
        """Hand a leased run back to the queue (a worker shutting down)."""
        ...

    async def cancel_runs(self, task_id: str, *, queued_only: bool = False) -> list[Run]:
        """Cancel every queued or running run of a task (only the queued ones, with
        `queued_only`); running leases become stale."""
        ...

    async def reap_expired(
        self, *, retry_delay_s: float = 0.0, max_retry_delay_s: float = 300.0
    ) -> list[Run]:
        """Return runs whose lease lapsed to the queue, or fail them once they used
        `max_attempts`. A lapse uses the attempt only when the run's agent was started in
        it (a `RunStarted` of that attempt), or the reap before was free: a run whose
        worker died before starting its agent is a neighbour of whatever killed it
        (store.reaping). A requeued run is claimable again after a backoff:
        `retry_delay_s` after its first attempt, doubling with each attempt used, at
        most `max_retry_delay_s`. One conditional update: never read-then-write; a
        lease being completed at this instant is left to its completion."""
        ...


class ArtifactStore(Protocol):
    """What the stages produced. Content is stored once per SHA-256 however often it is
    written; reading re-hashes it and raises ArtifactCorrupted on a mismatch.

    Small content (a prompt, a plan, a diff) is written and read as one `bytes`; large
    content (a run's log, up to `limits.max_log_bytes`) is stored from a file and read back
    as a stream of chunks, never held whole."""

    async def put_artifact(self, content: bytes, meta: ArtifactMeta) -> Artifact:
        """Store content by SHA-256 (once, however often written) with its provenance."""
        ...

    async def put_artifact_file(self, path: Path, meta: ArtifactMeta) -> Artifact:
        """`put_artifact` of a file's content, read and stored a chunk at a time (1 MiB);
        ArtifactCorrupted, and nothing stored, if the file changes meanwhile."""
        ...

    async def get_artifact(self, artifact_id: str) -> tuple[Artifact, bytes]:
        """Read an artifact whole, verifying its hash; ArtifactCorrupted on a mismatch."""
        ...

    async def stream_artifact(self, artifact_id: str) -> tuple[Artifact, AsyncIterator[bytes]]:
        """An artifact (NotFound at once), and its content as chunks read one at a time,
        re-hashed as they pass: the iterator raises ArtifactCorrupted after the last chunk
        when they do not hash to the artifact's SHA-256."""
        ...

    async def list_artifacts(self, *, task_id: str | None = None) -> list[Artifact]: ...

    async def newest_artifact(self, kind: ArtifactKind, *, project: str) -> Artifact | None:
        """The newest artifact of `kind` written for a task of `project` (archived ones
        included), by one walk of an index: the checks a merge kept."""
        ...


class AuditAnchorStore(Protocol):
    """Where the audit log's newest line is anchored. The anchor moves by compare-and-set,
    under `lock_audit`, which serialises every process extending the audit log on this
    store."""

    async def get_audit_anchor(self) -> AuditAnchor | None: ...

    async def set_audit_anchor(self, anchor: AuditAnchor, *, previous: AuditAnchor | None) -> None:
        """Move the anchor forward only from `previous` (compare-and-set); StaleState otherwise.
        A move to where the anchor already is succeeds (a retry after a lost reply)."""
        ...

    async def lock_audit(self) -> Callable[[], Awaitable[None]]:
        """Take the lock whoever extends the audit log holds, and return what releases it:
        one holder at a time among every process sharing this store (Postgres: a
        transaction-level advisory lock; SQLite: nothing beyond the log file's own lock, as
        an embedded store is one checkout's)."""
        ...


@runtime_checkable
class AuditChainStore(Protocol):
    """The audit chain kept in the store itself, for a store shared by many checkouts
    (Postgres): any number of processes on any hosts extend one chain, each under
    `lock_audit`, and `.factory/audit.jsonl` on each checkout is only a mirror of it.
    A line goes in with the anchor moved to it, in one transaction: with its decision's
    effect (`DecisionWrite.lines`), or on its own (`append_audit_lines`). An embedded
    store (SQLite) does not implement this: there the log file is the chain."""

    async def append_audit_lines(
        self, lines: list[ChainLine], *, previous: AuditAnchor | None
    ) -> None:
        """Add `lines` after the chain's head and move the anchor to the last of them, only
        if the anchor is at `previous` (StaleState otherwise; nothing written). Lines
        already there with the same hashes succeed (a retry after a lost reply)."""
        ...

    async def audit_lines(
        self, *, after: int = 0, limit: int = 1000, task: str | None = None
    ) -> list[ChainLine]:
        """The chain's lines after sequence number `after` (one task's, with `task`),
        oldest first, at most `limit`."""
        ...


@runtime_checkable
class Store(TaskStore, EventLog, RunLeases, ArtifactStore, AuditAnchorStore, Protocol):
    """Persistent state of one T25 installation: every role, as a backend implements it.
    All methods are coroutines."""

    url: str

    async def close(self) -> None: ...
