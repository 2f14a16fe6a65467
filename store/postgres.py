"""The production store: Postgres through pooled asyncpg connections, shared by many workers on many hosts.

Every operation that changes state is one statement (its event row written in the same
statement by a data-modifying CTE), so it is its own transaction and costs one round
trip; the compare-and-set and lease conditions sit in its WHERE clause, never in a
read before it. Claims take the oldest claimable run with `FOR UPDATE SKIP LOCKED`, so
claimers never queue behind each other. Lease times come from the database clock.

A statement that fails because its connection was lost (the server restarted, the
backend was terminated) is retried on a fresh connection from the pool; one still
failing after a few tries raises StoreUnavailable (core.errors), as does a server too
busy to take it, so no caller ever sees a driver exception for "not now". A statement
killed before it committed was rolled back, so the retry is simply its first success.
In the rare case the connection died after the commit but before the reply: a
completion finds its own RunFinished on the retry and returns it; a claim leases the
next run, and the one whose lease nobody heard of returns to the queue when its
deadline passes (the reaper's ordinary work: nothing is lost). Schema, migrations and
the connection pool are in `postgres_schema`; the SQL is in `postgres_sql`; cross-process
wake-ups are in `postgres_events`.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import asyncpg

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
from core.errors import ArtifactCorrupted, AuditError, StaleState
from core.ports.store import DecisionWrite
from store import _checks as checks
from store import postgres_schema as schema
from store import postgres_sql as sql
from store.postgres_events import EventSignal

T = TypeVar("T")
Row = asyncpg.Record

RETRIES = 3  # fresh connections tried after a lost one
_HASH_INLINE_MAX = 1 << 20
_BOOLEAN_FIELDS = frozenset({"archived", "merged", "checks_passed"})


class PostgresStore:
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

    async def _connect_listener(self) -> asyncpg.Connection:
        return await schema.connect(self.url, application_name=f"{self._application_name}-listen")

    # -- plumbing ---------------------------------------------------------------------

    async def _run(self, op: Callable[[asyncpg.Connection, bool], Awaitable[T]]) -> T:
        """Run `op` on a pooled connection; on a lost connection (or a busy server), again
        on a fresh one. Still failing after RETRIES: StoreUnavailable, never the driver's
        exception. A server that refuses the connection itself for good (the database was
        dropped, the role may no longer log in) is a StoreError.

        `op` is told whether this is a retry, so a write can tell "did my first try
        commit?" apart from "someone else got there first"."""
        for attempt in range(RETRIES + 1):
            try:
                try:
                    con = await self._pool.acquire()
                except asyncpg.PostgresError as exc:
                    if not schema.is_transient(exc):
                        raise schema.unreachable(self.url, exc) from exc
                    raise
                try:
                    return await op(con, attempt > 0)
                except BaseException as exc:
                    self._pool.discard_if_lost(con, exc)
                    raise
                finally:
                    self._pool.release(con)  # dropped there if the connection was lost
            except Exception as exc:
                if not schema.is_transient(exc):
                    raise
                if attempt == RETRIES:
                    raise schema.unreachable(self.url, exc) from exc
                await asyncio.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable")

    async def _fetch(self, statement: str, *args: Any) -> list[Row]:
        return await self._run(lambda con, _: con.fetch(statement, *args))

    async def _fetchrow(self, statement: str, *args: Any) -> Row | None:
        return await self._run(lambda con, _: con.fetchrow(statement, *args))

    async def _written(self, statement: str, *args: Any) -> Row | None:
        """A statement that writes an event: readers everywhere hear of it once it committed."""
        row = await self._fetchrow(statement, *args)
        if row is not None:
            self._signal.written()
        return row

    # -- projects ---------------------------------------------------------------------

    async def upsert_project(self, project: Project) -> Project:
        row = await self._fetchrow(
            sql.UPSERT_PROJECT, project.name, project.repo_path, project.default_branch
        )
        return Project(**dict(row))  # type: ignore[arg-type]

    async def list_projects(self) -> list[Project]:
        return [Project(**dict(r)) for r in await self._fetch(sql.LIST_PROJECTS)]

    # -- tasks ------------------------------------------------------------------------

    async def create_task(self, new: NewTask, *, actor: str) -> tuple[Task, Event]:
        event = TaskCreated(title=new.title, type=new.type.value, project=new.project, actor=actor)
        row = await self._written(
            sql.CREATE_TASK,
            new.project,
            new.title,
            new.type.value,
            new.description,
            _payload(event),
        )
        if row is None:
            raise checks.project_not_found(new.project)
        task = _task(row)
        return task, event.model_copy(
            update={"id": row["event_id"], "at": task.created_at, "task_id": task.id}
        )

    async def get_task(self, task_id: str) -> Task | None:
        row = await self._fetchrow(sql.GET_TASK, parse_id("T", task_id))
        return _task(row) if row else None

    async def list_tasks(
        self,
        *,
        states: list[TaskState] | None = None,
        project: str | None = None,
        include_archived: bool = False,
    ) -> list[Task]:
        wanted = None if states is None else [TaskState(s).value for s in states]
        return [
            _task(r) for r in await self._fetch(sql.LIST_TASKS, wanted, project, include_archived)
        ]

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
        statement, args = _cas_statement(tid, expected, values, event, to_state)
        row = await self._written(statement, *args)
        if row is None:
            raise await self._run(lambda con, _: _cas_refusal(con, tid, expected))
        return _task(row), event.model_copy(update={"id": row["event_id"], "at": _aware(event.at)})

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
        statement, args = _cas_statement(tid, write.expected, values, change, to_state)
        new = write.enqueue
        queued = None if new is None else RunQueued(stage=new.stage, role=new.role)

        async def decide(con: asyncpg.Connection, _: bool) -> tuple[Row, int, Row | None]:
            async with con.transaction():
                row = await con.fetchrow(statement, *args)
                if row is None:
                    raise await _cas_refusal(con, tid, write.expected)
                announced = await con.fetchval(
                    sql.INSERT_EVENT,
                    _aware(announce.at),
                    announce.kind,
                    number,
                    None,
                    _payload(announce),
                )
                if write.anchor is not None:
                    await _move_anchor(con, write.anchor, write.previous)
                if write.cancel_runs:
                    await con.execute(sql.CANCEL_RUNS, number)
                run_row = None
                if new is not None and queued is not None:
                    run_row = await con.fetchrow(
                        sql.ENQUEUE_RUN,
                        number,
                        TaskState(new.stage).value,
                        new.role,
                        new.max_attempts,
                        _payload(queued),
                    )
            return row, announced, run_row

        row, announced, run_row = await self._run(decide)
        self._signal.written()
        events = [
            change.model_copy(update={"id": row["event_id"], "at": _aware(change.at)}),
            announce.model_copy(update={"id": announced, "at": _aware(announce.at)}),
        ]
        if run_row is not None and queued is not None:
            run = _run(run_row)
            events.append(
                queued.model_copy(
                    update={
                        "id": run_row["event_id"],
                        "at": run.enqueued_at,
                        "task_id": run.task_id,
                        "run_id": run.id,
                    }
                )
            )
        return _task(row), events

    # -- events -----------------------------------------------------------------------

    async def append_event(self, event: Event) -> Event:
        task = parse_id("T", event.task_id) if event.task_id is not None else None
        run = parse_id("R", event.run_id) if event.run_id is not None else None
        row = await self._written(
            sql.INSERT_EVENT, _aware(event.at), event.kind, task, run, _payload(event)
        )
        return event.model_copy(
            update={
                "id": row["id"],
                "at": _aware(event.at),  # type: ignore[index]
                "task_id": _id("T", task),
                "run_id": _id("R", run),
            }
        )

    async def events_after(
        self, after_id: int, *, task_id: str | None = None, limit: int = 1000
    ) -> list[Event]:
        task = parse_id("T", task_id) if task_id is not None else None

        async def read(con: asyncpg.Connection, _: bool) -> list[Row]:
            if task is None:
                rows = await con.fetch(sql.EVENTS_FROM, after_id, limit)
                settled = next(
                    (i for i, r in enumerate(rows) if r["id"] != after_id + 1 + i), len(rows)
                )
                if settled or not rows:
                    return rows[:settled]
            horizon = await con.fetchval(sql.EVENT_HORIZON, after_id, task)
            if horizon is None:  # nothing past the cursor yet
                return []
            if task is None:
                return await con.fetch(sql.EVENTS_AFTER, after_id, horizon, limit)
            return await con.fetch(sql.TASK_EVENTS_AFTER, after_id, horizon, limit, task)

        return [_event(r) for r in await self._run(read)]

    async def last_event_id(self) -> int:
        async def read(con: asyncpg.Connection, _: bool) -> int:
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
        row = await self._written(
            sql.ENQUEUE_RUN,
            number,
            TaskState(new.stage).value,
            new.role,
            new.max_attempts,
            _payload(event),
        )
        if row is None:
            raise checks.task_not_found(format_id("T", number))
        run = _run(row)
        return run, event.model_copy(
            update={
                "id": row["event_id"],
                "at": run.enqueued_at,
                "task_id": run.task_id,
                "run_id": run.id,
            }
        )

    async def get_run(self, run_id: str) -> Run | None:
        row = await self._fetchrow(sql.GET_RUN, parse_id("R", run_id))
        return _run(row) if row else None

    async def list_runs(
        self, *, task_id: str | None = None, status: RunStatus | None = None
    ) -> list[Run]:
        task = parse_id("T", task_id) if task_id is not None else None
        wanted = RunStatus(status).value if status is not None else None
        return [_run(r) for r in await self._fetch(sql.LIST_RUNS, task, wanted)]

    async def cost_by_task(self) -> dict[str, float]:
        rows = await self._fetch(sql.COST_BY_TASK)
        return {format_id("T", r["task_id"]): r["cost"] for r in rows}

    async def claim_run(self, worker: str, ttl_s: float) -> Lease | None:
        row = await self._fetchrow(sql.CLAIM_RUN, worker, checks.positive_ttl(ttl_s))
        return _lease(row) if row else None

    async def heartbeat(self, lease: Lease, ttl_s: float) -> Lease:
        ttl = checks.positive_ttl(ttl_s)
        return _lease(await self._under_lease(sql.HEARTBEAT, lease, ttl))

    async def complete_run(self, lease: Lease, outcome: RunOutcome) -> tuple[Run, Event]:
        checks.finished_outcome(outcome)
        usage = outcome.usage
        event = RunFinished(
            status=outcome.status,
            exit_code=outcome.exit_code,
            error=outcome.error,
            usage=usage,
            cost_usd=outcome.cost_usd,
        )
        args = (
            outcome.status.value,
            outcome.exit_code,
            outcome.error,
            outcome.adapter,
            outcome.adapter_reason,
            outcome.cli_version,
            outcome.model,
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.model,
            outcome.cost_usd,
            _payload(event),
        )
        row = await self._under_lease(sql.COMPLETE_RUN, lease, *args, finished_twice_ok=True)
        self._signal.written()
        run = _run(row)
        return run, event.model_copy(
            update={
                "id": row["event_id"],
                "at": run.finished_at,
                "task_id": run.task_id,
                "run_id": run.id,
            }
        )

    async def release_run(self, lease: Lease) -> Run:
        return _run(await self._under_lease(sql.RELEASE_RUN, lease))

    async def _under_lease(
        self, statement: str, lease: Lease, *args: Any, finished_twice_ok: bool = False
    ) -> Row:
        """Run a statement guarded by the lease; LeaseLost (nothing written) if it no longer holds."""
        number = parse_id("R", lease.run_id)

        async def guarded(con: asyncpg.Connection, retried: bool) -> Row:
            row = await con.fetchrow(statement, number, lease.token, *args)
            if row is not None:
                return row
            if (
                retried and finished_twice_ok
            ):  # our first try may have committed before the connection died
                done = await con.fetchrow(sql.FINISHED_UNDER_TOKEN, number, lease.token)
                if done is not None:
                    return done
            current = await con.fetchrow(sql.GET_RUN_WITH_CLOCK, number)
            if current is None:
                raise checks.run_not_found(lease.run_id)
            raise checks.lease_lost(
                lease,
                status=current["status"],
                token=current["lease_token"],
                expired_ago_s=current["expired_ago"],
            )

        return await self._run(guarded)

    async def cancel_runs(self, task_id: str) -> list[Run]:
        number = parse_id("T", task_id)
        rows = await self._fetch(sql.CANCEL_RUNS, number)
        if not rows and await self._fetchrow(sql.TASK_EXISTS, number) is None:
            raise checks.task_not_found(format_id("T", number))
        return _runs(rows)

    async def reap_expired(
        self, *, retry_delay_s: float = 0.0, max_retry_delay_s: float = 300.0
    ) -> list[Run]:
        first, longest = checks.backoff(retry_delay_s, max_retry_delay_s)
        return _runs(await self._fetch(sql.REAP_EXPIRED, first, longest))

    # -- artifacts --------------------------------------------------------------------

    async def put_artifact(self, content: bytes, meta: ArtifactMeta) -> Artifact:
        sha = await _sha256(content)
        task = parse_id("T", meta.task_id) if meta.task_id is not None else None
        run = parse_id("R", meta.run_id) if meta.run_id is not None else None

        async def put(con: asyncpg.Connection, _: bool) -> Row:
            async with con.transaction():
                if task is not None and await con.fetchrow(sql.TASK_EXISTS, task) is None:
                    raise checks.task_not_found(format_id("T", task))
                if run is not None and await con.fetchrow(sql.RUN_EXISTS, run) is None:
                    raise checks.run_not_found(format_id("R", run))
                await con.execute(sql.INSERT_BLOB, sha, content, len(content))
                return await con.fetchrow(
                    sql.INSERT_ARTIFACT,
                    sha,
                    meta.kind.value,
                    meta.media_type,
                    task,
                    run,
                    meta.role,
                    meta.adapter,
                    meta.cli_version,
                    meta.model,
                )

        return _artifact(await self._run(put), size=len(content))

    async def get_artifact(self, artifact_id: str) -> tuple[Artifact, bytes]:
        aid = format_id("A", parse_id("A", artifact_id))
        row = await self._fetchrow(sql.GET_ARTIFACT, parse_id("A", aid))
        if row is None:
            raise checks.artifact_not_found(aid)
        artifact, content = _artifact(row), bytes(row["content"])
        actual = await _sha256(content)
        if actual != artifact.sha256:
            raise ArtifactCorrupted(
                f"artifact {aid} is corrupted: its content hashes to {actual}, "
                f"but it was stored as {artifact.sha256}",
                hint="the database was changed outside T25; re-run the stage that produced it",
            )
        return artifact, content

    async def list_artifacts(self, *, task_id: str | None = None) -> list[Artifact]:
        task = parse_id("T", task_id) if task_id is not None else None
        return [_artifact(r) for r in await self._fetch(sql.LIST_ARTIFACTS, task)]

    # -- audit anchor -----------------------------------------------------------------

    async def get_audit_anchor(self) -> AuditAnchor | None:
        row = await self._fetchrow(sql.GET_AUDIT_ANCHOR)
        return AuditAnchor(seq=row["seq"], hash=row["hash"]) if row else None

    async def set_audit_anchor(self, anchor: AuditAnchor, *, previous: AuditAnchor | None) -> None:
        await self._run(lambda con, _: _move_anchor(con, anchor, previous))

    async def lock_audit(self) -> Callable[[], Awaitable[None]]:
        """A transaction of its own holding the audit log's advisory lock until released:
        deciders on every checkout sharing this database take turns. It writes nothing; if
        its connection is lost, the lock goes with it (the anchor's compare-and-set still
        stops a second writer). As in `_run`, a lost connection is retried on a fresh one."""
        for attempt in range(RETRIES + 1):
            con = None
            try:
                con = await self._pool.acquire()
                held = con.transaction()
                await held.start()
                await con.execute(sql.LOCK_AUDIT_TIMEOUT)
                await con.execute(sql.LOCK_AUDIT)
                return functools.partial(self._unlock_audit, con, held)
            except BaseException as exc:
                if con is not None:
                    self._pool.release(con)  # still in its transaction: the pool closes it
                if isinstance(exc, asyncpg.exceptions.LockNotAvailableError):
                    raise AuditError(
                        "another T25 process has held the audit log's lock on this store for 120 s",
                        hint="try again when its decision is done",
                    ) from None
                if not (isinstance(exc, Exception) and schema.is_connection_lost(exc)):
                    raise
                if attempt == RETRIES:
                    raise schema.unreachable(self.url, exc) from exc
            await asyncio.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable")

    async def _unlock_audit(self, con: asyncpg.Connection, held: Any) -> None:
        try:
            await held.rollback()
        except Exception as exc:
            if not schema.is_connection_lost(exc):
                raise
        finally:
            self._pool.release(con)


