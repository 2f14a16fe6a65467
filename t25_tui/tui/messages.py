"""The one place bus events become Textual messages.

The core publishes small immutable events on its `EventBus`; the cockpit must never let
a burst of them (an agent flooding output) stall the UI loop, and must never miss that a
human is needed. The bridge drains a bounded subscription in a worker and posts:

- `TaskChanged` for anything that moves a card (the board refreshes, debounced),
- `RunOutputArrived` for agent output (log panes buffer it and write on a timer),
- `HumanNeeded` when a task waits for a person (the only events that notify),
- `StoreResync` when the subscription overflowed: re-read the store.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message

from core.domain.events import (
    ApprovalRequested,
    DecisionRecorded,
    Event,
    EventBus,
    InputRequested,
    Resync,
    RunOutput,
    TaskTransitioned,
)
from core.domain.models import TaskState


class TaskChanged(Message):
    """A task's card or detail may look different now."""

    def __init__(self, task_id: str | None, event: Event) -> None:
        super().__init__()
        self.task_id = task_id
        self.event = event


class RunOutputArrived(Message):
    """A batch of an agent's output, as the worker recorded it."""

    def __init__(self, event: RunOutput) -> None:
        super().__init__()
        self.event = event


class HumanNeeded(Message):
    """A task now waits for a person: the one kind of event worth a notification."""

    def __init__(self, task_id: str, text: str) -> None:
        super().__init__()
        self.task_id = task_id
        self.text = text


class StoreResync(Message):
    """The bridge fell behind the bus: whatever is on screen must be re-read."""


def human_message(event: Event) -> str | None:
    """The notification for an event that needs a human, or None for routine progress."""
    match event:
        case ApprovalRequested():
            files = ", ".join(event.files[:3]) + (" …" if len(event.files) > 3 else "")
            return f"{event.task_id} needs approval: {event.risk}-risk plan ({files or 'no files'})"
        case InputRequested():
            return f"{event.task_id} asks: {event.question}"
        case TaskTransitioned(to_state=TaskState.FAILED):
            return f"{event.task_id} FAILED: {event.reason or 'see its detail'}"
        case TaskTransitioned(to_state=TaskState.DONE):
            return f"{event.task_id} is DONE and ready to merge"
    return None


def translate(item: Event | Resync) -> list[Message]:
    """The messages one bus item becomes (pure: tested without an app)."""
    if isinstance(item, Resync):
        return [StoreResync()]
    if isinstance(item, RunOutput):
        return [RunOutputArrived(item)]
    out: list[Message] = [TaskChanged(item.task_id, item)]
    if (text := human_message(item)) and item.task_id:
        out.append(HumanNeeded(item.task_id, text))
    return out


async def pump(bus: EventBus, post: Callable[[Message], object]) -> None:
    """Drain the bus into `post` (the app's post_message) until cancelled."""
    sub = bus.subscribe(maxsize=20_000)
    try:
        async for item in sub:
            for message in translate(item):
                post(message)
    finally:
        sub.close()


__all__ = [
    "DecisionRecorded",
    "HumanNeeded",
    "RunOutputArrived",
    "StoreResync",
    "TaskChanged",
    "human_message",
    "pump",
    "translate",
]
