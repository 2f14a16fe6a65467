"""`t25 task list`: the tasks not finished and a count of the finished ones (DONE and merged,
CANCELLED: core.control.task_lists), unless `--all` or `--state` asks for them; `--json` gives
a page at a time.

It reads straight from the default SQLite store with the standard library when it can
(store.quick), so the command an operator types most answers as fast as `t25 --help`; through
the control plane otherwise (a Postgres store, `--project`, `--json`, a store it cannot read),
with the same table."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from store.quick import TaskPage, TaskRow

if TYPE_CHECKING:
    from core.domain.models import Task

JSON_PAGE = 1000  # tasks in a page of `--json` unless `--limit` says otherwise


def list_(args: argparse.Namespace) -> int:
    if not args.json and not args.project:
        from store.quick import task_rows
        from t25_tui.cli.quick import default_sqlite

        db = default_sqlite(args)
        limit = None if args.limit is None else args.limit + 1  # one more: is there a next page?
        page = None
        if db is not None:
            page = task_rows(
                db, states=args.state, include_archived=args.all, after=_after(args), limit=limit
            )
        if page is not None:
            print_task_page(page, args)
            return 0
    return list_tasks(args)


def _after(args: argparse.Namespace) -> int | None:
    if args.after is None:
        return None
    from core.domain.models import parse_id  # pydantic: only when there is an id to read

    return parse_id("T", args.after)


def print_task_page(page: TaskPage, args: argparse.Namespace) -> None:
    """The table of `t25 task list`, or why it is empty; then what it left out."""
    from core.domain.text import printable

    rows = page.rows if args.limit is None else page.rows[: args.limit]
    left = [
        f"{n:,} {state}" + (" merged" if state == "DONE" else "")
        for state, n in sorted(page.finished.items())
        if n
    ]
    if not rows:
        filtered = bool(args.state or args.project or args.after)
        if filtered:
            print("no tasks match")
        elif left:
            print("no task left to do")
        else:
            print('no tasks yet — file one with: t25 task new "…"')
    else:
        width = max(len(t.id) for t in rows)
        now = datetime.now(UTC)
        lines = [f"{'ID':<{width}}  {'STATE':<17}  {'TYPE':<8}  {'AGE':>4}  TITLE"]
        for t in rows:
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
    if len(page.rows) > len(rows):
        print(f"more after {rows[-1].id}: t25 task list --after {rows[-1].id}")
    if left:
        print(f"and {', '.join(left)} (t25 task list --all lists them)")


def age(since: datetime, now: datetime | None = None) -> str:
    seconds = int(((now or datetime.now(UTC)) - since).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def list_tasks(args: argparse.Namespace) -> int:
    """`t25 task list` through the control plane (the module's docstring says when)."""
    from core.control import task_lists
    from core.domain.models import TaskState
    from core.ports import Operations
    from t25_tui.cli.context import run

    async def body(control: Operations) -> None:
        limit = args.limit or (JSON_PAGE if args.json else None)
        more = None if limit is None else limit + 1  # one more: is there a next page?
        project, after = args.project, args.after
        finished: dict[str, int] = {}
        if args.state or args.all:
            states = [TaskState(s) for s in args.state] if args.state else None
            tasks = await control.tasks(
                states=states, archived=args.all, project=project, after=after, limit=more
            )
        else:
            tasks = await task_lists.unfinished(control, project=project, after=after, limit=more)
            counts = await task_lists.finished_counts(control, project=args.project)
            finished = {state.value: n for state, n in counts.items()}
        if args.json:
            _print_json(tasks, limit, finished)
        else:
            print_task_page(TaskPage([_row(t) for t in tasks], finished), args)

    run(args, body)
    return 0


def _print_json(tasks: Sequence[Task], limit: int | None, finished: Mapping[str, int]) -> None:
    from t25_tui.cli.shapes import TaskJson, TaskList

    page = list(tasks if limit is None else tasks[:limit])
    more = len(tasks) > len(page)
    print(
        TaskList(
            tasks=[TaskJson.of(t) for t in page],
            next=page[-1].id if more else None,
            finished=dict(finished),
        ).text()
    )


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
