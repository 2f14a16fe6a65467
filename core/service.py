"""The factory service: the one way in for every state change and operator decision.

The command line, the cockpit and the REST API all call these methods; none of them
re-implements a check, an audit line or an event. A state change goes through
`Factory.transition` and nowhere else.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.audit import AuditLog
from core.errors import NotFound, PolicyRefused
from core.events import (
    DecisionRecorded,
    Event,
    EventBus,
    TaskTransitioned,
    TaskUpdated,
    WorktreeCleaned,
)
from core.git import default_branch
from core.models import ArtifactKind, NewRun, NewTask, Project, Run, Task, TaskState, TaskType, task_id
from core.policies import merge_refusal
from core.states import TERMINAL, WORKING, assert_transition
from core.store import Store
from core.worktrees import Workspace, Worktrees, owner_of

if TYPE_CHECKING:
    from core.config import Config

# Where a task outside a working stage picks up again after NEEDS_INPUT or FAILED.
_RESUME_FROM = {TaskState.RECEIVED: TaskState.SPEC, TaskState.AWAITING_APPROVAL: TaskState.PLAN}
ARCHIVABLE = frozenset({TaskState.DONE, TaskState.CANCELLED, TaskState.FAILED})

# The role whose run works each stage; PR_OPEN is done by T25 itself (no agent).
STAGE_ROLE = {
    TaskState.SPEC: "spec", TaskState.PLAN: "planner", TaskState.IMPLEMENTING: "dev",
    TaskState.QA: "qa", TaskState.REVIEW: "reviewer", TaskState.PR_OPEN: "pr",
    TaskState.DOCS: "docs",
}


def _whole(decision):
    """An operator decision runs to its end even when its caller is cancelled (a cockpit
    closing, a dropped connection): a state change is never left without its audit line."""

    @functools.wraps(decision)
    async def run(self, *args: Any, **kwargs: Any):
        return await asyncio.shield(decision(self, *args, **kwargs))

    return run


class Factory:
    """Holds the store, the event bus and the audit log of one T25 installation."""

    def __init__(self, config: Config, store: Store, bus: EventBus | None = None) -> None:
        self.config = config
        self.store = store
        self.bus = bus or EventBus()
        self.audit = AuditLog(config.root / ".factory" / "audit.jsonl", store)
        # Runs going on in this process, by task: cancel stops them at once.
        self.live: dict[str, asyncio.Event] = {}
        # Set whenever a run is queued, so in-process workers wake without polling.
        self.work_queued = asyncio.Event()
        self.site = Workspace(config, owner=owner_of(store.url))

    async def sync_projects(self) -> list[Project]:
        """Register the configured projects, detecting default branches git knows."""
        out = []
        for p in self.config.projects:
            branch = p.default_branch or default_branch(Path(p.repo))
            out.append(await self.store.upsert_project(
                Project(name=p.name, repo_path=str(p.repo), default_branch=branch)))
        return out

    def worktrees(self, project: str) -> Worktrees:
        """The worktrees of one project's repository, owned by this installation."""
        return self.site.worktrees(project)

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

    async def enqueue(self, task: Task, role: str | None = None) -> Run:
        """Queue the run that works the task's current stage."""
        run, event = await self.store.enqueue_run(
            NewRun(task_id=task.id, stage=task.state, role=role or STAGE_ROLE[task.state]))
        self.bus.publish(event)
        self.work_queued.set()
        return run

    async def enter(
        self, task: Task, stage: TaskState, *, actor: str, reason: str = "", **fields: Any
    ) -> Task:
        """Move into a working stage and queue its run."""
        task = await self.transition(task, stage, actor=actor, reason=reason, **fields)
        await self.enqueue(task)
        return task

    async def decisions(self, ref: str) -> list[DecisionRecorded]:
        events = await self.store.events_after(0, task_id=ref, limit=1_000_000)
        return [e for e in events if isinstance(e, DecisionRecorded)]

    # -- operator actions --------------------------------------------------------------------

    @_whole
    async def approve(self, ref: str, *, actor: str, reason: str = "") -> Task:
        """Approve the plan a task waits on; the approval records the plan's SHA-256."""
        task = await self._waiting(ref, TaskState.AWAITING_APPROVAL, "approve")
        plans = [a for a in await self.store.list_artifacts(task_id=task.id)
                 if a.meta.kind is ArtifactKind.PLAN]
        if not plans:
            raise PolicyRefused(f"{task.id} has no plan to approve")
        artifact, _ = await self.store.get_artifact(plans[-1].id)
        task = await self.enter(task, TaskState.IMPLEMENTING, actor=actor,
                                reason=reason or "plan approved",
                                approved_plan_sha=artifact.sha256)
        await self._decided(task, "approve", actor, reason or f"plan sha256:{artifact.sha256}")
        return task

    @_whole
    async def reject(self, ref: str, *, actor: str, reason: str) -> Task:
        """Send a plan back to PLAN; the reason goes into the planner's next prompt."""
        if not reason.strip():
            raise PolicyRefused("a rejection needs a reason; the planner reads it",
                                hint=f't25 reject {ref} --reason "what is wrong with the plan"')
        task = await self._waiting(ref, TaskState.AWAITING_APPROVAL, "reject")
        task = await self.enter(task, TaskState.PLAN, actor=actor, reason=reason)
        await self._decided(task, "reject", actor, reason)
        return task

    @_whole
    async def answer(self, ref: str, text: str, *, actor: str) -> Task:
        """Answer the question a NEEDS_INPUT task asked; it returns to the stage that asked."""
        if not text.strip():
            raise PolicyRefused("an answer cannot be empty")
        task = await self._waiting(ref, TaskState.NEEDS_INPUT, "answer")
        stage = task.resume_state or TaskState.SPEC
        task = await self.enter(task, stage, actor=actor, reason="operator answered")
        await self._decided(task, "answer", actor, text)
        return task

    @_whole
    async def merge(self, ref: str, *, actor: str, reason: str = "") -> Task:
        """The human merge: only after the checks passed and the verdict is approve."""
        task = await self.task(ref)
        refusal = merge_refusal(task, checks_passed=task.checks_passed,
                                review_approved=task.review_verdict == "approve"
                                if task.review_verdict else None)
        if refusal:
            raise PolicyRefused(f"{task.id} cannot be merged: {refusal}")
        worktrees = self.worktrees(task.project)
        sha = await worktrees.merge(task, message=f"Merge {task.branch}: {task.title} ({task.id})")
        task = await self.update(task, actor=actor, merged=True)
        await self._decided(task, "merge", actor, reason or f"merged as {sha[:12]}")
        await self._clean(task)
        return task

    async def _waiting(self, ref: str, state: TaskState, verb: str) -> Task:
        task = await self.task(ref)
        if task.state is not state:
            raise PolicyRefused(f"{task.id} is {task.state}; only a task in {state} can be "
                                f"{'answered' if verb == 'answer' else verb + 'd'}")
        return task

    async def new_task(
        self, title: str, *, actor: str, type: TaskType = TaskType.FEAT,
        description: str = "", project: str | None = None,
    ) -> Task:
        """File a task. The title and description are checked here, the one door every
        face (command line, cockpit, REST) comes through: bounded, no control characters,
        the title on one line (`core.text`)."""
        from core import text

        title, description = text.title(title), text.description(description)
        name = self.config.project(project).name
        task, event = await self.store.create_task(
            NewTask(project=name, title=title, type=type, description=description), actor=actor)
        self.bus.publish(event)
        return task

    @_whole
    async def cancel(self, ref: str, *, actor: str, reason: str = "") -> Task:
        task = await self.task(ref)
        if task.state in TERMINAL:
            raise PolicyRefused(f"{task.id} is already {task.state}; there is nothing to cancel")
        task = await self.transition(task, TaskState.CANCELLED, actor=actor, reason=reason)
        await self.store.cancel_runs(task.id)
        if task.id in self.live:
            self.live[task.id].set()  # stop this process's agent now; others see a stale lease
        await self._decided(task, "cancel", actor, reason)
        return task

    @_whole
    async def retry(self, ref: str, *, actor: str, reason: str = "") -> Task:
        task = await self.task(ref)
        if task.state is not TaskState.FAILED:
            raise PolicyRefused(f"{task.id} is {task.state}; only a FAILED task can be retried")
        target = task.resume_state or TaskState.SPEC
        task = await self.enter(task, target, actor=actor, reason=reason, error=None)
        await self._decided(task, "retry", actor, reason)
        return task

    @_whole
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
        await self._clean(task)
        return task

    async def _clean(self, task: Task) -> None:
        """Remove a finished task's worktree, or record why it was kept (never forced)."""
        done = await self.worktrees(task.project).cleanup(task)
        await self.record(WorktreeCleaned(task_id=task.id, removed=done.removed, reason=done.reason))

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
