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


def task_rows(
    db: Path, *, states: Sequence[str] | None, include_archived: bool
) -> list[TaskRow] | None:
    """The tasks `t25 task list` shows, oldest first; None when this cannot read them."""
    where, params = ["1"], list(states or ())
    if states:
        where.append(f"state IN ({', '.join('?' * len(states))})")
    if not include_archived:
        where.append("archived = 0")
    rows = _read(
        db,
        "SELECT id, state, type, title, archived, priority, after_tasks, state_since, merged "
        f"FROM tasks WHERE {' AND '.join(where)} ORDER BY id",
        params,
    )
    if rows is None:
        return None
    return [
        TaskRow(
            f"T-{number}",
            state,
            kind,
            title,
            bool(archived),
            priority,
            tuple(json.loads(after)) if after else (),
            datetime.fromtimestamp(since, UTC),
            bool(merged),
        )
        for number, state, kind, title, archived, priority, after, since, merged in rows
    ]


def _read(db: Path, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]] | None:
    if not db.is_file():
        return None
    try:
        with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=1.0) as connection:
            return connection.execute(query, params).fetchall()
    except sqlite3.Error:
        return None