# -- rows to domain objects -------------------------------------------------------------------


def _cas_statement(
    tid: str,
    expected: TaskState,
    values: dict[str, Any],
    event: Event,
    to_state: TaskState | None,
) -> tuple[str, list[Any]]:
    """The compare-and-set UPDATE of a task with its event, and its arguments."""
    values = {
        k: (bool(v) if k in _BOOLEAN_FIELDS and v is not None else v) for k, v in values.items()
    }
    statement = sql.update_task(list(values), with_state=to_state is not None)
    run = parse_id("R", event.run_id) if event.run_id is not None else None
    args: list[Any] = [
        parse_id("T", tid),
        TaskState(expected).value,
        _aware(event.at),
        event.kind,
        run,
        _payload(event),
    ]
    if to_state is not None:
        args.append(TaskState(to_state).value)
    return statement, args + list(values.values())


async def _cas_refusal(con: asyncpg.Connection, tid: str, expected: TaskState) -> Exception:
    """Why a task's compare-and-set changed nothing: no such task, or it moved."""
    now = await con.fetchrow(sql.GET_TASK_STATE, parse_id("T", tid))
    if now is None:
        return checks.task_not_found(tid)
    return checks.stale_task(tid, now["state"], expected)


async def _move_anchor(
    con: asyncpg.Connection, anchor: AuditAnchor, previous: AuditAnchor | None
) -> None:
    """The audit anchor's compare-and-set; a move to where it already is succeeds (a retry
    after a lost reply)."""
    if previous is None:
        moved = await con.fetchrow(sql.INSERT_AUDIT_ANCHOR, anchor.seq, anchor.hash)
    else:
        moved = await con.fetchrow(
            sql.MOVE_AUDIT_ANCHOR, anchor.seq, anchor.hash, previous.seq, previous.hash
        )
    if moved is not None:
        return
    row = await con.fetchrow(sql.GET_AUDIT_ANCHOR)
    now = AuditAnchor(seq=row["seq"], hash=row["hash"]) if row else None
    if now == anchor:
        return  # already there: the first try committed, its reply was lost
    held = f"seq {now.seq}" if now else "none"
    expected = f"seq {previous.seq}" if previous else "none"
    raise StaleState(
        f"the audit anchor is at {held}, not {expected}",
        hint="another process appended to the audit log; re-read it and retry",
    )


