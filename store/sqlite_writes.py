"""The SQLite store's writes inside a transaction its caller holds (store.sqlite).

Each is a few statements on the connection of one `BEGIN IMMEDIATE` transaction: a task's
compare-and-set with its event, a run queued, finished or handed back under its lease, an
artifact with its content, an event, the audit anchor moved. A write of the store is one of
these, or several in the same transaction (store.sqlite_moves).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import aiosqlite

from core.domain.events import ArtifactStored, Event, RunFinished, RunQueued
from core.domain.models import (
    ArtifactMeta,
    AuditAnchor,
    Lease,
    NewRun,
    Run,
    RunOutcome,
    Task,
    TaskState,
    format_id,
    parse_id,
)
from store import _checks as checks
from store import _chunks as chunks
from store import rows
from store import sqlite_sql as sql

ROWS = rows.RowReader(time=rows.from_epoch)

Row = sqlite3.Row
Params = Sequence[Any] | Mapping[str, Any]
# What stores an artifact's content inside a transaction (nothing when it is stored already).
Blob = Callable[[aiosqlite.Connection], Awaitable[None]]


async def fetch_all(db: aiosqlite.Connection, statement: str, params: Params = ()) -> list[Row]:
    """Every row `statement` returns."""
    return list(await db.execute_fetchall(statement, params))


async def cas_in(
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
    number = parse_id("T", tid)
    params = {**values, **(state or {}), "id": number, "expected": TaskState(expected).value}
    changed = await fetch_all(db, statement, params)
    if not changed:
        now = await fetch_all(db, sql.GET_TASK_STATE, (number,))
        if not now:
            raise checks.task_not_found(tid)
        raise checks.stale_task(tid, now[0]["state"], expected)
    return ROWS.task(changed[0]), await insert_event(db, event)


async def insert_run(db: aiosqlite.Connection, new: NewRun) -> tuple[Run, Event]:
    """A queued run and its RunQueued event, inside the caller's transaction; or, when the
    stage has its queued or running run already (0007's index), that run with the event
    that queued it: never a second."""
    number = parse_id("T", new.task_id)
    params = {
        "task_id": number,
        "stage": TaskState(new.stage).value,
        "role": new.role,
        "max_attempts": new.max_attempts,
        "while_in_stage": new.while_in_stage,
    }
    active = await fetch_all(db, sql.ACTIVE_RUN, params)
    if active:
        run = ROWS.run(active[0])
        found = RunQueued(
            id=active[0]["event_id"],
            at=run.enqueued_at,
            task_id=run.task_id,
            run_id=run.id,
            stage=run.stage,
            role=run.role,
        )
        return run, found
    inserted = await fetch_all(db, sql.INSERT_RUN, params)
    if not inserted:
        now = await fetch_all(db, sql.GET_TASK_STATE, (number,))
        if not now:
            raise checks.task_not_found(format_id("T", number))
        raise checks.stale_task(format_id("T", number), now[0]["state"], new.stage)
    run = ROWS.run(inserted[0])
    queued = RunQueued(
        at=run.enqueued_at, task_id=run.task_id, run_id=run.id, stage=run.stage, role=run.role
    )
    return run, await insert_event(db, queued)


async def complete_in(
    db: aiosqlite.Connection, lease: Lease, outcome: RunOutcome
) -> tuple[Run, Event]:
    """A run finished under its lease, with its RunFinished event, inside the caller's
    transaction; LeaseLost if the lease no longer holds."""
    checks.finished_outcome(outcome)
    usage = outcome.usage
    params = {
        **lease_params(lease),
        **outcome.model_dump(exclude={"usage", "requests"}),
        "requests": rows.requests_text(outcome.requests),
        "status": outcome.status.value,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "usage_model": usage.model,
    }
    row = await under_lease(db, sql.COMPLETE_RUN, params, lease)
    run = ROWS.run(row)
    finished = RunFinished(
        at=ROWS.time(row["finished_at"]),
        task_id=run.task_id,
        run_id=run.id,
        status=run.status,
        exit_code=run.exit_code,
        error=run.error,
        usage=run.usage,
        cost_usd=run.cost_usd,
    )
    return run, await insert_event(db, finished)


async def under_lease(
    db: aiosqlite.Connection, statement: str, params: dict[str, Any], lease: Lease
) -> Row:
    """Run a statement guarded by the lease; LeaseLost (nothing written) if it no longer holds."""
    done = await fetch_all(db, statement, params)
    if done:
        return done[0]
    current = await fetch_all(db, sql.GET_RUN_WITH_CLOCK, (params["id"],))
    if not current:
        raise checks.run_not_found(lease.run_id)
    r = current[0]
    ago = r["now"] - r["lease_expires_at"] if r["lease_expires_at"] is not None else None
    raise checks.lease_lost(
        lease, status=r["status"], token=r["lease_token"], worker=r["worker"], expired_ago_s=ago
    )


def lease_params(lease: Lease) -> dict[str, Any]:
    return {"id": parse_id("R", lease.run_id), "token": lease.token, "worker": lease.worker}


# -- artifacts ----------------------------------------------------------------------------


async def blob_of(content: bytes | Path) -> tuple[str, int, Blob]:
    """Content's SHA-256 and size, read before any transaction (chunks.prepared), and what
    stores it inside one: whole, or a file over one chunk in chunks."""
    sha, size, inline = await chunks.prepared(content)

    async def blob(db: aiosqlite.Connection) -> None:
        if inline is not None:
            await db.execute_fetchall(sql.INSERT_BLOB, (sha, inline, size))
        elif await fetch_all(db, sql.INSERT_CHUNKED_BLOB, (sha, size, chunks.chunk_count(size))):
            assert isinstance(content, Path)  # only a file's content is stored in chunks
            n = 0
            async for chunk in chunks.file_chunks(content, sha):
                await db.execute_fetchall(sql.INSERT_BLOB_CHUNK, (sha, n, chunk))
                n += 1

    return sha, size, blob


async def put_in(db: aiosqlite.Connection, sha: str, meta: ArtifactMeta, blob: Blob) -> Row:
    """The artifact row of content `sha` with its provenance, after `blob` stored the
    content (unless stored already), inside the caller's transaction."""
    task = rows.number_or_none("T", meta.task_id)
    run = rows.number_or_none("R", meta.run_id)
    params = {**meta.model_dump(mode="json"), "sha256": sha, "task_id": task, "run_id": run}
    await blob(db)
    try:
        (row,) = await fetch_all(db, sql.INSERT_ARTIFACT, params)
    except sqlite3.IntegrityError:  # its task or run is not in the store: which one
        if task is not None and not await fetch_all(db, sql.TASK_EXISTS, (task,)):
            raise checks.task_not_found(format_id("T", task)) from None
        if run is not None and not await fetch_all(db, sql.RUN_EXISTS, (run,)):
            raise checks.run_not_found(format_id("R", run)) from None
        raise
    return row


async def kept_in(
    db: aiosqlite.Connection, kept: Sequence[tuple[ArtifactMeta, str, int, Blob]]
) -> list[Event]:
    """Each artifact (its provenance, and its content's hash, size and blob: `blob_of`)
    with its ArtifactStored event, inside the caller's transaction."""
    events: list[Event] = []
    for meta, sha, size, blob in kept:
        artifact = ROWS.artifact(await put_in(db, sha, meta, blob), size=size)
        events.append(await insert_event(db, ArtifactStored.of(artifact)))
    return events


# -- events and the audit anchor -------------------------------------------------------------


async def move_anchor(
    db: aiosqlite.Connection, anchor: AuditAnchor, previous: AuditAnchor | None
) -> None:
    """The audit anchor's compare-and-set, inside the caller's transaction."""
    if previous is None:
        moved = await fetch_all(db, sql.INSERT_AUDIT_ANCHOR, (anchor.seq, anchor.hash))
    else:
        moved = await fetch_all(
            db, sql.MOVE_AUDIT_ANCHOR, (anchor.seq, anchor.hash, previous.seq, previous.hash)
        )
    if moved:
        return
    found = await fetch_all(db, sql.GET_AUDIT_ANCHOR)
    now = rows.anchor(found[0]) if found else None
    if now == anchor:
        return  # already there
    raise checks.stale_anchor(now, previous)


def ts(at: datetime) -> float:
    """A time as SQLite keeps it: seconds since the epoch (a naive time is UTC)."""
    return rows.as_utc(at).timestamp()


async def insert_event(db: aiosqlite.Connection, event: Event) -> Event:
    task = rows.number_or_none("T", event.task_id)
    run = rows.number_or_none("R", event.run_id)
    payload = json.dumps(event.payload(), separators=(",", ":"))
    args = (ts(event.at), event.kind, task, run, payload, event.sent)
    found = await fetch_all(db, sql.INSERT_EVENT, args)
    if not found:  # a worker's event sent again: the one kept the first time
        found = await fetch_all(db, sql.SENT_EVENT, (run, event.sent))
    ((new_id,),) = found
    return event.model_copy(
        update={
            "id": new_id,
            "task_id": rows.id_or_none("T", task),
            "run_id": rows.id_or_none("R", run),
        }
    )
