"""The embedded store: one SQLite file, shared safely by every T25 process on the machine.

The file runs in WAL mode with a busy timeout, and every write is a `BEGIN IMMEDIATE`
transaction: SQLite then serializes writers across processes, and a deferred BEGIN's
"database is locked" under contention cannot happen. Within one process, aiosqlite
runs each call on the connection's own thread (the event loop never blocks); an
asyncio.Lock keeps one coroutine's transaction from interleaving with another's.

Opening the file (identity, migrations) is in `sqlite_file`; the SQL is in `sqlite_sql`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiosqlite

from core.domain.clock import Clock, system_clock
from core.domain.events import Event, RunFinished, RunQueued, TaskCreated, TaskTransitioned
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
    Usage,
    format_id,
    parse_id,
)
from core.errors import ArtifactCorrupted, StaleState, StoreUnavailable
from core.ports.store import DecisionWrite
from store import _checks as checks
from store import sqlite_file
from store import sqlite_sql as sql
from store.sqlite_file import BUSY_TIMEOUT_MS, transaction

_HASH_INLINE_MAX = 1 << 20  # hash bigger contents off the event loop
POLL_S = 0.05  # how often a reader waiting for events looks at the file

Row = sqlite3.Row


class SqliteStore:
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
    async def _write(self) -> AsyncIterator[aiosqlite.Connection]:
        """One BEGIN IMMEDIATE transaction; rolled back if the body raises."""
        async with self._lock, _locked_is_unavailable(self.path), transaction(self._db) as db:
            self._now = self._clock().timestamp()  # taken once the file's write lock is held
            yield db
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _read(self, statement: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Row]:
        async with self._lock, _locked_is_unavailable(self.path):
            self._now = self._clock().timestamp()
            return list(await self._db.execute_fetchall(statement, params))

    # -- projects ---------------------------------------------------------------------

    async def upsert_project(self, project: Project) -> Project:
        async with self._write() as db:
            (row,) = await db.execute_fetchall(sql.UPSERT_PROJECT, project.model_dump())
        return Project(**dict(row))

    async def list_projects(self) -> list[Project]:
        return [Project(**dict(r)) for r in await self._read(sql.LIST_PROJECTS)]

    # -- tasks ------------------------------------------------------------------------

    async def create_task(self, new: NewTask, *, actor: str) -> tuple[Task, Event]:
        params = {
            "project": new.project,
            "title": new.title,
            "type": new.type.value,
            "description": new.description,
        }
        async with self._write() as db:
            rows = await db.execute_fetchall(sql.INSERT_TASK, params)
            if not rows:
                raise checks.project_not_found(new.project)
            task = _task(rows[0])
            event = TaskCreated(
                at=task.created_at,
                task_id=task.id,
                title=task.title,
                type=task.type.value,
                project=task.project,
                actor=actor,
            )
            event = await _insert_event(db, event)
        return task, event

    async def get_task(self, task_id: str) -> Task | None:
        rows = await self._read(sql.GET_TASK, (parse_id("T", task_id),))
        return _task(rows[0]) if rows else None

    async def list_tasks(
        self,
        *,
        states: list[TaskState] | None = None,
        project: str | None = None,
        include_archived: bool = False,
    ) -> list[Task]:
        where, params = ["1"], []
        if states is not None:
            where.append(f"state IN ({', '.join('?' * len(states))})")
            params += [TaskState(s).value for s in states]
        if project is not None:
            where.append("project = ?")
            params.append(project)
        if not include_archived:
            where.append("archived = 0")
        rows = await self._read(sql.LIST_TASKS.format(where=" AND ".join(where)), params)
        return [_task(r) for r in rows]

    async def apply_transition(
        self, task_id: str, expected: TaskState, event: Event, fields: dict[str, Any]
    ) -> tuple[Task, Event]:
        tid = format_id("T", parse_id("T", task_id))
        change = checks.transition_event(tid, expected, event)
        extra = {"state": change.to_state.value, "state_since": _ts(change.at)}
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
            return await _cas_in(db, tid, expected, values, event, state)

    async def apply_decision(self, write: DecisionWrite) -> tuple[Task, list[Event]]:
        tid = format_id("T", parse_id("T", write.task_id))
        state = None
        if isinstance(write.change, TaskTransitioned):
            change = checks.transition_event(tid, write.expected, write.change)
            state = {"state": change.to_state.value, "state_since": _ts(change.at)}
        values = checks.task_fields(dict(write.fields))
        announce = checks.event_for_task(tid, write.announce)
        async with self._write() as db:
            task, changed = await _cas_in(db, tid, write.expected, values, write.change, state)
            events = [changed, await _insert_event(db, announce)]
            if write.anchor is not None:
                await _move_anchor(db, write.anchor, write.previous)
            if write.cancel_runs:
                await db.execute_fetchall(sql.CANCEL_RUNS, (parse_id("T", tid),))
            if write.enqueue is not None:
                events.append((await _insert_run(db, write.enqueue))[1])
        return task, events

    # -- events -----------------------------------------------------------------------

    async def append_event(self, event: Event) -> Event:
        async with self._write() as db:
            return await _insert_event(db, event)

    async def events_after(
        self, after_id: int, *, task_id: str | None = None, limit: int = 1000
    ) -> list[Event]:
        if task_id is None:
            rows = await self._read(sql.EVENTS_AFTER, (after_id, limit))
        else:
            rows = await self._read(
                sql.TASK_EVENTS_AFTER, (after_id, parse_id("T", task_id), limit)
            )
        return [_event(r) for r in rows]

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
            return await _insert_run(db, new)

    async def get_run(self, run_id: str) -> Run | None:
        rows = await self._read(sql.GET_RUN, (parse_id("R", run_id),))
        return _run(rows[0]) if rows else None

    async def list_runs(
        self, *, task_id: str | None = None, status: RunStatus | None = None
    ) -> list[Run]:
        where, params = ["1"], []
        if task_id is not None:
            where.append("task_id = ?")
            params.append(parse_id("T", task_id))
        if status is not None:
            where.append("status = ?")
            params.append(RunStatus(status).value)
        rows = await self._read(sql.LIST_RUNS.format(where=" AND ".join(where)), params)
        return [_run(r) for r in rows]

    async def cost_by_task(self) -> dict[str, float]:
        rows = await self._read(sql.COST_BY_TASK)
        return {format_id("T", r["task_id"]): r["cost"] for r in rows}

    async def claim_run(self, worker: str, ttl_s: float) -> Lease | None:
        params = {"worker": worker, "ttl": checks.positive_ttl(ttl_s)}
        async with self._write() as db:
            rows = await db.execute_fetchall(sql.CLAIM_RUN, params)
        return _lease(rows[0]) if rows else None

    async def heartbeat(self, lease: Lease, ttl_s: float) -> Lease:
        params = {**_lease_params(lease), "ttl": checks.positive_ttl(ttl_s)}
        async with self._write() as db:
            row = await self._under_lease(db, sql.HEARTBEAT, params, lease)
        return _lease(row)

    async def complete_run(self, lease: Lease, outcome: RunOutcome) -> tuple[Run, Event]:
        checks.finished_outcome(outcome)
        usage = outcome.usage
        params = {
            **_lease_params(lease),
            **outcome.model_dump(exclude={"usage"}),
            "status": outcome.status.value,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "usage_model": usage.model,
        }
        async with self._write() as db:
            run = _run(await self._under_lease(db, sql.COMPLETE_RUN, params, lease))
            event = RunFinished(
                at=run.finished_at,
                task_id=run.task_id,
                run_id=run.id,
                status=run.status,
                exit_code=run.exit_code,
                error=run.error,
                usage=run.usage,
                cost_usd=run.cost_usd,
            )
            event = await _insert_event(db, event)
        return run, event

    async def release_run(self, lease: Lease) -> Run:
        async with self._write() as db:
            return _run(await self._under_lease(db, sql.RELEASE_RUN, _lease_params(lease), lease))

    async def _under_lease(
        self, db: aiosqlite.Connection, statement: str, params: dict[str, Any], lease: Lease
    ) -> Row:
        """Run a statement guarded by the lease; LeaseLost (nothing written) if it no longer holds."""
        rows = await db.execute_fetchall(statement, params)
        if rows:
            return rows[0]
        current = await db.execute_fetchall(sql.GET_RUN_WITH_CLOCK, (params["id"],))
        if not current:
            raise checks.run_not_found(lease.run_id)
        r = current[0]
        ago = r["now"] - r["lease_expires_at"] if r["lease_expires_at"] is not None else None
        raise checks.lease_lost(
            lease, status=r["status"], token=r["lease_token"], expired_ago_s=ago
        )

    async def cancel_runs(self, task_id: str) -> list[Run]:
        tid = parse_id("T", task_id)
        async with self._write() as db:
            if not await db.execute_fetchall(sql.TASK_EXISTS, (tid,)):
                raise checks.task_not_found(format_id("T", tid))
            rows = await db.execute_fetchall(sql.CANCEL_RUNS, (tid,))
        return _runs(rows)

    async def reap_expired(
        self, *, retry_delay_s: float = 0.0, max_retry_delay_s: float = 300.0
    ) -> list[Run]:
        first, longest = checks.backoff(retry_delay_s, max_retry_delay_s)
        async with self._write() as db:
            rows = await db.execute_fetchall(
                sql.REAP_EXPIRED, {"delay": first, "max_delay": longest}
            )
        return _runs(rows)

    # -- artifacts --------------------------------------------------------------------

    async def put_artifact(self, content: bytes, meta: ArtifactMeta) -> Artifact:
        sha = await _sha256(content)
        task = parse_id("T", meta.task_id) if meta.task_id is not None else None
        run = parse_id("R", meta.run_id) if meta.run_id is not None else None
        params = {**meta.model_dump(mode="json"), "sha256": sha, "task_id": task, "run_id": run}
        async with self._write() as db:
            if task is not None and not await db.execute_fetchall(sql.TASK_EXISTS, (task,)):
                raise checks.task_not_found(format_id("T", task))
            if run is not None and not await db.execute_fetchall(sql.RUN_EXISTS, (run,)):
                raise checks.run_not_found(format_id("R", run))
            await db.execute_fetchall(sql.INSERT_BLOB, (sha, content, len(content)))
            (row,) = await db.execute_fetchall(sql.INSERT_ARTIFACT, params)
        return _artifact(row, size=len(content))

    async def get_artifact(self, artifact_id: str) -> tuple[Artifact, bytes]:
        aid = format_id("A", parse_id("A", artifact_id))
        rows = await self._read(sql.GET_ARTIFACT, (parse_id("A", aid),))
        if not rows:
            raise checks.artifact_not_found(aid)
        artifact, content = _artifact(rows[0]), bytes(rows[0]["content"])
        actual = await _sha256(content)
        if actual != artifact.sha256:
            raise ArtifactCorrupted(
                f"artifact {aid} is corrupted: its content hashes to {actual}, "
                f"but it was stored as {artifact.sha256}",
                hint="the store file was changed outside T25; re-run the stage that produced it",
            )
        return artifact, content

    async def list_artifacts(self, *, task_id: str | None = None) -> list[Artifact]:
        where, params = "1", ()
        if task_id is not None:
            where, params = "artifacts.task_id = ?", (parse_id("T", task_id),)
        rows = await self._read(sql.LIST_ARTIFACTS.format(where=where), params)
        return [_artifact(r) for r in rows]

    # -- audit anchor -----------------------------------------------------------------

    async def get_audit_anchor(self) -> AuditAnchor | None:
        rows = await self._read(sql.GET_AUDIT_ANCHOR)
        return AuditAnchor(seq=rows[0]["seq"], hash=rows[0]["hash"]) if rows else None

    async def set_audit_anchor(self, anchor: AuditAnchor, *, previous: AuditAnchor | None) -> None:
        async with self._write() as db:
            await _move_anchor(db, anchor, previous)

    async def lock_audit(self) -> Callable[[], Awaitable[None]]:
        """Nothing to take: this file is one checkout's store, and every process deciding on
        it takes that checkout's audit log file lock already."""
        return _nothing_to_release


