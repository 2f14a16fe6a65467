"""The SQLite store's writes of a run's completion and of code's decision on it, each several
writes in one `BEGIN IMMEDIATE` transaction (core.ports.store: `complete_run_keeping`,
`move_task`): the run finished with its artifacts, or the artifacts a decision kept, the
task's move and the run it queues. Content is hashed, and a file read for its digest,
before the transaction begins.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

import aiosqlite

from core.domain.events import Event, TaskTransitioned
from core.domain.models import ArtifactMeta, Lease, Run, RunOutcome, Task, format_id, parse_id
from core.ports.store import NewArtifact, TaskMove
from store import _checks as checks
from store import sqlite_writes as w


class SqliteMoves:
    """`complete_run_keeping` and `move_task`, for `store.sqlite.SqliteStore`."""

    if TYPE_CHECKING:

        def _write(self) -> AbstractAsyncContextManager[aiosqlite.Connection]: ...

    async def complete_run_keeping(
        self, lease: Lease, outcome: RunOutcome, kept: Sequence[NewArtifact]
    ) -> tuple[Run, list[Event]]:
        blobs = await _blobs(kept)
        async with self._write() as db:
            run, finished = await w.complete_in(db, lease, outcome)
            return run, [finished, *await w.kept_in(db, blobs)]

    async def move_task(self, move: TaskMove) -> tuple[Task, list[Event]]:
        tid = format_id("T", parse_id("T", move.task_id))
        state = None
        if isinstance(move.change, TaskTransitioned):
            change = checks.transition_event(tid, move.expected, move.change)
            state = {"state": change.to_state.value, "state_since": w.ts(change.at)}
            if move.enqueue is not None:
                checks.run_of_stage(tid, change.to_state, move.enqueue)
        values = checks.task_fields(dict(move.fields))
        then = [checks.event_for_task(tid, e) for e in move.then]
        blobs = await _blobs(move.kept)
        async with self._write() as db:
            events = await w.kept_in(db, blobs)
            task, changed = await w.cas_in(db, tid, move.expected, values, move.change, state)
            events.append(changed)
            if move.enqueue is not None:
                events.append((await w.insert_run(db, move.enqueue))[1])
            for event in then:
                events.append(await w.insert_event(db, event))
        return task, events


async def _blobs(kept: Sequence[NewArtifact]) -> list[tuple[ArtifactMeta, str, int, w.Blob]]:
    """Each artifact's provenance, with its content's hash, size and blob (w.blob_of)."""
    return [(k.meta, *await w.blob_of(k.content)) for k in kept]
