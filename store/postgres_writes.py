"""The Postgres store's statements inside a connection its caller holds (store.postgres).

A task's compare-and-set with its event, a run queued or finished under its lease, an
artifact with its content, the audit anchor and chain moved: each alone, one transaction,
or several in one (store.postgres_moves). Where a write is retried after its connection
died, what its first try committed is found, not written again.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeAlias

import asyncpg
from asyncpg import Record

from core.domain.audit import ChainLine
from core.domain.events import ArtifactStored, DecisionRecorded, Event, RunFinished, RunOutput
from core.domain.models import (
    ArtifactMeta,
    AuditAnchor,
    Lease,
    NewRun,
    Run,
    RunOutcome,
    TaskState,
    format_id,
    parse_id,
)
from core.domain.network import NETWORK_STREAM
from core.errors import AuditError, StoreUnavailable
from store import _checks as checks
from store import _chunks as chunks
from store import postgres_sql as sql
from store import rows

Connection: TypeAlias = "asyncpg.Connection[Record]"  # the stubs' generic, not asyncpg's
# What stores an artifact's content on a connection (nothing when it is stored already).
Blob: TypeAlias = "Callable[[Connection], Awaitable[None]]"
ROWS = rows.RowReader(time=rows.as_utc)  # timestamptz: aware datetimes already
_BOOLEAN_FIELDS = frozenset({"archived", "merged", "checks_passed"})


# -- runs under their lease -----------------------------------------------------------------


def completion(outcome: RunOutcome) -> tuple[RunFinished, tuple[Any, ...]]:
    """A run's RunFinished, and the arguments of COMPLETE_RUN after the lease's."""
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
        payload(event),
        rows.requests_text(outcome.requests),
        outcome.session_id,
        outcome.resumed_session,
    )
    return event, args


async def under_lease(
    con: Connection, statement: str, lease: Lease, args: tuple[Any, ...], *, retried: bool
) -> Record:
    """A statement guarded by the lease: its row, or `lease_refused`'s."""
    number = parse_id("R", lease.run_id)
    row = await con.fetchrow(statement, number, lease.token, lease.worker, *args)
    return row if row is not None else await lease_refused(con, lease, retried=retried)


async def lease_refused(con: Connection, lease: Lease, *, retried: bool) -> Record:
    """A statement under `lease` changed nothing: LeaseLost; but `retried`, the run finished
    under this very lease, by a first try that committed before its reply was lost."""
    number = parse_id("R", lease.run_id)
    if retried:  # our first try may have committed before the connection died
        done = await con.fetchrow(sql.FINISHED_UNDER_TOKEN, number, lease.token, lease.worker)
        if done is not None:
            return done
    current = await con.fetchrow(sql.GET_RUN_WITH_CLOCK, number)
    if current is None:
        raise checks.run_not_found(lease.run_id)
    raise checks.lease_lost(
        lease,
        status=current["status"],
        token=current["lease_token"],
        worker=current["worker"],
        expired_ago_s=current["expired_ago"],
    )


# -- artifacts ----------------------------------------------------------------------------


async def blob_of(content: bytes | Path) -> tuple[str, int, Blob]:
    """Content's SHA-256 and size, read before any transaction (chunks.prepared), and what
    stores it inside one: whole, or a file over one chunk in chunks."""
    sha, size, inline = await chunks.prepared(content)

    async def blob(con: Connection) -> None:
        if inline is not None:
            await con.execute(sql.INSERT_BLOB, sha, inline, size)
        elif await con.fetchrow(sql.INSERT_CHUNKED_BLOB, sha, size, chunks.chunk_count(size)):
            assert isinstance(content, Path)  # only a file's content is stored in chunks
            n = 0
            async for chunk in chunks.file_chunks(content, sha):
                await con.execute(sql.INSERT_BLOB_CHUNK, sha, n, chunk)
                n += 1

    return sha, size, blob


def provenance(sha: str, meta: ArtifactMeta) -> tuple[Any, ...]:
    """The arguments of INSERT_ARTIFACT (and SAME_ARTIFACT): content and provenance."""
    return (
        sha,
        meta.kind.value,
        meta.media_type,
        rows.number_or_none("T", meta.task_id),
        rows.number_or_none("R", meta.run_id),
        meta.role,
        meta.adapter,
        meta.cli_version,
        meta.model,
    )


async def put_in(con: Connection, where: tuple[Any, ...], blob: Blob) -> Record:
    """The artifact row with its provenance, after `blob` stored the content (unless
    stored already), inside the caller's transaction."""
    task, run = where[3], where[4]
    if task is not None and await con.fetchrow(sql.TASK_EXISTS, task) is None:
        raise checks.task_not_found(format_id("T", task))
    if run is not None and await con.fetchrow(sql.RUN_EXISTS, run) is None:
        raise checks.run_not_found(format_id("R", run))
    await blob(con)
    return returned(await con.fetchrow(sql.INSERT_ARTIFACT, *where))


