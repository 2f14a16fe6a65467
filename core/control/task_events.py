"""A task's events of some kinds, in id order, read without its agents' output.

Each kind is one range of the index on (task, kind, id) (migration 0018): what the pipeline,
the rulings and the sealed history look for — transitions, decisions, runs started — is
found the same way however much its agents printed, where reading the task's every event
would read all of that output too.
"""

from __future__ import annotations

from typing import Any

from core.domain.events import Event
from core.ports import EventLog

EVERY_EVENT = 10_000_000  # a task's whole history of a kind is read at once: none has this many


async def events_of_kinds(store: EventLog, task_id: str, *kinds: type[Event]) -> list[Any]:
    """The task's events of these kinds, in id order."""
    found = [
        e
        for kind in kinds
        for e in await store.events_after(0, task_id=task_id, kind=kind.kind, limit=EVERY_EVENT)
    ]
    return sorted(found, key=lambda e: e.id) if len(kinds) > 1 else found
