"""Reads of a local SQLite store with the standard library alone: open tasks' ids and the
rows of `t25 task list`.

The shell completion asks for ids on every TAB, and `t25 task list` is what an operator types
most; loading the schema, pydantic and the async store to answer would take most of a second.
These read the tables the SQLite store writes (store/migrations/sqlite), read-only, and give
up (None) on anything they do not recognise, so the caller takes the full path instead."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple


class TaskRow(NamedTuple):
    """What `t25 task list` shows of a task."""

    id: str
    state: str
    type: str
    title: str
    archived: bool
    priority: int
    after: tuple[str, ...]
    state_since: datetime
    merged: bool = False


def open_task_ids(db: Path) -> list[str] | None:
    """`T-<id>` of every task that is not archived, oldest first; None when `db` is not a
    T25 store this can read."""
    rows = _read(db, "SELECT id FROM tasks WHERE archived = 0 ORDER BY id", ())
    return None if rows is None else [f"T-{number}" for (number,) in rows]


# A finished task, by state, and one that is not (core.control.task_lists, which a test
# holds these to): `t25 task list` counts the finished rather than listing them, unless
# asked. Each is ranges of the index on (state, merged, archived, id) (migration 0018), so
# neither reads the table's rows.
FINISHED_BY_STATE = {"CANCELLED": "state = 'CANCELLED'", "DONE": "state = 'DONE' AND merged = 1"}
FINISHED = " OR ".join(f"({where})" for where in FINISHED_BY_STATE.values())
UNFINISHED = (
    "(state IN ('RECEIVED', 'SPEC', 'PLAN', 'AWAITING_APPROVAL', 'IMPLEMENTING', 'QA', 'REVIEW',"
    " 'PR_OPEN', 'DOCS', 'NEEDS_INPUT', 'FAILED') OR (state = 'DONE' AND merged = 0))"
)


class TaskPage(NamedTuple):
    """What `t25 task list` shows: a page of tasks, and how many finished ones it left out."""

    rows: list[TaskRow]
    finished: dict[str, int]  # by state; empty when the list was asked for every state


def task_rows(
    db: Path,
    *,
    states: Sequence[str] | None,
    include_archived: bool,
    after: int | None = None,
    limit: int | None = None,
) -> TaskPage | None:
    """The tasks `t25 task list` shows, oldest first: those of `states`, or every task with
    `include_archived` (`--all`), or else the unfinished ones that are not archived, with a
    count of the finished ones by state; None when this cannot read them."""
    where: list[str] = ["1"]
    params: list[Any] = list(states or ())
    if states:
        where.append(f"state IN ({', '.join('?' * len(states))})")
    elif not include_archived:
        where.append(UNFINISHED)
    if not include_archived:
        where.append("archived = 0")
    if after is not None:
        where.append("id > ?")
        params.append(after)
    rows = _read(
        db,
        "SELECT id, state, type, title, archived, priority, after_tasks, state_since, merged "
        f"FROM tasks WHERE {' AND '.join(where)} ORDER BY id LIMIT ?",
        [*params, -1 if limit is None else limit],
    )
    finished: dict[str, int] = {}
    if not states and not include_archived:
        for state, condition in FINISHED_BY_STATE.items():  # a count apiece: each one range
            count = _read(db, f"SELECT COUNT(*) FROM tasks WHERE {condition} AND archived = 0", ())
            if count is None:
                return None
            if count[0][0]:
                finished[state] = count[0][0]
    if rows is None:
        return None
    return TaskPage(
        [
            TaskRow(
                f"T-{number}",
                state,
                kind,
                title,
                bool(archived),
                priority,
                tuple(json.loads(waits)) if waits else (),
                datetime.fromtimestamp(since, UTC),
                bool(merged),
            )
            for number, state, kind, title, archived, priority, waits, since, merged in rows
        ],
        finished,
    )


def _read(db: Path, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]] | None:
    if not db.is_file():
        return None
    try:
        with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=1.0) as connection:
            return connection.execute(query, params).fetchall()
    except sqlite3.Error:
        return None