Kept: TypeAlias = "tuple[tuple[Any, ...], int, Blob]"  # provenance, size, blob


async def kept_in(con: Connection, kept: list[Kept]) -> list[Event]:
    """Each artifact with its ArtifactStored event, inside the caller's transaction."""
    events: list[Event] = []
    for where, size, blob in kept:
        event = ArtifactStored.of(ROWS.artifact(await put_in(con, where, blob), size=size))
        events.append(await inserted(con, event))
    return events


async def kept_before(con: Connection, kept: list[Kept]) -> list[Event]:
    """The ArtifactStored events `kept_in` wrote for `kept`, found after a first try
    committed before its reply was lost."""
    events: list[Event] = []
    for where, size, _ in kept:
        event = ArtifactStored.of(
            ROWS.artifact(returned(await con.fetchrow(sql.SAME_ARTIFACT, *where)), size=size)
        )
        events.append(await found(con, event))
    return events


# -- events -------------------------------------------------------------------------------


async def events_after(
    con: Connection,
    after_id: int,
    task: int | None,
    limit: int,
    kind: str | None,
    stream: str | None = None,
) -> list[Record]:
    """The events after `after_id` (one task's, of one kind, of one output stream), none past
    the settled horizon: an event whose id is taken but not committed yet holds back the ones
    after it."""
    if task is None and kind is None:
        found = await con.fetch(sql.EVENTS_FROM, after_id, limit)
        settled = next((i for i, r in enumerate(found) if r["id"] != after_id + 1 + i), len(found))
        if settled or not found:
            return found[:settled]
    horizon = await con.fetchval(sql.EVENT_HORIZON, after_id, task)
    if horizon is None:  # nothing past the cursor yet
        return []
    if kind == RunOutput.kind and stream == NETWORK_STREAM and task is not None:
        return await con.fetch(sql.TASK_NETWORK_AFTER, after_id, horizon, limit, task)
    if kind is not None and task is not None:
        return await con.fetch(
            sql.TASK_KIND_EVENTS_AFTER, after_id, horizon, limit, task, kind, stream
        )
    if kind is not None:
        of_kind = sql.DECISIONS_AFTER if kind == DecisionRecorded.kind else sql.KIND_EVENTS_AFTER
        return await con.fetch(of_kind, after_id, horizon, limit, task, kind)
    if task is None:
        return await con.fetch(sql.EVENTS_AFTER, after_id, horizon, limit)
    return await con.fetch(sql.TASK_EVENTS_AFTER, after_id, horizon, limit, task)


def _event_args(event: Event) -> tuple[Any, ...]:
    """The arguments of INSERT_EVENT (and SAME_EVENT)."""
    task = rows.number_or_none("T", event.task_id)
    run = rows.number_or_none("R", event.run_id)
    return (rows.as_utc(event.at), event.kind, task, run, payload(event))


async def inserted(con: Connection, event: Event) -> Event:
    """`event` written inside the caller's transaction, with its id."""
    new_id = await con.fetchval(sql.INSERT_EVENT, *_event_args(event))
    return event.model_copy(update={"id": int(new_id), "at": rows.as_utc(event.at)})


async def found(con: Connection, event: Event) -> Event:
    """`event` as a first try that committed wrote it, with its id."""
    got = await con.fetchval(sql.SAME_EVENT, *_event_args(event))
    if got is None:
        raise AssertionError(f"a committed write's {event.kind} event is not in the store")
    return event.model_copy(update={"id": int(got), "at": rows.as_utc(event.at)})


# -- tasks, runs, the audit chain -------------------------------------------------------------


