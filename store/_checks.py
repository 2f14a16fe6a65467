"""What every backend checks before it writes, and how it words what went wrong.

Backends differ in SQL, not in the contract: the argument checks and the messages a
person reads when an id is unknown, a compare-and-set lost or a lease is gone live
here once, so the SQLite and Postgres stores say the same thing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from enum import Enum
from typing import Any

from pydantic import TypeAdapter

from core.domain.events import Event, TaskTransitioned
from core.domain.models import (
    MUTABLE_TASK_FIELDS,
    AuditAnchor,
    Lease,
    NewRun,
    RunOutcome,
    RunStatus,
    Task,
    TaskState,
    format_id,
    parse_id,
)
from core.errors import LeaseLost, NotFound, StaleState


def _field_type(name: str) -> TypeAdapter[Any]:
    annotation = Task.model_fields[name].annotation
    if annotation is None:  # pydantic's type allows it; a Task field always has one
        raise TypeError(f"Task.{name} has no type")
    return TypeAdapter(annotation)


_FIELD_TYPES = {name: _field_type(name) for name in MUTABLE_TASK_FIELDS}

FINISHED = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})
HASH_INLINE_MAX = 1 << 20  # bigger contents are hashed off the event loop


def task_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Validate the task fields a change sets; return them as plain column values.

    ValueError (pydantic's ValidationError is one) for a field outside
    MUTABLE_TASK_FIELDS or a value of the wrong type.
    """
    unknown = sorted(set(fields) - MUTABLE_TASK_FIELDS)
    if unknown:
        raise ValueError(
            f"task fields {unknown} cannot be set; settable: {sorted(MUTABLE_TASK_FIELDS)}"
        )
    values: dict[str, Any] = {}
    for name, raw in fields.items():
        value = _FIELD_TYPES[name].validate_python(raw)
        if isinstance(value, Enum):
            value = value.value
        elif isinstance(value, bool):
            value = int(value)
        elif isinstance(value, tuple):  # a list of names, kept as a JSON array
            value = json.dumps(list(value)) if value else None
        elif isinstance(value, dict):  # kept as a JSON object
            value = json.dumps(_FIELD_TYPES[name].dump_python(value, mode="json")) or None
            value = None if value == "{}" else value
        values[name] = value
    return values


def event_for_task(task_id: str, event: Event) -> Event:
    """The event written with a task change is about that task; it gets the task's id."""
    if event.task_id is not None and format_id("T", parse_id("T", event.task_id)) != task_id:
        raise ValueError(f"an event about {event.task_id} cannot record a change of {task_id}")
    return event.model_copy(update={"task_id": task_id})


def transition_event(task_id: str, expected: TaskState, event: Event) -> TaskTransitioned:
    """The event of a state change must be a TaskTransitioned from `expected`."""
    if not isinstance(event, TaskTransitioned):
        raise TypeError(
            f"a state change is written as TaskTransitioned, not {type(event).__name__}"
        )
    if event.from_state != expected:
        raise ValueError(
            f"the event says {task_id} moves from {event.from_state}, but the change expects {expected}"
        )
    return event


def run_of_stage(task_id: str, stage: TaskState, run: NewRun) -> NewRun:
    """The run queued with an entry into a stage works that stage of that task."""
    if format_id("T", parse_id("T", run.task_id)) != task_id or run.stage != stage:
        raise ValueError(
            f"entering {stage} of {task_id} queues a run of it, not {run.stage} of {run.task_id}"
        )
    return run


def finished_outcome(outcome: RunOutcome) -> RunOutcome:
    if outcome.status not in FINISHED:
        raise ValueError(f"a run completes as succeeded, failed or cancelled, not {outcome.status}")
    return outcome


def positive_ttl(ttl_s: float) -> float:
    if not ttl_s > 0:
        raise ValueError(f"a lease lasts a positive number of seconds, not {ttl_s!r}")
    return float(ttl_s)


def backoff(retry_delay_s: float, max_retry_delay_s: float) -> tuple[float, float]:
    """The reaper's delays: the first retry waits `retry_delay_s`, each later one twice the
    one before, never more than `max_retry_delay_s`."""
    first = max(0.0, float(retry_delay_s))
    return first, max(first, float(max_retry_delay_s))


async def sha256(content: bytes) -> str:
    """The hex SHA-256 an artifact's content is stored under."""
    if len(content) <= HASH_INLINE_MAX:
        return hashlib.sha256(content).hexdigest()
    return await asyncio.to_thread(lambda: hashlib.sha256(content).hexdigest())


# -- errors ---------------------------------------------------------------------------------


def task_not_found(task_id: str) -> NotFound:
    return NotFound(f"there is no task {task_id}", hint="`t25 task list` shows the tasks")


def project_not_found(name: str) -> NotFound:
    return NotFound(
        f"there is no project {name!r}",
        hint="projects come from t25.yaml; check the project name there",
    )


def run_not_found(run_id: str) -> NotFound:
    return NotFound(f"there is no run {run_id}", hint="a task's detail view lists its runs")


def artifact_not_found(artifact_id: str) -> NotFound:
    return NotFound(
        f"there is no artifact {artifact_id}", hint="a task's detail view lists its artifacts"
    )


def stale_task(task_id: str, now: str, expected: TaskState) -> StaleState:
    return StaleState(
        f"task {task_id} is now in {now}, not {expected}",
        hint="someone else moved it first; reload the task and decide again",
    )


def stale_anchor(now: AuditAnchor | None, previous: AuditAnchor | None) -> StaleState:
    held = f"seq {now.seq}" if now else "none"
    expected = f"seq {previous.seq}" if previous else "none"
    return StaleState(
        f"the audit anchor is at {held}, not {expected}",
        hint="another process appended to the audit log; re-read it and retry",
    )


def lease_lost(
    lease: Lease, *, status: str, token: int, worker: str | None, expired_ago_s: float | None
) -> LeaseLost:
    """Say why `lease` no longer holds, from the run's current row."""
    hint = "stop working on this run; T25 hands it out again or has finished it"
    if token != lease.token:
        why = f"the token is stale: the run is {status} under token {token}, yours is {lease.token}"
    elif status != RunStatus.RUNNING:
        why = f"the lease expired or was handed back, and the run is now {status}"
    elif worker != lease.worker:
        why = f"token {token} was given to {worker}, not to {lease.worker}"
    else:
        ago = "" if expired_ago_s is None else f" {expired_ago_s:.2f} s ago"
        why = f"the lease expired{ago}"
    return LeaseLost(f"lease on {lease.run_id} lost: {why}", hint=hint)
