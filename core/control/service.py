"""The control plane's service: the one way in for every state change and operator decision.

The command line, the cockpit and the REST API all call these methods; none of them
re-implements a check, an audit line or an event. A state change goes through
`ControlPlane.transition` and nowhere else.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.control.policies import merge_refusal
from core.domain.decisions import Decision, Verb
from core.domain.events import (
    DecisionRecorded,
    Event,
    EventBus,
    TaskTransitioned,
    TaskUpdated,
    WorktreeCleaned,
)
from core.domain.models import (
    ArtifactKind,
    NewRun,
    NewTask,
    Project,
    Run,
    Task,
    TaskState,
    TaskType,
    task_id,
)
from core.domain.states import TERMINAL, WORKING, assert_transition
from core.domain.text import actor as valid_actor
from core.domain.text import reason as valid_reason
from core.errors import NotFound, PolicyRefused
from core.ports import Store
from core.workspace.git import default_branch

if TYPE_CHECKING:
    from core.config.schema import Config
    from core.control.audit import AuditLog
    from core.workspace.worktrees import Workspace, Worktrees

# Where a task outside a working stage picks up again after NEEDS_INPUT or FAILED.
_RESUME_FROM = {TaskState.RECEIVED: TaskState.SPEC, TaskState.AWAITING_APPROVAL: TaskState.PLAN}
ARCHIVABLE = frozenset({TaskState.DONE, TaskState.CANCELLED, TaskState.FAILED})

# The role whose run works each stage; PR_OPEN is done by T25 itself (no agent).
STAGE_ROLE = {
    TaskState.SPEC: "spec",
    TaskState.PLAN: "planner",
    TaskState.IMPLEMENTING: "dev",
    TaskState.QA: "qa",
    TaskState.REVIEW: "reviewer",
    TaskState.PR_OPEN: "pr",
    TaskState.DOCS: "docs",
}


def _whole(decision):
    """An operator decision runs to its end even when its caller is cancelled (a cockpit
    closing, a dropped connection): a state change is never left without its audit line."""

    @functools.wraps(decision)
    async def run(self, *args: Any, **kwargs: Any):
        return await asyncio.shield(decision(self, *args, **kwargs))

    return run


class ControlPlane:
    """Holds the store, the event bus and the audit log of one T25 installation."""

    def __init__(self, config: Config, store: Store, bus: EventBus | None = None) -> None:
        self.config = config
        self.store = store
        self.bus = bus or EventBus()
        # Runs going on in this process, by task: cancel stops them at once.
        self.live: dict[str, asyncio.Event] = {}
        # Set whenever a run is queued, so in-process workers wake without polling.
        self.work_queued = asyncio.Event()

    # The audit log and the workspace are made, and their modules imported, when a decision
    # or a run first needs them: a command that only reads (`t25 task list`) never does.
    @functools.cached_property
    def audit(self) -> AuditLog:
        from core.control.audit import AuditLog

        return AuditLog(self.config.root / ".factory" / "audit.jsonl", self.store)

    @functools.cached_property
    def workspace(self) -> Workspace:
        from core.workspace.worktrees import Workspace, owner_of

        return Workspace(self.config, owner=owner_of(self.store.url))

    async def sync_projects(self) -> list[Project]:
        """Register the configured projects, detecting default branches git knows."""
        out = []
        for p in self.config.projects:
            branch = p.default_branch or default_branch(Path(p.repo))
            out.append(
                await self.store.upsert_project(
                    Project(name=p.name, repo_path=str(p.repo), default_branch=branch)
                )
            )
        return out

    def worktrees(self, project: str) -> Worktrees:
        """The worktrees of one project's repository, owned by this installation."""
        return self.workspace.worktrees(project)

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
        event = TaskTransitioned(
            task_id=task.id, from_state=task.state, to_state=to, actor=actor, reason=reason
        )
        updated, stored = await self.store.apply_transition(task.id, task.state, event, fields)
        self.bus.publish(stored)
        return updated

    async def enqueue(self, task: Task, role: str | None = None) -> Run:
        """Queue the run that works the task's current stage."""
        run, event = await self.store.enqueue_run(
            NewRun(task_id=task.id, stage=task.state, role=role or STAGE_ROLE[task.state])
        )
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
    #
    # Each decision checks its text at the door, then goes through `_decide`: checked against
    # the task as it is now, written to the audit log, and only then applied.

    async def decide(self, decision: Decision) -> Task:
        """The one way in for an operator decision, whichever face it comes from."""
        verb, ref, actor, text = decision.verb, decision.task, decision.actor, decision.text
        if verb is Verb.ANSWER:
            return await self.answer(ref, text, actor=actor)
        method = {
            Verb.APPROVE: self.approve,
            Verb.REJECT: self.reject,
            Verb.MERGE: self.merge,
            Verb.CANCEL: self.cancel,
            Verb.RETRY: self.retry,
            Verb.ARCHIVE: self.archive,
        }
        return await method[verb](ref, actor=actor, reason=text)

    @_whole
    async def approve(self, ref: str, *, actor: str, reason: str = "") -> Task:
        """Approve the plan a task waits on. The audit line is bound to the plan's SHA-256
        (`bound_to`); `reason` is the approver's comment, beside it."""
        actor, reason = valid_actor(actor), valid_reason(reason, what="comment")

        async def check(task: Task) -> str:
            self._expect(task, TaskState.AWAITING_APPROVAL, "approved")
            plans = [
                a
                for a in await self.store.list_artifacts(task_id=task.id)
                if a.meta.kind is ArtifactKind.PLAN
            ]
            if not plans:
                raise PolicyRefused(
                    f"{task.id} has no plan to approve", hint=f"t25 task show {task.id}"
                )
            artifact, _ = await self.store.get_artifact(plans[-1].id)  # re-hashed on reading
            return f"sha256:{artifact.sha256}"

        async def effect(task: Task, bound_to: str | None) -> Task:
            assert bound_to is not None
            why = f"plan {bound_to} approved" + (f": {reason}" if reason else "")
            return await self.transition(
                task,
                TaskState.IMPLEMENTING,
                actor=actor,
                reason=why,
                approved_plan_sha=bound_to.removeprefix("sha256:"),
            )

        return await self._decide("approve", ref, actor, reason, check, effect, then=self.enqueue)

    @_whole
    async def reject(self, ref: str, *, actor: str, reason: str) -> Task:
        """Send a plan back to PLAN; the reason goes into the planner's next prompt."""
        actor = valid_actor(actor)
        if not reason.strip():
            raise PolicyRefused(
                "a rejection needs a reason; the planner reads it",
                hint=f't25 reject {ref} --reason "what is wrong with the plan"',
            )
        reason = valid_reason(reason)

        async def check(task: Task) -> None:
            self._expect(task, TaskState.AWAITING_APPROVAL, "rejected")

        async def effect(task: Task, _: str | None) -> Task:
            return await self.transition(task, TaskState.PLAN, actor=actor, reason=reason)

        return await self._decide("reject", ref, actor, reason, check, effect, then=self.enqueue)

    @_whole
    async def answer(self, ref: str, text: str, *, actor: str) -> Task:
        """Answer the question a NEEDS_INPUT task asked; it returns to the stage that asked."""
        actor, text = valid_actor(actor), valid_reason(text, what="answer", required=True)

        async def check(task: Task) -> None:
            self._expect(task, TaskState.NEEDS_INPUT, "answered")
            assert_transition(
                task.state, task.resume_state or TaskState.SPEC, resume_state=task.resume_state
            )

        async def effect(task: Task, _: str | None) -> Task:
            return await self.transition(
                task, task.resume_state or TaskState.SPEC, actor=actor, reason="operator answered"
            )

        return await self._decide("answer", ref, actor, text, check, effect, then=self.enqueue)

    @_whole
    async def merge(self, ref: str, *, actor: str, reason: str = "") -> Task:
        """The human merge: only after the checks passed and the verdict is approve."""
        actor, reason = valid_actor(actor), valid_reason(reason)

        async def check(task: Task) -> None:
            refusal = merge_refusal(
                task,
                checks_passed=task.checks_passed,
                review_approved=task.review_verdict == "approve" if task.review_verdict else None,
            )
            if refusal:
                raise PolicyRefused(
                    f"{task.id} cannot be merged: {refusal}",
                    hint=f"t25 archive {task.id}"
                    if task.merged and not task.archived
                    else f"t25 task show {task.id}",
                )

        async def effect(task: Task, _: str | None) -> Task:
            await self.worktrees(task.project).merge(
                task, message=f"Merge {task.branch}: {task.title} ({task.id})"
            )
            return await self.update(task, actor=actor, merged=True)

        task = await self._decide("merge", ref, actor, reason, check, effect)
        await self._clean(task)
        return task

    def _expect(self, task: Task, state: TaskState, done: str) -> None:
        """Refuse a decision on a task that is not in `state`, saying what would fit."""
        if task.state is not state:
            raise PolicyRefused(
                f"{task.id} is {task.state}; only a task in {state} can be {done}",
                hint=_what_fits(task),
            )

    async def new_task(
        self,
        title: str,
        *,
        actor: str,
        type: TaskType = TaskType.FEAT,
        description: str = "",
        project: str | None = None,
    ) -> Task:
        """File a task. The title and description are checked here, the one door every
        face (command line, cockpit, REST) comes through: bounded, no control characters,
        the title on one line (`core.domain.text`)."""
        from core.domain import text

        title, description = text.title(title), text.description(description)
        name = self.config.project(project).name
        task, event = await self.store.create_task(
            NewTask(project=name, title=title, type=type, description=description), actor=actor
        )
        self.bus.publish(event)
        return task

    @_whole
    async def cancel(self, ref: str, *, actor: str, reason: str = "") -> Task:
        actor, reason = valid_actor(actor), valid_reason(reason)

        async def check(task: Task) -> None:
            if task.state in TERMINAL:
                raise PolicyRefused(
                    f"{task.id} is already {task.state}; there is nothing to cancel",
                    hint=f"t25 archive {task.id} takes it off the board"
                    if not task.archived
                    else f"t25 task show {task.id}",
                )

        async def effect(task: Task, _: str | None) -> Task:
            return await self.transition(task, TaskState.CANCELLED, actor=actor, reason=reason)

        async def then(task: Task) -> None:
            await self.store.cancel_runs(task.id)
            if task.id in self.live:
                self.live[task.id].set()  # stop this process's agent now; others see a stale lease

        return await self._decide("cancel", ref, actor, reason, check, effect, then=then)

    @_whole
    async def retry(self, ref: str, *, actor: str, reason: str = "") -> Task:
        actor, reason = valid_actor(actor), valid_reason(reason)

        async def check(task: Task) -> None:
            if task.state is not TaskState.FAILED:
                raise PolicyRefused(
                    f"{task.id} is {task.state}; only a FAILED task can be retried",
                    hint=_what_fits(task),
                )
            assert_transition(
                task.state, task.resume_state or TaskState.SPEC, resume_state=task.resume_state
            )

        async def effect(task: Task, _: str | None) -> Task:
            return await self.transition(
                task, task.resume_state or TaskState.SPEC, actor=actor, reason=reason, error=None
            )

        return await self._decide("retry", ref, actor, reason, check, effect, then=self.enqueue)

    @_whole
    async def archive(self, ref: str, *, actor: str, reason: str = "") -> Task:
        actor, reason = valid_actor(actor), valid_reason(reason)

        async def check(task: Task) -> None:
            if task.archived:
                raise PolicyRefused(
                    f"{task.id} is already archived",
                    hint="t25 task list --all shows archived tasks",
                )
            if task.state not in ARCHIVABLE:
                raise PolicyRefused(
                    f"{task.id} is {task.state}; only DONE, FAILED or CANCELLED tasks can be archived",
                    hint=f"cancel it first: t25 cancel {task.id}",
                )

        async def effect(task: Task, _: str | None) -> Task:
            return await self.update(task, actor=actor, archived=True)

        task = await self._decide("archive", ref, actor, reason, check, effect)
        await self._clean(task)
        return task

    async def _clean(self, task: Task) -> None:
        """Remove a finished task's worktree, or record why it was kept (never forced)."""
        done = await self.worktrees(task.project).cleanup(task)
        await self.record(
            WorktreeCleaned(task_id=task.id, removed=done.removed, reason=done.reason)
        )

    async def update(self, task: Task, *, actor: str, **fields: Any) -> Task:
        """Change non-state fields of a task still in the state it was read in."""
        event = TaskUpdated(task_id=task.id, fields=fields, actor=actor)
        updated, stored = await self.store.update_task(task.id, task.state, fields, event)
        self.bus.publish(stored)
        return updated

    async def _decide(
        self,
        decision: str,
        ref: str,
        actor: str,
        reason: str,
        check: Callable[[Task], Awaitable[str | None]],
        effect: Callable[[Task, str | None], Awaitable[Task]],
        then: Callable[[Task], Awaitable[Any]] | None = None,
    ) -> Task:
        """The one way a decision happens: checked, recorded, then applied.

        While this holds the audit log's writer (one decider at a time, in every process on
        this log and this store), the task is read afresh and `check`ed: a refusal writes
        nothing. `check` returns what the decision is bound to, if anything. The line is
        then made durable and anchored (AuditError, nothing changed, if it cannot be), and
        only then does `effect` change the task. An effect that fails — a worker moved the
        task meanwhile, a store fault, a merge git refused — is followed in the log by a
        void line saying so and why, and its error goes to the caller. A decision that took
        effect is announced with DecisionRecorded, then `then` does what follows from it
        (queues the next run, cancels the task's runs)."""
        async with self.audit.writer() as log:
            task = await self.task(ref)
            bound_to = await check(task)
            entry = await log.append(
                actor=actor, task=task.id, decision=decision, reason=reason, bound_to=bound_to
            )
            try:
                task = await effect(task, bound_to)
            except Exception as exc:
                try:
                    await log.void(entry, str(exc) or type(exc).__name__)
                except Exception as unvoided:  # noqa: BLE001 - the effect's error is the one to report
                    exc.add_note(f"the audit log could not say so either: {unvoided}")
                raise
            # Announced before its follow-up: the next run's prompt reads the reason from it.
            await self.record(
                DecisionRecorded(
                    task_id=task.id,
                    decision=decision,
                    actor=actor,
                    reason=reason,
                    bound_to=bound_to,
                )
            )
        if then is not None:
            await then(task)
        return task


def _what_fits(task: Task) -> str:
    """For a refusal: the command that fits the task as it is now."""
    if task.state is TaskState.AWAITING_APPROVAL:
        return f't25 approve {task.id}, or t25 reject {task.id} --reason "…"'
    if task.state is TaskState.NEEDS_INPUT:
        return f't25 answer {task.id} "…" answers its question'
    if task.state is TaskState.FAILED:
        return f"t25 retry {task.id} runs its stage again"
    return f"t25 task show {task.id} shows where it is"
