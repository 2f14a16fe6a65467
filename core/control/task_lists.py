"""Which tasks a list shows: those with something left to do, and the finished ones counted.

A task is finished when nothing is left for anyone to do with it: CANCELLED, or DONE and
merged. A DONE task not yet merged waits for the operator's merge, so it is still listed.
History only grows; what an operator looks at does not. `t25 task list` shows the unfinished
tasks and counts the finished ones, and the board draws the unfinished ones and the newest of
the finished: both read what they show, through indexed reads of the store (migration 0018),
whatever the history holds.

These read through `Operations`, so the cockpit attached to a serve reads the same.
"""

from __future__ import annotations

from core.domain.models import Task, TaskState, parse_id
from core.domain.states import TERMINAL
from core.ports import Operations

S = TaskState

# Each finished state with what its `merged` flag must be (None: either).
FINISHED: dict[TaskState, bool | None] = {S.DONE: True, S.CANCELLED: None}
# The states where a task is never finished.
UNFINISHED_STATES: tuple[TaskState, ...] = tuple(s for s in TaskState if s not in TERMINAL)


async def unfinished(
    ops: Operations,
    *,
    project: str | None = None,
    after: str | None = None,
    limit: int | None = None,
) -> list[Task]:
    """The tasks not finished, oldest first: those in the pipeline or waiting for the
    operator, and the DONE ones not yet merged; a page of at most `limit` past `after`."""
    working = await ops.tasks(states=UNFINISHED_STATES, project=project, after=after, limit=limit)
    to_merge = await ops.tasks(
        states=[S.DONE], merged=False, project=project, after=after, limit=limit
    )
    both = sorted([*working, *to_merge], key=lambda t: parse_id("T", t.id))
    return both if limit is None else both[:limit]


async def finished_counts(ops: Operations, *, project: str | None = None) -> dict[TaskState, int]:
    """How many tasks are finished, by state (a state with none is left out)."""
    counts = {}
    for state, merged in FINISHED.items():
        found = await ops.task_counts(states=[state], project=project, merged=merged)
        if found.get(state):
            counts[state] = found[state]
    return counts


async def newest_finished(ops: Operations, per_state: int) -> list[Task]:
    """The `per_state` newest finished tasks (by filing) of each finished state."""
    newest: list[Task] = []
    for state, merged in FINISHED.items():
        newest += await ops.tasks(states=[state], merged=merged, newest_first=True, limit=per_state)
    return newest
