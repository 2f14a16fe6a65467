"""The embedded store: one SQLite file, shared safely by every T25 process on the machine.

The file runs in WAL mode with a busy timeout, and every write of several statements is a
`BEGIN IMMEDIATE` transaction (a write of one statement is its own, taking the write lock as
it starts): SQLite then serializes writers across processes, and a deferred BEGIN's
"database is locked" under contention cannot happen. Within one process, aiosqlite
runs each call on the connection's own thread (the event loop never blocks); an
asyncio.Lock keeps one coroutine's transaction from interleaving with another's.

Opening the file (identity, migrations) is in `sqlite_file`; the SQL is in `sqlite_sql`; the
writes inside a transaction in `sqlite_writes`, and those of a run's completion and of the
decision on it, several in one transaction, in `sqlite_moves`; rows become domain objects in
`rows` (times are kept as seconds since the epoch).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import aiosqlite

from core.domain.clock import Clock, system_clock
from core.domain.events import (
    DecisionRecorded,
    Event,
    RunOutput,
    TaskCreated,
    TaskTransitioned,
)
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
from core.domain.network import NETWORK_STREAM
from core.errors import StoreUnavailable, disk_full
from core.ports.store import DecisionWrite
from store import _checks as checks
from store import _chunks as chunks
from store import rows, sqlite_file
from store import sqlite_sql as sql
from store import sqlite_writes as w
from store.sqlite_file import BUSY_TIMEOUT_MS, transaction
from store.sqlite_moves import SqliteMoves
from store.sqlite_task_reads import SqliteTaskReads

POLL_S = 0.05  # how often a reader waiting for events looks at the file
ROWS = w.ROWS

Row = sqlite3.Row
Params = Sequence[Any] | Mapping[str, Any]


class SqliteStore(SqliteMoves, SqliteTaskReads):
    """The Store on one SQLite file. Open it with `await SqliteStore.open(path)`."""

    def __init__(
        self, db: aiosqlite.Connection, path: Path, url: str, clock: Clock = system_clock
    ) -> None:
        self._db = db
        self._clock = clock
        self._now = 0.0  # the time of the transaction in progress: what NOW reads
        self._lock = asyncio.Lock()
        self._changed = asyncio.Event()  # set (and replaced) after each write of this store
        self.path = path
        self.url = url

    # -- opening and closing ----------------------------------------------------------

    @classmethod
    async def open(
        cls, path: str | Path, *, url: str | None = None, clock: Clock = system_clock
    ) -> SqliteStore:
        """Open (creating if needed) the T25 database at `path` and bring its schema up to date.

        StoreError if the file is not a T25 database or was written by a newer T25;
        a foreign file is left exactly as it was. `clock` stamps every time the store
        writes (sqlite_sql.NOW).
        """
        # `~` may need the password database (no HOME): off the event loop.
        path = await asyncio.to_thread(Path(path).expanduser)
        db = await sqlite_file.connect(path)
        store = cls(db, path, url or f"sqlite:///{path}", clock)
        await db.create_function("t25_now", 0, store._transaction_time)
        return store

    def _transaction_time(self) -> float:
        return self._now

    async def close(self) -> None:
        async with self._lock:
            await self._db.close()

    # -- plumbing ---------------------------------------------------------------------

    @asynccontextmanager
    async def _write(self, *, alone: bool = False) -> AsyncIterator[aiosqlite.Connection]:
        """One BEGIN IMMEDIATE transaction; rolled back if the body raises. `alone`: a
        write that is one statement is its own transaction (the connection autocommits: it
        takes the write lock as it writes, with no read lock to upgrade), one trip to the
        connection's thread instead of three (an event, a claim)."""
        held = contextlib.nullcontext(self._db) if alone else transaction(self._db)
        async with self._lock, _locked_is_unavailable(self.path), held as db:
            self._now = self._clock().timestamp()  # taken once the file's write lock is held
            yield db
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _read(self, statement: str, params: Params = ()) -> list[Row]:
        async with self._lock, _locked_is_unavailable(self.path):
            self._now = self._clock().timestamp()
            return await w.fetch_all(self._db, statement, params)

    # -- projects ---------------------------------------------------------------------

    async def upsert_project(self, project: Project) -> Project:
        async with self._write() as db:
            (row,) = await w.fetch_all(db, sql.UPSERT_PROJECT, project.model_dump())
        return rows.project(row)

    async def list_projects(self) -> list[Project]:
        return [rows.project(r) for r in await self._read(sql.LIST_PROJECTS)]

    # -- tasks ------------------------------------------------------------------------

    async def create_task(self, new: NewTask, *, actor: str) -> tuple[Task, Event]:
        params = {
            "project": new.project,
            "title": new.title,
            "type": new.type.value,
            "description": new.description,
            "request_key": new.request_key,
            "priority": new.priority,
            "after_tasks": json.dumps(list(new.after)) if new.after else None,
        }
        async with self._write() as db:
            if new.request_key is not None:  # filed already under this key: that task
                found = await w.fetch_all(db, sql.CREATED_UNDER_KEY, (new.request_key,))
                if found:
                    (event_row,) = await w.fetch_all(db, sql.GET_EVENT, (found[0]["event_id"],))
                    return ROWS.task(found[0]), ROWS.event(event_row)
            inserted = await w.fetch_all(db, sql.INSERT_TASK, params)
            if not inserted:
                raise checks.project_not_found(new.project)
            task = ROWS.task(inserted[0])
            created = TaskCreated(
                at=task.created_at,
                task_id=task.id,
                title=task.title,
                type=task.type.value,
                project=task.project,
                actor=actor,
            )
            event = await w.insert_event(db, created)
        return task, event

    async def get_task(self, task_id: str) -> Task | None:
        found = await self._read(sql.GET_TASK, (parse_id("T", task_id),))
        return ROWS.task(found[0]) if found else None

    async def apply_transition(
        self, task_id: str, expected: TaskState, event: Event, fields: dict[str, Any]
    ) -> tuple[Task, Event]:
        tid = format_id("T", parse_id("T", task_id))
        change = checks.transition_event(tid, expected, event)
        extra = {"state": change.to_state.value, "state_since": w.ts(change.at)}
        return await self._cas_task(tid, expected, checks.task_fields(fields), event, extra)

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
        state: dict[str, Any] | None,
    ) -> tuple[Task, Event]:
        async with self._write() as db:
            return await w.cas_in(db, tid, expected, values, event, state)

    async def apply_decision(self, write: DecisionWrite) -> tuple[Task, list[Event]]:
        if write.lines:  # this store keeps no chain: its log file is the chain
            raise ValueError("the SQLite store keeps no audit chain; its log file does")
        tid = format_id("T", parse_id("T", write.task_id))
        state = None
        if isinstance(write.change, TaskTransitioned):
            change = checks.transition_event(tid, write.expected, write.change)
            state = {"state": change.to_state.value, "state_since": w.ts(change.at)}
        values = checks.task_fields(dict(write.fields))
        announce = checks.event_for_task(tid, write.announce)
        async with self._write() as db:
            task, changed = await w.cas_in(db, tid, write.expected, values, write.change, state)
            events = [changed, await w.insert_event(db, announce)]
            if write.anchor is not None:
                await w.move_anchor(db, write.anchor, write.previous)
            if write.cancel_runs:
                await db.execute_fetchall(sql.CANCEL_RUNS, (parse_id("T", tid),))
            if write.enqueue is not None:
                events.append((await w.insert_run(db, write.enqueue))[1])
        return task, events

    async def enter_stage(
        self, task_id: str, expected: TaskState, event: Event, fields: dict[str, Any], run: NewRun
    ) -> tuple[Task, list[Event]]:
        tid = format_id("T", parse_id("T", task_id))
        change = checks.transition_event(tid, expected, event)
        checks.run_of_stage(tid, change.to_state, run)
        state = {"state": change.to_state.value, "state_since": w.ts(change.at)}
        values = checks.task_fields(fields)
        async with self._write() as db:
            task, changed = await w.cas_in(db, tid, expected, values, event, state)
            _run, queued = await w.insert_run(db, run)
        return task, [changed, queued]

    # -- events -----------------------------------------------------------------------

    async def append_event(self, event: Event) -> Event:
        async with self._write(alone=True) as db:  # one INSERT (the kept one read after)
            return await w.insert_event(db, event)

    async def events_after(
        self,
        after_id: int,
        *,
        task_id: str | None = None,
        limit: int = 1000,
        kind: str | None = None,
        stream: str | None = None,
    ) -> list[Event]:
        if kind is not None and task_id is not None:
            network = kind == RunOutput.kind and stream == NETWORK_STREAM
            found = await self._read(
                sql.TASK_NETWORK_AFTER if network else sql.TASK_KIND_EVENTS_AFTER,
                {
                    "task": parse_id("T", task_id),
                    "kind": kind,
                    "after": after_id,
                    "stream": stream,
                    "limit": limit,
                },
            )
        elif kind is not None:
            task = None if task_id is None else parse_id("T", task_id)
            found = await self._read(
                sql.DECISIONS_AFTER if kind == DecisionRecorded.kind else sql.KIND_EVENTS_AFTER,
                {"kind": kind, "after": after_id, "task": task, "limit": limit},
            )
        elif task_id is None:
            found = await self._read(sql.EVENTS_AFTER, (after_id, limit))
        else:
            found = await self._read(
                sql.TASK_EVENTS_AFTER, (after_id, parse_id("T", task_id), limit)
            )
        return [ROWS.event(r) for r in found]

    async def last_event_id(self) -> int:
        (row,) = await self._read(sql.LAST_EVENT_ID)
        return int(row[0])

    async def wait_for_events(self, after_id: int, timeout_s: float) -> bool:
        """Writes of this store wake the wait at once; another process's are seen by
        polling the newest id (an index lookup) every POLL_S."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout_s)
        while True:
            changed = self._changed  # taken before the check: a write in between is not lost
            if await self.last_event_id() > after_id:
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(changed.wait(), min(remaining, POLL_S))

    # -- runs and leases --------------------------------------------------------------

    async def enqueue_run(self, new: NewRun) -> tuple[Run, Event]:
        async with self._write() as db:
            return await w.insert_run(db, new)

    async def get_run(self, run_id: str) -> Run | None:
        found = await self._read(sql.GET_RUN, (parse_id("R", run_id),))
        return ROWS.run(found[0]) if found else None

    async def list_runs(
        self, *, task_id: str | None = None, status: RunStatus | None = None
    ) -> list[Run]:
        where: list[str] = ["1"]
        params: list[int | str] = []
        if task_id is not None:
            where.append("task_id = ?")
            params.append(parse_id("T", task_id))
        if status is not None:
            where.append("status = ?")
            params.append(RunStatus(status).value)
        found = await self._read(sql.LIST_RUNS.format(where=" AND ".join(where)), params)
        return [ROWS.run(r) for r in found]

    async def now(self) -> datetime:
        return self._clock()

    async def claim_run(self, worker: str, ttl_s: float) -> Lease | None:
        params = {"worker": worker, "ttl": checks.positive_ttl(ttl_s)}
        async with self._write(alone=True) as db:
            claimed = await w.fetch_all(db, sql.CLAIM_RUN, params)
        return ROWS.lease(claimed[0]) if claimed else None

    async def heartbeat(self, lease: Lease, ttl_s: float) -> Lease:
        params = {**w.lease_params(lease), "ttl": checks.positive_ttl(ttl_s)}
        async with self._write() as db:
            row = await w.under_lease(db, sql.HEARTBEAT, params, lease)
        return ROWS.lease(row)

    async def complete_run(self, lease: Lease, outcome: RunOutcome) -> tuple[Run, Event]:
        async with self._write() as db:
            return await w.complete_in(db, lease, outcome)

    async def release_run(self, lease: Lease) -> Run:
        async with self._write() as db:
            row = await w.under_lease(db, sql.RELEASE_RUN, w.lease_params(lease), lease)
        return ROWS.run(row)

    async def cancel_runs(self, task_id: str, *, queued_only: bool = False) -> list[Run]:
        tid = parse_id("T", task_id)
        statement = sql.CANCEL_QUEUED_RUNS if queued_only else sql.CANCEL_RUNS
        async with self._write() as db:
            if not await w.fetch_all(db, sql.TASK_EXISTS, (tid,)):
                raise checks.task_not_found(format_id("T", tid))
            cancelled = await w.fetch_all(db, statement, (tid,))
        return ROWS.runs(cancelled)

    async def reap_expired(
        self, *, retry_delay_s: float = 0.0, max_retry_delay_s: float = 300.0
    ) -> list[Run]:
        first, longest = checks.backoff(retry_delay_s, max_retry_delay_s)
        if not await self._read(sql.ANY_EXPIRED):
            return []
        async with self._write() as db:
            reaped = await w.fetch_all(db, sql.REAP_EXPIRED, {"delay": first, "max_delay": longest})
        return ROWS.runs(reaped)

    # -- artifacts --------------------------------------------------------------------

    async def put_artifact(self, content: bytes, meta: ArtifactMeta) -> Artifact:
        return await self._put(content, meta)

    async def put_artifact_file(self, path: Path, meta: ArtifactMeta) -> Artifact:
        return await self._put(path, meta)

    async def _put(self, content: bytes | Path, meta: ArtifactMeta) -> Artifact:
        """The artifact of `content` with its provenance, its content stored unless it is
        already, in one transaction (a file read a chunk at a time: store.sqlite_writes)."""
        sha, size, blob = await w.blob_of(content)
        async with self._write() as db:
            return ROWS.artifact(await w.put_in(db, sha, meta, blob), size=size)

    async def get_artifact(self, artifact_id: str) -> tuple[Artifact, bytes]:
        artifact, content = await self.stream_artifact(artifact_id)
        return artifact, await chunks.whole(content)

    async def stream_artifact(self, artifact_id: str) -> tuple[Artifact, AsyncIterator[bytes]]:
        aid = format_id("A", parse_id("A", artifact_id))
        found = await self._read(sql.GET_ARTIFACT, (parse_id("A", aid),))
        if not found:
            raise checks.artifact_not_found(aid)
        artifact = ROWS.artifact(found[0])
        content = self._content(artifact.sha256, bytes(found[0]["content"]), found[0]["chunks"])
        return artifact, chunks.verified(artifact, content, changed_outside="the store file")

    async def _content(self, sha: str, inline: bytes, count: int) -> AsyncIterator[bytes]:
        """A blob's content: inline, or its chunks read one at a time (a missing one is
        empty; the hash check after the last says so)."""
        if not count:
            yield inline
        for n in range(count):
            found = await self._read(sql.GET_BLOB_CHUNK, (sha, n))
            yield bytes(found[0]["content"]) if found else b""

    async def list_artifacts(self, *, task_id: str | None = None) -> list[Artifact]:
        where, params = "1", tuple[int, ...]()
        if task_id is not None:
            where, params = "artifacts.task_id = ?", (parse_id("T", task_id),)
        found = await self._read(sql.LIST_ARTIFACTS.format(where=where), params)
        return [ROWS.artifact(r) for r in found]

    # -- audit anchor -----------------------------------------------------------------

    async def get_audit_anchor(self) -> AuditAnchor | None:
        found = await self._read(sql.GET_AUDIT_ANCHOR)
        return rows.anchor(found[0]) if found else None

    async def set_audit_anchor(self, anchor: AuditAnchor, *, previous: AuditAnchor | None) -> None:
        async with self._write() as db:
            await w.move_anchor(db, anchor, previous)

    async def lock_audit(self) -> Callable[[], Awaitable[None]]:
        """Nothing to take: this file is one checkout's store, and every process deciding on
        it takes that checkout's audit log file lock already."""
        return _nothing_to_release


async def _nothing_to_release() -> None:
    return None


@asynccontextmanager
async def _locked_is_unavailable(path: Path) -> AsyncIterator[None]:
    """A lock held past the busy timeout is "busy for now" (StoreUnavailable), not a
    traceback: the same call succeeds once the other process lets go. So is a full disk
    (SQLITE_FULL): the write was rolled back, and succeeds once there is room again."""
    try:
        yield
    except sqlite3.OperationalError as e:
        if getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "is full" in str(e):
            raise StoreUnavailable(
                disk_full(f"the store {path} could not be written", path),
                hint="free space on that disk; T25 goes on once there is room",
            ) from e
        if "locked" not in str(e) and "busy" not in str(e):
            raise
        raise StoreUnavailable(
            f"the store {path} stayed locked for over {BUSY_TIMEOUT_MS // 1000} s",
            hint="another process is holding a long write on it; try again",
        ) from e