async def _nothing_to_release() -> None:
    return None


@asynccontextmanager
async def _locked_is_unavailable(path: Path) -> AsyncIterator[None]:
    """A lock held past the busy timeout is "busy for now" (StoreUnavailable), not a
    traceback: the same call succeeds once the other process lets go."""
    try:
        yield
    except sqlite3.OperationalError as e:
        if "locked" not in str(e) and "busy" not in str(e):
            raise
        raise StoreUnavailable(
            f"the store {path} stayed locked for over {BUSY_TIMEOUT_MS // 1000} s",
            hint="another process is holding a long write on it; try again",
        ) from e


# -- rows to domain objects -------------------------------------------------------------------


async def _cas_in(
    db: aiosqlite.Connection,
    tid: str,
    expected: TaskState,
    values: dict[str, Any],
    event: Event,
    state: dict[str, Any] | None,
) -> tuple[Task, Event]:
    """A task's compare-and-set and its event, inside the caller's transaction."""
    event = checks.event_for_task(tid, event)
    statement = sql.update_task(list(values), with_state=state is not None)
    params = {
        **values,
        **(state or {}),
        "id": parse_id("T", tid),
        "expected": TaskState(expected).value,
    }
    rows = await db.execute_fetchall(statement, params)
    if not rows:
        now = await db.execute_fetchall(sql.GET_TASK_STATE, (params["id"],))
        if not now:
            raise checks.task_not_found(tid)
        raise checks.stale_task(tid, now[0]["state"], expected)
    return _task(rows[0]), await _insert_event(db, event)


