"""The event and the fields of a legal move of a task: what every state change writes.

A move is checked against the state table (core.domain.states; a reset, back to a stage the
task passed, against its own rule), into NEEDS_INPUT or FAILED it records the stage to
resume and out of them clears it, and its TaskTransitioned carries the gate fields it sets
with any `facts`, sealed (core.control.history). The control plane's transitions, stage
entries, operator decisions and a run's decision all build their change here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from core.control.history import GATE_FIELDS, transition_seal
from core.control.keyring import Keyring
from core.control.verb_rules import RESUME_FROM
from core.domain.events import TaskTransitioned
from core.domain.models import Task, TaskState
from core.domain.states import WORKING, assert_reset, assert_transition


def legal_move(
    task: Task,
    to: TaskState,
    *,
    actor: str,
    reason: str,
    fields: Mapping[str, Any],
    keys: Keyring,
    at: datetime,
    reset: bool = False,
    facts: Mapping[str, Any] | None = None,
) -> tuple[TaskTransitioned, dict[str, Any]]:
    """The event and the fields of moving `task` to `to` (a `reset`: back to a stage it
    passed), sealed with `keys`, at `at`."""
    if reset:
        assert_reset(task.state, to, resume_state=task.resume_state)
    else:
        assert_transition(task.state, to, resume_state=task.resume_state)
    fields = dict(fields)
    if to in (TaskState.NEEDS_INPUT, TaskState.FAILED):
        resume = task.state if task.state in WORKING else RESUME_FROM.get(task.state)
        fields.setdefault("resume_state", resume or task.resume_state)
    elif task.state in (TaskState.NEEDS_INPUT, TaskState.FAILED):
        fields.setdefault("resume_state", None)
    recorded = {k: fields[k] for k in GATE_FIELDS if k in fields} | dict(facts or {})
    event = TaskTransitioned(
        at=at,
        task_id=task.id,
        from_state=task.state,
        to_state=to,
        actor=actor,
        reason=reason,
        facts=recorded,
        seal=transition_seal(keys, task.id, task.state, to, recorded),
    )
    return event, fields