async def _sha256(content: bytes) -> str:
    if len(content) <= _HASH_INLINE_MAX:
        return hashlib.sha256(content).hexdigest()
    return await asyncio.to_thread(lambda: hashlib.sha256(content).hexdigest())


def _aware(at: datetime) -> datetime:
    """A naive time is taken as UTC, never as local time."""
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def _payload(event: Event) -> str:
    """`event.payload()` as JSON text, serialised by pydantic in one step (a third of the cost).

    jsonb cannot hold U+0000, which agent output may carry: it is kept as U+FFFD."""
    return _NUL_ESCAPE.sub(r"\1\\ufffd", event.model_dump_json(exclude=Event._envelope))


# `\u0000` in JSON text, where its backslash is not itself escaped (`\\u0000` is text).
_NUL_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def _id(prefix: str, number: int | None) -> str | None:
    return None if number is None else format_id(prefix, number)


def _event(r: Row) -> Event:
    return Event.restore(
        r["kind"],
        json.loads(r["payload"]),
        id=r["id"],
        at=r["at"],
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
        archived=r["archived"],
        merged=r["merged"],
        qa_loops=r["qa_loops"],
        review_loops=r["review_loops"],
        error=r["error"],
        approved_plan_sha=r["approved_plan_sha"],
        checks_passed=r["checks_passed"],
        review_verdict=r["review_verdict"],
        created_at=r["created_at"],
        state_since=r["state_since"],
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
        lease_expires_at=r["lease_expires_at"],
        adapter=r["adapter"],
        adapter_reason=r["adapter_reason"],
        cli_version=r["cli_version"],
        model=r["model"],
        exit_code=r["exit_code"],
        error=r["error"],
        usage=usage,
        cost_usd=r["cost_usd"],
        enqueued_at=r["enqueued_at"],
        started_at=r["started_at"],
        finished_at=r["finished_at"],
    )


def _runs(rows: list[Row]) -> list[Run]:
    return sorted((_run(r) for r in rows), key=lambda run: parse_id("R", run.id))


def _lease(r: Row) -> Lease:
    return Lease(
        run_id=format_id("R", r["id"]),
        task_id=format_id("T", r["task_id"]),
        token=r["lease_token"],
        worker=r["worker"],
        expires_at=r["lease_expires_at"],
    )


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
        created_at=r["created_at"],
    )
