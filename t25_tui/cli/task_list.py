"""`t25 task list`: read straight from the default SQLite store with the standard library
when it can (store.quick), so the command an operator types most answers as fast as
`t25 --help`; through the control plane otherwise (a Postgres store, `--project`, `--json`,
a store it cannot read), with the same table."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from store.quick import TaskRow

if TYPE_CHECKING:
    from core.domain.models import Task


def list_(args: argparse.Namespace) -> int:
    if not args.json and not args.project:
        from store.quick import task_rows
        from t25_tui.cli.quick import default_sqlite

        db = default_sqlite(args)
        rows = None if db is None else task_rows(db, states=args.state, include_archived=args.all)
        if rows is not None:
            print_task_rows(rows, filtered=bool(args.state))
            return 0
    return list_tasks(args)


def print_task_rows(tasks: Sequence[TaskRow], *, filtered: bool) -> None:
    """The table of `t25 task list`, or why it is empty."""
    from core.domain.text import printable

    if not tasks:
        print("no tasks" + (" match" if filtered else ' yet — file one with: t25 task new "…"'))
        return
    width = max(len(t.id) for t in tasks)
    now = datetime.now(UTC)
    lines = [f"{'ID':<{width}}  {'STATE':<17}  {'TYPE':<8}  {'AGE':>4}  TITLE"]
    for t in tasks:
        flag = " (archived)" if t.archived else ""
        if t.priority:
            flag += f" [priority {t.priority}]"
        if t.after and t.state == "RECEIVED":
            flag += f" (after {', '.join(t.after)})"
        state = f"{t.state} merged" if t.merged else t.state
        lines.append(
            f"{t.id:<{width}}  {state:<17}  {t.type:<8}  {age(t.state_since, now):>4}  "
            f"{printable(t.title)}{flag}"
        )
    print("\n".join(lines))  # one write: thousands of print calls cost more than the read


def age(since: datetime, now: datetime | None = None) -> str:
    seconds = int(((now or datetime.now(UTC)) - since).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def list_tasks(args: argparse.Namespace) -> int:
    """`t25 task list` through the control plane (the module's docstring says when)."""
    from core.domain.models import TaskState
    from core.ports import Operations
    from t25_tui.cli.context import run
    from t25_tui.cli.shapes import TaskJson, TaskList

    async def body(control: Operations) -> None:
        states = [TaskState(s) for s in args.state] if args.state else None
        tasks = await control.tasks(states=states, project=args.project, archived=args.all)
        if args.json:
            print(TaskList(tasks=[TaskJson.of(t) for t in tasks]).text())
            return
        print_task_rows([_row(t) for t in tasks], filtered=bool(states or args.project))

    run(args, body)
    return 0


def _row(t: Task) -> TaskRow:
    return TaskRow(
        t.id,
        t.state,
        t.type,
        t.title,
        t.archived,
        t.priority,
        tuple(t.after),
        t.state_since,
        t.merged,
    )
