"""How a merge decision is made, beside the rest of `decide` (core.control.service).

Where this process has a checkout of the task's repository with its branch, the merge is
tried first on a trial worktree, QA's checks run on the result, outside the audit log's
writer (the checks may take minutes and no other decider waits on them); the control plane
then lands it under the writer. Where it has none (serve on a host without the repository),
the merge is recorded, then queued as a run of role `merge` for a worker that has the
checkout, and its result is awaited: the task marked merged when the worker reports the
merge landed, or the line voided when it was refused or no worker took it.

`ControlPlane` takes these as a mixin; what they use of it is declared below.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from core.control.merge_landing import landed_by_worker
from core.control.merge_record import (
    already_landed,
    may_merge,
    merge_took_effect,
    merges_under_way,
    open_merge_line,
    void_after,
)
from core.control.verb_rules import with_protected
from core.domain.agent import CheckSandbox
from core.domain.decisions import Decision
from core.domain.models import MERGE_ROLE, NewRun, Run, RunStatus, Task, TaskState
from core.domain.verbs import Verb
from core.errors import GitError, MergeRefused, PolicyRefused
from core.workspace.merging import checked_merge

if TYPE_CHECKING:
    from core.config.schema import Config
    from core.control.audit import AuditLog
    from core.control.keyring import Keyring
    from core.domain.clock import Clock
    from core.domain.events import EventBus
    from core.ports import CheckRunner, Store
    from core.workspace.trial_merge import TrialMerge
    from core.workspace.worktrees import Worktrees

# A merge a worker makes: how long it may wait for a worker to take it before it is taken
# off the queue (nothing changed), how often its result is looked for, and its attempts
# (a worker that dies holding it: the next one finds the merge landed, or makes it).
MERGE_CLAIM_WAIT_S = 60.0
MERGE_POLL_S = 0.25
MERGE_SETTLE_S = 30.0  # a run that succeeded: how long its completion may take to mark it
MERGE_ATTEMPTS = 2


class MergeDecisions:
    """The merge decision's own steps: tried here, or made by a worker."""

    if TYPE_CHECKING:
        config: Config
        store: Store
        bus: EventBus
        clock: Clock
        work_queued: asyncio.Event
        run_check: CheckRunner | None

        @property
        def audit(self) -> AuditLog: ...

        @property
        def keys(self) -> Keyring: ...

        def worktrees(self, project: str) -> Worktrees: ...

        async def task(self, ref: str) -> Task: ...

        async def run(self, ref: str) -> Run: ...

    async def trial_merge(self, decision: Decision) -> tuple[Worktrees, TrialMerge] | None:
        """The merge `decision` asks for, made in a trial worktree with QA's checks run on
        the result; refused (nothing written, the default branch where it was) when it
        cannot be made or a required check fails. Checked against the task as it is now,
        and again under the audit log's writer when it lands. None when this process has
        no checkout of the task's repository with its branch: a worker merges it."""
        task = await self.task(decision.task)
        await may_merge(self.store, self.keys, task, decision)  # before minutes of checks
        if not await self._holds(task):
            return None
        worktrees = self.worktrees(task.project)
        recorded_only = await already_landed(worktrees, task)  # its record was lost
        if recorded_only is not None:
            return worktrees, recorded_only
        checks = self.config.for_project(task.project).qa.checks
        confine = self.merge_confinement(task)
        trial = await checked_merge(worktrees.merges, task, checks, self.run_check, confine)
        return worktrees, trial

    async def _holds(self, task: Task) -> bool:
        """Whether this process has a checkout of the task's repository with its branch:
        where a merge of it is made here, not by a worker."""
        try:
            worktrees = self.worktrees(task.project)
        except GitError:  # not a repository here, and no default_branch configured
            return False
        return await worktrees.holds(task)

    def merge_confinement(self, task: Task) -> CheckSandbox:
        """How a merge's QA checks are confined: as QA's are."""
        return CheckSandbox.of(self.config, task.project, f"merge-{task.id}")

    async def merge_by_worker(self, decision: Decision) -> Run:
        """Record the merge, then queue it as a run of role `merge` for a worker on a host
        with the repository: its line is anchored before any git, as a merge's always is,
        and the merge takes effect in the store when the worker reports it landed."""
        async with self.audit.writer() as log:
            task = await self.task(decision.task)
            await may_merge(self.store, self.keys, task, decision)
            under_way = await merges_under_way(self.store, task.id)
            if under_way:
                raise PolicyRefused(
                    f"the merge of {task.id} is already under way ({under_way[0].id})",
                    hint=f"its result comes when a worker finishes it: t25 task show {task.id}",
                )
            entry = await log.append(
                actor=decision.actor,
                task=task.id,
                decision=Verb.MERGE.value,
                reason=with_protected(task, decision.text) or decision.text,
                bound_to=f"commit:{task.reviewed_head}" if task.reviewed_head else None,
            )
            job = NewRun(
                task_id=task.id,
                stage=TaskState.DONE,
                role=MERGE_ROLE,
                max_attempts=MERGE_ATTEMPTS,
                while_in_stage=True,
            )
            try:
                run, queued = await self.store.enqueue_run(job)
            except Exception as exc:
                await void_after(log, entry, exc)
                raise
        self.bus.publish(queued)
        self.work_queued.set()
        return run

    async def merge_result(self, run: Run) -> Task:
        """Wait for the merge run `run` to end: the merged task, or MergeRefused with the
        worker's reason. One that no worker takes within MERGE_CLAIM_WAIT_S is taken off
        the queue and its line voided: nothing changed."""
        queued_for = settled = 0.0
        while True:
            now = await self.run(run.id)
            if now.status is RunStatus.RUNNING:
                queued_for = 0.0
            elif now.status is RunStatus.QUEUED:
                if queued_for >= MERGE_CLAIM_WAIT_S and await asyncio.shield(self._unclaimed(now)):
                    task = await self.task(run.task_id)
                    raise MergeRefused(
                        f"no worker took the merge of {task.id} within "
                        f"{MERGE_CLAIM_WAIT_S:g} s, and this process has no checkout of "
                        f"project {task.project} with {task.branch}; nothing changed",
                        hint="start `t25 worker --url …` on a host with the repository "
                        f"(t25 doctor there), then merge again: t25 merge {task.id}",
                    )
            elif now.status is not RunStatus.SUCCEEDED:
                break
            else:  # landed; marked merged by the completion's next write
                settled += MERGE_POLL_S
                task = await self.task(run.task_id)
                if task.merged or settled > MERGE_SETTLE_S:
                    break
            await asyncio.sleep(MERGE_POLL_S)
            queued_for += MERGE_POLL_S
        task = await self.task(run.task_id)
        if now.status is RunStatus.SUCCEEDED and task.merged:
            return task
        raise MergeRefused(
            f"the merge of {task.id} was refused on the worker: "
            f"{now.error or 'it ended with no result'}",
            hint=f"t25 task show {task.id}",
        )

    async def _unclaimed(self, run: Run) -> bool:
        """Take a merge run no worker has claimed off the queue, and void its line; False
        when a worker claimed it meanwhile (it goes on)."""
        cancelled = await self.store.cancel_runs(run.task_id, queued_only=True)
        if run.id not in {r.id for r in cancelled}:
            return False
        await self.merge_finished(run, None, error="no worker took it")
        return True

    async def merge_finished(self, run: Run, commit: str | None, *, error: str | None) -> Task:
        """A worker's merge run ended: landed at `commit` (the task marked merged, with the
        decision's announcement), or refused for `error` (its audit line voided)."""
        async with self.audit.writer() as log:
            task = await self.task(run.task_id)
            entry = open_merge_line(await self.audit.page(task=task.id))
            if task.merged or entry is None:
                return task  # a completion told twice, or nothing left open to settle
            if error is not None or commit is None:
                await log.void(entry, error or "the merge run ended with no merge commit")
                return task
            write = merge_took_effect(task, entry, self.clock())
            task, events = await self.store.apply_decision(write)
            events = [*events, await landed_by_worker(self.store, task, commit, self.clock)]
        for event in events:
            self.bus.publish(event)
        return task