async def _insert_run(db: aiosqlite.Connection, new: NewRun) -> tuple[Run, Event]:
    """A queued run and its RunQueued event, inside the caller's transaction."""
    params = {
        "task_id": parse_id("T", new.task_id),
        "stage": TaskState(new.stage).value,
        "role": new.role,
        "max_attempts": new.max_attempts,
    }
    rows = await db.execute_fetchall(sql.INSERT_RUN, params)
    if not rows:
        raise checks.task_not_found(format_id("T", params["task_id"]))
    run = _run(rows[0])
    queued = RunQueued(
        at=run.enqueued_at, task_id=run.task_id, run_id=run.id, stage=run.stage, role=run.role
    )
    return run, await _insert_event(db, queued)


async def _move_anchor(
    db: aiosqlite.Connection, anchor: AuditAnchor, previous: AuditAnchor | None
) -> None:
    """The audit anchor's compare-and-set, inside the caller's transaction."""
    if previous is None:
        moved = await db.execute_fetchall(sql.INSERT_AUDIT_ANCHOR, (anchor.seq, anchor.hash))
    else:
        moved = await db.execute_fetchall(
            sql.MOVE_AUDIT_ANCHOR, (anchor.seq, anchor.hash, previous.seq, previous.hash)
        )
    if not moved:
        now = await db.execute_fetchall(sql.GET_AUDIT_ANCHOR)
        if now and (now[0]["seq"], now[0]["hash"]) == (anchor.seq, anchor.hash):
            return  # already there
        held = f"seq {now[0]['seq']}" if now else "none"
        expected = f"seq {previous.seq}" if previous else "none"
        raise StaleState(
            f"the audit anchor is at {held}, not {expected}",
            hint="another process appended to the audit log; re-read it and retry",
        )


