"""The factory service: the one way in for every state change and operator decision.

The command line, the cockpit and the REST API all call these methods; none of them
re-implements a check, an audit line or an event. A state change goes through
`Factory.transition` and nowhere else.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.audit import AuditLog
from core.errors import NotFound, PolicyRefused
from core.events import DecisionRecorded, Event, EventBus, TaskTransitioned, TaskUpdated
from core.git import default_branch
from core.models import NewTask, Project, Task, TaskState, TaskType, task_id
from core.states import TERMINAL, WORKING, assert_transition
from core.store import Store

if TYPE_CHECKING:
    from core.config import Config

# Where a task outside a working stage picks up again after NEEDS_INPUT or FAILED.
_RESUME_FROM = {TaskState.RECEIVED: TaskState.SPEC, TaskState.AWAITING_APPROVAL: TaskState.PLAN}
ARCHIVABLE = frozenset({TaskState.DONE, TaskState.CANCELLED, TaskState.FAILED})


class Factory:
    """Holds the store, the event bus and the audit log of one T25 installation."""

    def __init__(self, config: Config, store: Store, bus: EventBus | None = None) -> None:
        self.config = config
        self.store = store
        self.bus = bus or EventBus()
        self.audit = AuditLog(config.root / ".factory" / "audit.jsonl", store)

    async def sync_projects(self) -> list[Project]:
        """Register the configured projects, detecting default branches git knows."""
        out = []
        for p in self.config.projects:
            branch = p.default_branch or default_branch(Path(p.repo))
            out.append(await self.store.upsert_project(
                Project(name=p.name, repo_path=str(p.repo), default_branch=branch)))
        return out

    # -- reading ---------------------------------------------------------------------------

    async def task(self, ref: str) -> Task:
        tid = task_id(ref)
        found = await self.store.get_task(tid)
        if found is None:
            raise NotFound(f"no task {tid}", hint="`t25 task list` shows the tasks")
        return found

    # -- the one way a state changes ---------------------------------------------------------

    async def record(self, event: Event) -> Event:
        """Persist an event, then publish it."""
        stored = await self.store.append_event(event)
        self.bus.publish(stored)
        return stored

    async def transition(
        self, task: Task, to: TaskState, *, actor: str, reason: str = "", **fields: Any
    ) -> Task:
        """Check the table, compare-and-set from `task.state`, record TaskTransitioned."""
        assert_transition(task.state, to, resume_state=task.resume_state)
        if to in (TaskState.NEEDS_INPUT, TaskState.FAILED):
            resume = task.state if task.state in WORKING else _RESUME_FROM.get(task.state)
            fields.setdefault("resume_state", resume or task.resume_state)
        elif task.state in (TaskState.NEEDS_INPUT, TaskState.FAILED):
            fields.setdefault("resume_state", None)
        event = TaskTransitioned(task_id=task.id, from_state=task.state, to_state=to,
                                 actor=actor, reason=reason)
        updated, stored = await self.store.apply_transition(task.id, task.state, event, fields)
        self.bus.publish(stored)
        return updated

    # -- operator actions --------------------------------------------------------------------

    async def new_task(
        self, title: str, *, actor: str, type: TaskType = TaskType.FEAT,
        description: str = "", project: str | None = None,
    ) -> Task:
        if not title.strip():
            raise PolicyRefused("a task needs a title", hint='t25 task new "what should change"')
        name = self.config.project(project).name
        task, event = await self.store.create_task(
            NewTask(project=name, title=title.strip(), type=type, description=description),
            actor=actor)
        self.bus.publish(event)
        return task

    async def cancel(self, ref: str, *, actor: str, reason: str = "") -> Task:
        task = await self.task(ref)
        if task.state in TERMINAL:
            raise PolicyRefused(f"{task.id} is already {task.state}; there is nothing to cancel")
        task = await self.transition(task, TaskState.CANCELLED, actor=actor, reason=reason)
        await self.store.cancel_runs(task.id)
        await self._decided(task, "cancel", actor, reason)
        return task

    async def retry(self, ref: str, *, actor: str, reason: str = "") -> Task:
        task = await self.task(ref)
        if task.state is not TaskState.FAILED:
            raise PolicyRefused(f"{task.id} is {task.state}; only a FAILED task can be retried")
        target = task.resume_state or TaskState.SPEC
        task = await self.transition(task, target, actor=actor, reason=reason, error=None)
        await self._decided(task, "retry", actor, reason)
        return task

    async def archive(self, ref: str, *, actor: str, reason: str = "") -> Task:
        task = await self.task(ref)
        if task.archived:
            raise PolicyRefused(f"{task.id} is already archived")
        if task.state not in ARCHIVABLE:
            raise PolicyRefused(
                f"{task.id} is {task.state}; only DONE, FAILED or CANCELLED tasks can be archived",
                hint=f"cancel it first: t25 cancel {task.id}")
        task = await self.update(task, actor=actor, archived=True)
        await self._decided(task, "archive", actor, reason)
        return task

    async def update(self, task: Task, *, actor: str, **fields: Any) -> Task:
        """Change non-state fields of a task still in the state it was read in."""
        event = TaskUpdated(task_id=task.id, fields=fields, actor=actor)
        updated, stored = await self.store.update_task(task.id, task.state, fields, event)
        self.bus.publish(stored)
        return updated

    async def _decided(self, task: Task, decision: str, actor: str, reason: str) -> None:
        """Make a decision durable in the audit log, then announce it."""
        await self.audit.append(actor=actor, task=task.id, decision=decision, reason=reason)
        await self.record(DecisionRecorded(task_id=task.id, decision=decision, actor=actor,
                                           reason=reason))