def cas_statement(
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
    run = rows.number_or_none("R", event.run_id)
    args: list[Any] = [
        parse_id("T", tid),
        TaskState(expected).value,
        rows.as_utc(event.at),
        event.kind,
        run,
        payload(event),
    ]
    if to_state is not None:
        args.append(TaskState(to_state).value)
    return statement, args + list(values.values())


async def changed(
    con: Connection,
    statement: str,
    args: list[Any],
    tid: str,
    expected: TaskState,
    event: Event,
    retried: bool,
) -> Record:
    """A task's compare-and-set with its event (`statement`): the task's row with the
    event's id. On a retry, a first try that committed before its reply was lost is found
    (its event is there) and returned, not refused as stale."""
    row = await con.fetchrow(statement, *args)
    if row is None and retried:
        row = await committed(con, parse_id("T", tid), event)
    if row is None:
        raise await cas_refusal(con, tid, expected)
    return row


async def committed(con: Connection, number: int, event: Event) -> Record | None:
    """The task with the id of `event`, if a write of it already committed; else None."""
    found = await con.fetchval(
        sql.SAME_EVENT,
        rows.as_utc(event.at),
        event.kind,
        number,
        rows.number_or_none("R", event.run_id),
        payload(event),
    )
    return None if found is None else await con.fetchrow(sql.TASK_WITH_EVENT, number, found)


async def enqueue(con: Connection, number: int, new: NewRun, queued: Event) -> Record | None:
    """Queue the run of a task's stage, with its RunQueued event; or, when the stage has
    its queued or running run already (0007's index), that run, with the event that
    queued it: never a second. None: there is no such task. Tried a few times, since the
    run found in the way may finish between the two statements."""
    stage = TaskState(new.stage).value
    about = payload(queued)
    for _ in range(3):
        row = await con.fetchrow(
            sql.ENQUEUE_RUN, number, stage, new.role, new.max_attempts, about, new.while_in_stage
        )
        if row is not None:
            return row
        if (active := await con.fetchrow(sql.ACTIVE_RUN, number, stage)) is not None:
            return active
        now = await con.fetchrow(sql.GET_TASK_STATE, number)
        if now is None:
            return None
        if new.while_in_stage and now["state"] != stage:
            raise checks.stale_task(format_id("T", number), now["state"], new.stage)
    raise StoreUnavailable(
        f"could not queue the {stage} run of {format_id('T', number)}: its runs kept changing",
        hint="try again",
    )


async def cas_refusal(con: Connection, tid: str, expected: TaskState) -> Exception:
    """Why a task's compare-and-set changed nothing: no such task, or it moved."""
    now = await con.fetchrow(sql.GET_TASK_STATE, parse_id("T", tid))
    if now is None:
        return checks.task_not_found(tid)
    return checks.stale_task(tid, now["state"], expected)


async def move_anchor(con: Connection, anchor: AuditAnchor, previous: AuditAnchor | None) -> bool:
    """The audit anchor's compare-and-set: True if it moved now, False if it was already
    there (a retry after a lost reply: the first try committed)."""
    if previous is None:
        moved = await con.fetchrow(sql.INSERT_AUDIT_ANCHOR, anchor.seq, anchor.hash)
    else:
        moved = await con.fetchrow(
            sql.MOVE_AUDIT_ANCHOR, anchor.seq, anchor.hash, previous.seq, previous.hash
        )
    if moved is not None:
        return True
    row = await con.fetchrow(sql.GET_AUDIT_ANCHOR)
    now = rows.anchor(row) if row else None
    if now == anchor:
        return False
    raise checks.stale_anchor(now, previous)


async def extend_chain(
    con: Connection,
    anchor: AuditAnchor,
    previous: AuditAnchor | None,
    lines: tuple[ChainLine, ...] | list[ChainLine],
) -> None:
    """Move the anchor (compare-and-set) and insert the lines it now ends, inside the
    caller's transaction. The anchor goes first: a retry whose first try committed finds
    it in place and inserts nothing again. A line whose place is taken means the chain
    runs past its anchor, which T25 never writes: AuditError."""
    if not await move_anchor(con, anchor, previous) or not lines:
        return
    try:
        await con.execute(
            sql.INSERT_AUDIT_LINES,
            [line.seq for line in lines],
            [line.text for line in lines],
            [line.hash for line in lines],
            [line.task for line in lines],
            [rows.as_utc(line.at) for line in lines],
        )
    except asyncpg.UniqueViolationError:
        raise AuditError(
            f"the store's audit chain already holds line {lines[0].seq}, past its anchor "
            f"at line {previous.seq if previous else 0}; refusing to extend it",
            hint="run `t25 audit verify` to see what is wrong",
        ) from None


def payload(event: Event) -> str:
    """`event.payload()` as JSON text, serialised by pydantic in one step (a third of the cost).

    jsonb cannot hold U+0000, which agent output may carry: it is kept as U+FFFD (the
    expression is tried only on text that has one: a run's completion is on the lease path)."""
    text = event.model_dump_json(exclude=Event._envelope)
    return _NUL_ESCAPE.sub(r"\1\\ufffd", text) if "\\u0000" in text else text


# `\u0000` in JSON text, where its backslash is not itself escaped (`\\u0000` is text).
_NUL_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def about_run(event: Event, row: Record, run: Run, at: datetime | None) -> Event:
    """`event` as the statement that changed `run` wrote it: its id (`event_id`), its time,
    the run's task and the run."""
    return event.model_copy(
        update={"id": row["event_id"], "at": at, "task_id": run.task_id, "run_id": run.id}
    )


def returned(row: Record | None) -> Record:
    """The row of a statement that always returns one (an INSERT ... RETURNING)."""
    if row is None:
        raise AssertionError("a statement that returns its row returned none")
    return row