async def _sha256(content: bytes) -> str:
    if len(content) <= _HASH_INLINE_MAX:
        return hashlib.sha256(content).hexdigest()
    return await asyncio.to_thread(lambda: hashlib.sha256(content).hexdigest())


def _ts(at: datetime) -> float:
    if at.tzinfo is None:  # a naive time is taken as UTC, never as local time
        at = at.replace(tzinfo=UTC)
    return at.timestamp()


def _dt(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def _id(prefix: str, number: int | None) -> str | None:
    return None if number is None else format_id(prefix, number)


async def _insert_event(db: aiosqlite.Connection, event: Event) -> Event:
    task = parse_id("T", event.task_id) if event.task_id is not None else None
    run = parse_id("R", event.run_id) if event.run_id is not None else None
    payload = json.dumps(event.payload(), separators=(",", ":"))
    ((new_id,),) = await db.execute_fetchall(
        sql.INSERT_EVENT, (_ts(event.at), event.kind, task, run, payload)
    )
    return event.model_copy(
        update={"id": new_id, "task_id": _id("T", task), "run_id": _id("R", run)}
    )


def _event(r: Row) -> Event:
    return Event.restore(
        r["kind"],
        json.loads(r["payload"]),
        id=r["id"],
        at=_dt(r["at"]),
        task_id=_id("T", r["task_id"]),
        run_id=_id("R", r["run_id"]),
    )


def _task(r: Row) -> Task:
    return Task(
        id=format_id("T", r["id"]),
        project=r["project"],
        title=r["title"],
        type=r["type"],
        description=r["description"],
        state=r["state"],
        resume_state=r["resume_state"],
        archived=bool(r["archived"]),
        merged=bool(r["merged"]),
        qa_loops=r["qa_loops"],
        review_loops=r["review_loops"],
        error=r["error"],
        approved_plan_sha=r["approved_plan_sha"],
        checks_passed=None if r["checks_passed"] is None else bool(r["checks_passed"]),
        review_verdict=r["review_verdict"],
        created_at=_dt(r["created_at"]),
        state_since=_dt(r["state_since"]),
    )


def _run(r: Row) -> Run:
    usage = Usage(
        input_tokens=r["input_tokens"],
        output_tokens=r["output_tokens"],
        cache_read_tokens=r["cache_read_tokens"],
        cache_write_tokens=r["cache_write_tokens"],
        model=r["usage_model"],
    )
    return Run(
        id=format_id("R", r["id"]),
        task_id=format_id("T", r["task_id"]),
        stage=r["stage"],
        role=r["role"],
        status=r["status"],
        attempts=r["attempts"],
        max_attempts=r["max_attempts"],
        worker=r["worker"],
        lease_token=r["lease_token"],
        lease_expires_at=_dt(r["lease_expires_at"]),
        adapter=r["adapter"],
        adapter_reason=r["adapter_reason"],
        cli_version=r["cli_version"],
        model=r["model"],
        exit_code=r["exit_code"],
        error=r["error"],
        usage=usage,
        cost_usd=r["cost_usd"],
        enqueued_at=_dt(r["enqueued_at"]),
        started_at=_dt(r["started_at"]),
        finished_at=_dt(r["finished_at"]),
    )


def _runs(rows: Iterable[Row]) -> list[Run]:
    return sorted((_run(r) for r in rows), key=lambda run: parse_id("R", run.id))


def _lease(r: Row) -> Lease:
    return Lease(
        run_id=format_id("R", r["id"]),
        task_id=format_id("T", r["task_id"]),
        token=r["lease_token"],
        worker=r["worker"],
        expires_at=_dt(r["lease_expires_at"]),
    )


def _lease_params(lease: Lease) -> dict[str, Any]:
    return {"id": parse_id("R", lease.run_id), "token": lease.token}


def _artifact(r: Row, *, size: int | None = None) -> Artifact:
    meta = ArtifactMeta(
        kind=r["kind"],
        media_type=r["media_type"],
        task_id=_id("T", r["task_id"]),
        run_id=_id("R", r["run_id"]),
        role=r["role"],
        adapter=r["adapter"],
        cli_version=r["cli_version"],
        model=r["model"],
    )
    return Artifact(
        id=format_id("A", r["id"]),
        sha256=r["sha256"],
        size=r["size"] if size is None else size,
        meta=meta,
        created_at=_dt(r["created_at"]),
    )
