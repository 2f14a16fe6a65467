"""The production store: Postgres through pooled asyncpg connections, shared by many workers on many hosts.

Every operation that changes state is one statement (its event row written in the same statement
by a data-modifying CTE), so it is its own transaction and costs one round trip; the compare-
and-set and lease conditions sit in its WHERE clause, never in a read before it. Claims take the
oldest claimable run with `FOR UPDATE SKIP LOCKED`, so claimers never queue behind each other.
Lease times come from the database clock.

A statement that fails because its connection was lost (the server restarted, the backend was
terminated) is retried on a fresh connection from the pool; one still failing after a few tries
raises StoreUnavailable (core.errors), as does a server too busy to take it, so no caller ever
sees a driver exception for "not now". A statement killed before it committed was rolled back,
so the retry is simply its first success. In the rare case the connection died after the commit
but before the reply, the retry finds what the first try wrote and returns it, so a retried
write has the effect of one: a completion its own RunFinished, a claim the run it leased (by its
claim key), a new task its request key, a compare-and-set or an appended event its own event
(the same kind, time and payload), an enqueue the stage's one queued or running run (0007), an
artifact the one of the same content and provenance. Schema, migrations and the connection pool
are in `postgres_schema`; the SQL is in `postgres_sql`; cross-process wake-ups are in
`postgres_events`; the statements inside a connection in `postgres_writes`, and those of a run's
completion and of the decision on it, several in one transaction, in `postgres_moves`; its reads
of many tasks in `postgres_task_reads`; rows become domain objects in `rows`.

The connections come from the store's own pool (`postgres_schema.ConnectionPool`), not
asyncpg's `create_pool`: it wins on the work a control plane does, not only on empty runs.
`bench/store_pool.py` runs one store of 1 to 10 connections through a pipeline (60 tasks
of 4 stages; 8 workers claim, stream 40 RunOutput events a run with a heartbeat every 10,
complete and move the task on; 2 readers follow the events as serve's SSE tail does; a
board reader lists tasks and their costs). Wall time, median of 3 on the 2-CPU
development machine (shared, load 2 to 4): 8.7 s on T25's pool, 9.9 s on asyncpg's pool
with its session reset left out, 10.5 s on asyncpg's pool as it comes (1,870, 1,570 and
1,430 store calls/s; the median latency of every kind of call lowest on T25's). With 16
workers queueing for the 10 connections (40 tasks), median of 5: 4.2, 5.2 and 6.3 s (in
one run of 3 the first two tied at 4.8 s). Why: the client shares the CPUs with the
server, and asyncpg's pool costs client CPU on every loan (its release runs as a task
behind `asyncio.shield` and re-arms an inactivity timer, and by default resets the
session, one more round trip). A loan of T25's pool is a list pop and its return a list
push, with no turn of the event loop; the store never changes session state, so it needs
no reset.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

import asyncpg
from asyncpg import Record
from asyncpg.transaction import Transaction

from core.domain.audit import ChainLine
from core.domain.backoff import Backoff, retry
from core.domain.events import Event, RunQueued, TaskCreated, TaskTransitioned
from core.domain.models import (
    Artifact,
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
    format_id,
    parse_id,
)
from core.errors import AuditError
from core.ports.store import DecisionWrite
from store import _checks as checks
from store import _chunks as chunks
from store import postgres_schema as schema
from store import postgres_sql as sql
from store import postgres_writes as w
from store import rows
from store.postgres_events import EventSignal
from store.postgres_moves import PostgresMoves
from store.postgres_task_reads import PostgresTaskReads

T = TypeVar("T")
Connection: TypeAlias = "asyncpg.Connection[Record]"  # the stubs' generic, not asyncpg's

RETRIES = 3  # fresh connections tried after a lost one ...
RECONNECT = Backoff(0.05, 0.2)  # ... after these pauses: 0.05, 0.1, 0.2 s
ROWS = rows.RowReader(time=rows.as_utc)  # timestamptz: aware datetimes already


class PostgresStore(PostgresMoves, PostgresTaskReads):
    """The Store on a Postgres database. Open it with `await PostgresStore.open(url)`."""

    def __init__(self, pool: schema.ConnectionPool, url: str, application_name: str) -> None:
        self._pool = pool
        self.url = url
        self._application_name = application_name
        self._signal = EventSignal(url, pool, self._connect_listener)

    # -- opening and closing ----------------------------------------------------------

    @classmethod
    async def open(
        cls, url: str, *, min_size: int = 1, max_size: int = 10, application_name: str = "t25"
    ) -> PostgresStore:
        """Connect to the database at `url` and bring its schema up to date.

        StoreError if the server cannot be reached, the schema belongs to someone else,
        or it was written by a newer T25; a foreign schema is left exactly as it was.
        """
        pool = await schema.create_pool(
            url, min_size=min_size, max_size=max_size, application_name=application_name
        )
        return cls(pool, url, application_name)

    async def close(self) -> None:
        await self._signal.close()
        await self._pool.close()

    async def _connect_listener(self) -> Connection:
        return await schema.connect(self.url, application_name=f"{self._application_name}-listen")

    # -- plumbing ---------------------------------------------------------------------

    async def _run(self, op: Callable[[Connection, bool], Awaitable[T]]) -> T:
        """Run `op` on a pooled connection; on a lost connection (or a busy server), again
        on a fresh one. Still failing after RETRIES: StoreUnavailable, never the driver's
        exception. A server that refuses the connection itself for good (the database was
        dropped, the role may no longer log in) is a StoreError.

        `op` is told whether this is a retry, so a write can tell "did my first try
        commit?" apart from "someone else got there first"."""

        async def attempt(n: int) -> T:
            con = await self._acquire()
            try:
                return await op(con, n > 0)
            except BaseException as exc:
                self._pool.discard_if_lost(con, exc)
                raise
            finally:
                self._pool.release(con)  # dropped there if the connection was lost

        try:
            return await retry(
                attempt, pauses=RECONNECT.pauses(RETRIES), transient=schema.is_transient
            )
        except Exception as exc:
            if schema.is_transient(exc):
                raise schema.unreachable(self.url, exc) from exc
            raise

    async def _acquire(self) -> Connection:
        """A pooled connection; StoreError if the server refuses us for good."""
        try:
            return await self._pool.acquire()
        except asyncpg.PostgresError as exc:
            if not schema.is_transient(exc):
                raise schema.unreachable(self.url, exc) from exc
            raise

    async def _fetch(self, statement: str, *args: Any) -> list[Record]:
        return await self._run(lambda con, _: con.fetch(statement, *args))

    async def _fetchrow(self, statement: str, *args: Any) -> Record | None:
        return await self._run(lambda con, _: con.fetchrow(statement, *args))

    async def _returning(self, statement: str, *args: Any) -> Record:
        """The row of a statement that always returns one (an INSERT ... RETURNING)."""
        return w.returned(await self._fetchrow(statement, *args))

    async def _written(self, statement: str, *args: Any) -> Record | None:
        """A statement that writes an event: readers everywhere hear of it once it committed."""
        return await self._writes(lambda con, _: con.fetchrow(statement, *args))

    async def _writes(self, op: Callable[[Connection, bool], Awaitable[T]]) -> T:
        """`_run` of an operation that writes an event: readers hear of it once it committed."""
        result = await self._run(op)
        if result is not None:
            self._signal.written()
        return result

    # -- projects ---------------------------------------------------------------------

    async def upsert_project(self, project: Project) -> Project:
        return rows.project(
            await self._returning(
                sql.UPSERT_PROJECT, project.name, project.repo_path, project.default_branch
            )
        )

    async def list_projects(self) -> list[Project]:
        return [rows.project(r) for r in await self._fetch(sql.LIST_PROJECTS)]

    # -- tasks ------------------------------------------------------------------------

    async def create_task(self, new: NewTask, *, actor: str) -> tuple[Task, Event]:
        """Written under a key (the filer's, `new.request_key`, or one of its own): a
        retry whose first try committed before its reply was lost, or a filing again under
        the same key, finds that task and its event, and files no second one."""
        event = TaskCreated(title=new.title, type=new.type.value, project=new.project, actor=actor)
        key = new.request_key or uuid.uuid4().hex
        after = json.dumps(list(new.after)) if new.after else None
        args = (
            new.project,
            new.title,
            new.type.value,
            new.description,
            w.payload(event),
            key,
            new.priority,
            after,
        )
        look_first = new.request_key is not None

        async def create(con: Connection, retried: bool) -> Record | None:
            if (retried or look_first) and (
                found := await con.fetchrow(sql.CREATED_UNDER_KEY, key)
            ) is not None:
                return found
            row = await con.fetchrow(sql.CREATE_TASK, *args)
            # None: no such project, or a filing under the same key got there first.
            return row if row is not None else await con.fetchrow(sql.CREATED_UNDER_KEY, key)

        row = await self._writes(create)
        if row is None:
            raise checks.project_not_found(new.project)
        task = ROWS.task(row)
        return task, event.model_copy(
            update={"id": row["event_id"], "at": task.created_at, "task_id": task.id}
        )

    async def get_task(self, task_id: str) -> Task | None:
        row = await self._fetchrow(sql.GET_TASK, parse_id("T", task_id))
        return ROWS.task(row) if row else None

    async def apply_transition(
        self, task_id: str, expected: TaskState, event: Event, fields: dict[str, Any]
    ) -> tuple[Task, Event]:
        tid = format_id("T", parse_id("T", task_id))
        change = checks.transition_event(tid, expected, event)
        return await self._cas_task(
            tid, expected, checks.task_fields(fields), event, change.to_state
        )

    async def update_task(
        self, task_id: str, expected: TaskState, fields: dict[str, Any], event: Event
    ) -> tuple[Task, Event]:
        tid = format_id("T", parse_id("T", task_id))
        return await self._cas_task(tid, expected, checks.task_fields(fields), event, None)

    async def _cas_task(
        self,
        tid: str,
        expected: TaskState,
        values: dict[str, Any],
        event: Event,
        to_state: TaskState | None,
    ) -> tuple[Task, Event]:
        event = checks.event_for_task(tid, event)
        statement, args = w.cas_statement(tid, expected, values, event, to_state)

        async def cas(con: Connection, retried: bool) -> Record:
            return await w.changed(con, statement, args, tid, expected, event, retried)

        row = await self._writes(cas)
        stored = event.model_copy(update={"id": row["event_id"], "at": rows.as_utc(event.at)})
        return ROWS.task(row), stored

    async def enter_stage(
        self, task_id: str, expected: TaskState, event: Event, fields: dict[str, Any], run: NewRun
    ) -> tuple[Task, list[Event]]:
        """One transaction: the compare-and-set with its event, then the stage's run (or the
        one it has). A retry whose first try committed finds its change, and the run that
        came with it, and writes neither again."""
        tid = format_id("T", parse_id("T", task_id))
        number = parse_id("T", tid)
        change = checks.transition_event(tid, expected, event)
        checks.run_of_stage(tid, change.to_state, run)
        event = checks.event_for_task(tid, event)
        values = checks.task_fields(fields)
        statement, args = w.cas_statement(tid, expected, values, event, change.to_state)
        queued = RunQueued(stage=run.stage, role=run.role)

        async def enter(con: Connection, retried: bool) -> tuple[Record, Record | None]:
            async with con.transaction():
                row = await con.fetchrow(statement, *args)
                if row is None and retried:
                    row = await w.committed(con, number, event)
                    if row is not None:  # the run came in the same transaction
                        stage = TaskState(run.stage).value
                        found = await con.fetchrow(
                            sql.RUN_QUEUED_AFTER, number, row["event_id"], stage
                        )
                        return row, found
                if row is None:
                    raise await w.cas_refusal(con, tid, expected)
                return row, await w.enqueue(con, number, run, queued)

        row, run_row = await self._writes(enter)
        events = [event.model_copy(update={"id": row["event_id"], "at": rows.as_utc(event.at)})]
        if run_row is not None:
            queued_run = ROWS.run(run_row)
            events.append(w.about_run(queued, run_row, queued_run, queued_run.enqueued_at))
        return ROWS.task(row), events

    async def apply_decision(self, write: DecisionWrite) -> tuple[Task, list[Event]]:
        """One transaction of a few statements: the task's compare-and-set with its event,
        the announcement, the anchor, the runs cancelled, the run queued. Retried whole on
        a lost connection; a first try that committed before its reply was lost then
        finds the task moved (StaleState) and its anchor in place, which is how the
        control plane tells the two apart."""
        tid = format_id("T", parse_id("T", write.task_id))
        number = parse_id("T", tid)
        to_state = None
        if isinstance(write.change, TaskTransitioned):
            to_state = checks.transition_event(tid, write.expected, write.change).to_state
        change = checks.event_for_task(tid, write.change)
        announce = checks.event_for_task(tid, write.announce)
        values = checks.task_fields(dict(write.fields))
        statement, args = w.cas_statement(tid, write.expected, values, change, to_state)
        new = write.enqueue
        queued = None if new is None else RunQueued(stage=new.stage, role=new.role)

        async def decide(con: Connection, _: bool) -> tuple[Record, int, Record | None]:
            async with con.transaction():
                row = await con.fetchrow(statement, *args)
                if row is None:
                    raise await w.cas_refusal(con, tid, write.expected)
                announced = await con.fetchval(
                    sql.INSERT_EVENT,
                    rows.as_utc(announce.at),
                    announce.kind,
                    number,
                    None,
                    w.payload(announce),
                )
                if write.anchor is not None:
                    await w.extend_chain(con, write.anchor, write.previous, write.lines)
                if write.cancel_runs:
                    await con.execute(sql.CANCEL_RUNS, number)
                run_row = None
                if new is not None and queued is not None:
                    run_row = await w.enqueue(con, number, new, queued)
            return row, int(announced), run_row

        row, announced, run_row = await self._run(decide)
        self._signal.written()
        events = [
            change.model_copy(update={"id": row["event_id"], "at": rows.as_utc(change.at)}),
            announce.model_copy(update={"id": announced, "at": rows.as_utc(announce.at)}),
        ]
        if run_row is not None and queued is not None:
            run = ROWS.run(run_row)
            events.append(w.about_run(queued, run_row, run, run.enqueued_at))
        return ROWS.task(row), events

    # -- events -----------------------------------------------------------------------

    async def append_event(self, event: Event) -> Event:
        task = rows.number_or_none("T", event.task_id)
        run = rows.number_or_none("R", event.run_id)
        at = rows.as_utc(event.at)
        args = (at, event.kind, task, run, w.payload(event))

        async def append(con: Connection, retried: bool) -> int:
            # A retry whose first try committed before its reply was lost finds that event.
            if retried and (found := await con.fetchval(sql.SAME_EVENT, *args)) is not None:
                return int(found)
            new = await con.fetchval(sql.APPEND_EVENT, *args, event.sent)
            return int(new or await con.fetchval(sql.SENT_EVENT, run, event.sent))

        event_id = await self._writes(append)
        ids = {"task_id": rows.id_or_none("T", task), "run_id": rows.id_or_none("R", run)}
        return event.model_copy(update={**ids, "id": event_id, "at": at})

    async def events_after(
        self,
        after_id: int,
        *,
        task_id: str | None = None,
        limit: int = 1000,
        kind: str | None = None,
        stream: str | None = None,
    ) -> list[Event]:
        task = rows.number_or_none("T", task_id)
        found = await self._run(lambda c, _: w.events_after(c, after_id, task, limit, kind, stream))
        return [ROWS.event(r) for r in found]

    async def last_event_id(self) -> int:
        async def read(con: Connection, _: bool) -> int:
            horizon = await con.fetchval(sql.EVENT_HORIZON, 0, None)
            return 0 if horizon is None else int(await con.fetchval(sql.LAST_EVENT_ID, horizon))

        return await self._run(read)

    async def wait_for_events(self, after_id: int, timeout_s: float) -> bool:
        return await self._signal.wait(after_id, timeout_s, self._newest_event_id)

    async def _newest_event_id(self) -> int:
        return int(await self._run(lambda con, _: con.fetchval(sql.NEWEST_EVENT_ID)))

    # -- runs and leases --------------------------------------------------------------

    async def enqueue_run(self, new: NewRun) -> tuple[Run, Event]:
        event = RunQueued(stage=new.stage, role=new.role)
        number = parse_id("T", new.task_id)
        row = await self._writes(lambda con, _: w.enqueue(con, number, new, event))
        if row is None:
            raise checks.task_not_found(format_id("T", number))
        run = ROWS.run(row)
        return run, w.about_run(event, row, run, run.enqueued_at)

    async def get_run(self, run_id: str) -> Run | None:
        row = await self._fetchrow(sql.GET_RUN, parse_id("R", run_id))
        return ROWS.run(row) if row else None

    async def list_runs(
        self, *, task_id: str | None = None, status: RunStatus | None = None
    ) -> list[Run]:
        task = rows.number_or_none("T", task_id)
        wanted = RunStatus(status).value if status is not None else None
        return [ROWS.run(r) for r in await self._fetch(sql.LIST_RUNS, task, wanted)]

    async def now(self) -> datetime:
        return rows.as_utc(await self._run(lambda con, _: con.fetchval(sql.NOW)))

    async def claim_run(self, worker: str, ttl_s: float) -> Lease | None:
        """Under a key of its own: a retry whose first try committed before its reply was
        lost finds the run it leased, and leases no second one."""
        ttl, key = checks.positive_ttl(ttl_s), uuid.uuid4().hex

        async def claim(con: Connection, retried: bool) -> Record | None:
            if retried and (found := await con.fetchrow(sql.CLAIMED_UNDER_KEY, key)) is not None:
                return found
            return await con.fetchrow(sql.CLAIM_RUN, worker, ttl, key)

        row = await self._run(claim)
        return ROWS.lease(row) if row else None

    async def heartbeat(self, lease: Lease, ttl_s: float) -> Lease:
        ttl = checks.positive_ttl(ttl_s)
        return ROWS.lease(await self._under_lease(sql.HEARTBEAT, lease, ttl))

    async def complete_run(self, lease: Lease, outcome: RunOutcome) -> tuple[Run, Event]:
        event, args = w.completion(outcome)
        row = await self._under_lease(sql.COMPLETE_RUN, lease, *args, finished_twice_ok=True)
        self._signal.written()
        run = ROWS.run(row)
        return run, w.about_run(event, row, run, run.finished_at)

    async def release_run(self, lease: Lease) -> Run:
        return ROWS.run(await self._under_lease(sql.RELEASE_RUN, lease))

    async def _under_lease(
        self, statement: str, lease: Lease, *args: Any, finished_twice_ok: bool = False
    ) -> Record:
        """Run a statement guarded by the lease; LeaseLost (nothing written) if it no longer holds."""

        async def guarded(con: Connection, retried: bool) -> Record:
            return await w.under_lease(
                con, statement, lease, args, retried=retried and finished_twice_ok
            )

        return await self._run(guarded)

    async def cancel_runs(self, task_id: str, *, queued_only: bool = False) -> list[Run]:
        number = parse_id("T", task_id)
        statement = sql.CANCEL_QUEUED_RUNS if queued_only else sql.CANCEL_RUNS
        cancelled = await self._fetch(statement, number)
        if not cancelled and await self._fetchrow(sql.TASK_EXISTS, number) is None:
            raise checks.task_not_found(format_id("T", number))
        return ROWS.runs(cancelled)

    async def reap_expired(
        self, *, retry_delay_s: float = 0.0, max_retry_delay_s: float = 300.0
    ) -> list[Run]:
        first, longest = checks.backoff(retry_delay_s, max_retry_delay_s)
        return ROWS.runs(await self._fetch(sql.REAP_EXPIRED, first, longest))

    # -- artifacts --------------------------------------------------------------------

    async def put_artifact(self, content: bytes, meta: ArtifactMeta) -> Artifact:
        return await self._put(content, meta)

    async def put_artifact_file(self, path: Path, meta: ArtifactMeta) -> Artifact:
        return await self._put(path, meta)

    async def _put(self, content: bytes | Path, meta: ArtifactMeta) -> Artifact:
        """The artifact of `content` with its provenance, its content stored unless it is
        already, in one transaction (a file read a chunk at a time: store.postgres_writes);
        retried when a connection died."""
        sha, size, blob = await w.blob_of(content)
        provenance = w.provenance(sha, meta)

        async def put(con: Connection, retried: bool) -> Record:
            # A retry whose first try committed before its reply was lost finds that artifact.
            if retried and (found := await con.fetchrow(sql.SAME_ARTIFACT, *provenance)):
                return found
            async with con.transaction():
                return await w.put_in(con, provenance, blob)

        return ROWS.artifact(await self._run(put), size=size)

    async def get_artifact(self, artifact_id: str) -> tuple[Artifact, bytes]:
        artifact, content = await self.stream_artifact(artifact_id)
        return artifact, await chunks.whole(content)

    async def stream_artifact(self, artifact_id: str) -> tuple[Artifact, AsyncIterator[bytes]]:
        aid = format_id("A", parse_id("A", artifact_id))
        row = await self._fetchrow(sql.GET_ARTIFACT, parse_id("A", aid))
        if row is None:
            raise checks.artifact_not_found(aid)
        artifact = ROWS.artifact(row)
        content = self._content(artifact.sha256, bytes(row["content"]), row["chunks"])
        return artifact, chunks.verified(artifact, content, changed_outside="the database")

    async def _content(self, sha: str, inline: bytes, count: int) -> AsyncIterator[bytes]:
        """A blob's content: inline, or its chunks read one at a time (a missing one is
        empty; the hash check after the last says so)."""
        if not count:
            yield inline
        for n in range(count):
            found = await self._fetchrow(sql.GET_BLOB_CHUNK, sha, n)
            yield bytes(found["content"]) if found else b""

    async def list_artifacts(self, *, task_id: str | None = None) -> list[Artifact]:
        task = rows.number_or_none("T", task_id)
        return [ROWS.artifact(r) for r in await self._fetch(sql.LIST_ARTIFACTS, task)]

    # -- audit anchor -----------------------------------------------------------------

    async def get_audit_anchor(self) -> AuditAnchor | None:
        row = await self._fetchrow(sql.GET_AUDIT_ANCHOR)
        return rows.anchor(row) if row else None

    async def set_audit_anchor(self, anchor: AuditAnchor, *, previous: AuditAnchor | None) -> None:
        await self._run(lambda con, _: w.move_anchor(con, anchor, previous))

    # -- audit chain (the store keeps it: AuditChainStore) --------------------------------

    async def append_audit_lines(
        self, lines: list[ChainLine], *, previous: AuditAnchor | None
    ) -> None:
        if not lines:
            return
        head = AuditAnchor(seq=lines[-1].seq, hash=lines[-1].hash)

        async def append(con: Connection, _: bool) -> None:
            async with con.transaction():
                await w.extend_chain(con, head, previous, lines)

        await self._run(append)

    async def audit_lines(
        self, *, after: int = 0, limit: int = 1000, task: str | None = None
    ) -> list[ChainLine]:
        found = await self._fetch(sql.AUDIT_LINES, after, limit, task)
        return [
            ChainLine(
                seq=r["seq"],
                text=r["line"],
                hash=r["hash"],
                task=r["task"],
                at=rows.as_utc(r["at"]),
            )
            for r in found
        ]

    async def lock_audit(self) -> Callable[[], Awaitable[None]]:
        """A transaction of its own holding the audit log's advisory lock until released:
        deciders on every checkout sharing this database take turns. It writes nothing; if
        its connection is lost, the lock goes with it (the anchor's compare-and-set still
        stops a second writer). As in `_run`, a lost connection is retried on a fresh one."""

        async def attempt(_: int) -> Callable[[], Awaitable[None]]:
            con = await self._pool.acquire()
            try:
                held = con.transaction()
                await held.start()
                await con.execute(sql.LOCK_AUDIT_TIMEOUT)
                await con.execute(sql.LOCK_AUDIT)
            except BaseException:
                self._pool.release(con)  # still in its transaction: the pool closes it
                raise
            return functools.partial(self._unlock_audit, con, held)

        try:
            return await retry(
                attempt, pauses=RECONNECT.pauses(RETRIES), transient=schema.is_connection_lost
            )
        except asyncpg.exceptions.LockNotAvailableError:
            raise AuditError(
                "another T25 process has held the audit log's lock on this store for 120 s",
                hint="try again when its decision is done",
            ) from None
        except Exception as exc:
            if schema.is_connection_lost(exc):
                raise schema.unreachable(self.url, exc) from exc
            raise

    async def _unlock_audit(self, con: Connection, held: Transaction) -> None:
        try:
            await held.rollback()
        except Exception as exc:
            if not schema.is_connection_lost(exc):
                raise
        finally:
            self._pool.release(con)
