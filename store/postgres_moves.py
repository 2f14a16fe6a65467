"""The Postgres store's writes of a run's completion and of code's decision on it, each
several statements in one transaction (core.ports.store: `complete_run_keeping`,
`move_task`). Content is hashed, and a file read for its digest, before the transaction.

Retried whole on a lost connection; a first try that committed before its reply was lost
is found, not written again: the completion by its RunFinished under the same lease, the
move by its change's event. What came with it is then read back (each artifact by its
content and provenance, each event by its time, kind and payload), never written twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from asyncpg import Record

from core.domain.events import Event, RunQueued, TaskTransitioned
from core.domain.models import Lease, Run, RunOutcome, Task, TaskState, format_id, parse_id
from core.ports.store import NewArtifact, TaskMove
from store import _checks as checks
from store import postgres_sql as sql
from store import postgres_writes as w
from store import rows

if TYPE_CHECKING:
    from store.postgres_events import EventSignal

T = TypeVar("T")


class PostgresMoves:
    """`complete_run_keeping` and `move_task`, for `store.postgres.PostgresStore`."""

    if TYPE_CHECKING:
        _signal: EventSignal

        async def _run(self, op: Callable[[w.Connection, bool], Awaitable[T]]) -> T: ...

    async def complete_run_keeping(
        self, lease: Lease, outcome: RunOutcome, kept: Sequence[NewArtifact]
    ) -> tuple[Run, list[Event]]:
        finished, args = w.completion(outcome)
        blobs = await _blobs(kept)
        number = parse_id("R", lease.run_id)

        async def complete(con: w.Connection, retried: bool) -> tuple[Record, list[Event]]:
            async with con.transaction():
                row = await con.fetchrow(sql.COMPLETE_RUN, number, lease.token, lease.worker, *args)
                if row is None:  # LeaseLost, or a first try that committed it all
                    return await w.lease_refused(con, lease, retried=retried), (
                        await w.kept_before(con, blobs)
                    )
                return row, await w.kept_in(con, blobs)

        row, stored = await self._run(complete)
        self._signal.written()
        run = ROWS.run(row)
        return run, [w.about_run(finished, row, run, run.finished_at), *stored]

    async def move_task(self, move: TaskMove) -> tuple[Task, list[Event]]:
        tid = format_id("T", parse_id("T", move.task_id))
        number = parse_id("T", tid)
        to_state = None
        if isinstance(move.change, TaskTransitioned):
            to_state = checks.transition_event(tid, move.expected, move.change).to_state
            if move.enqueue is not None:
                checks.run_of_stage(tid, to_state, move.enqueue)
        change = checks.event_for_task(tid, move.change)
        values = checks.task_fields(dict(move.fields))
        statement, args = w.cas_statement(tid, move.expected, values, change, to_state)
        then = [checks.event_for_task(tid, e) for e in move.then]
        new = move.enqueue
        queued = RunQueued(stage=new.stage, role=new.role) if new is not None else None
        blobs = await _blobs(move.kept)

        async def write(
            con: w.Connection, retried: bool
        ) -> tuple[Record, list[Event], Record | None, list[Event]]:
            async with con.transaction():
                if retried and (row := await w.committed(con, number, change)) is not None:
                    kept = await w.kept_before(con, blobs)
                    run_row = None
                    if new is not None:
                        stage = TaskState(new.stage).value
                        run_row = await con.fetchrow(
                            sql.RUN_QUEUED_AFTER, number, row["event_id"], stage
                        )
                    return row, kept, run_row, [await w.found(con, e) for e in then]
                kept = await w.kept_in(con, blobs)
                row = await con.fetchrow(statement, *args)
                if row is None:
                    raise await w.cas_refusal(con, tid, move.expected)
                run_row = None
                if new is not None and queued is not None:
                    run_row = await w.enqueue(con, number, new, queued)
                return row, kept, run_row, [await w.inserted(con, e) for e in then]

        row, events, run_row, after = await self._run(write)
        self._signal.written()
        events.append(
            change.model_copy(update={"id": row["event_id"], "at": rows.as_utc(change.at)})
        )
        if run_row is not None and queued is not None:
            run = ROWS.run(run_row)
            events.append(w.about_run(queued, run_row, run, run.enqueued_at))
        return ROWS.task(row), [*events, *after]


ROWS = w.ROWS


async def _blobs(kept: Sequence[NewArtifact]) -> list[w.Kept]:
    """Each artifact's provenance, with its content's size and blob (w.blob_of)."""
    found: list[w.Kept] = []
    for k in kept:
        sha, size, blob = await w.blob_of(k.content)
        found.append((w.provenance(sha, k.meta), size, blob))
    return found
