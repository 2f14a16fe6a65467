"""The control plane's service: the one way in for every state change and operator decision.

The command line, the cockpit and the REST API all hold it as `core.ports.Operations`: its reads
are the query service's (core.control.queries), and every operator decision is a `Decision`
handed to `decide`; none of the faces re-implements a check, an audit line or an event. A state
change goes through `ControlPlane.transition` (`enter` with its run; `move`, a run's decision:
core.control.task_book), or, for an operator's decision, through `decide`, and nowhere else.

One decision, from the door to its effect:

    checked at the door   its actor and its words (core.domain.text); a rejection needs a reason
    ruled on              under the audit log's writer, against the task as it is now: a
                          refusal (PolicyRefused) writes nothing
    recorded              its audit line, fsync'ed
    applied               one store transaction (Store.apply_decision): the task's change, the
                          DecisionRecorded announcing it, the audit anchor, and what follows
                          in the store (the next stage's run, or the task's runs cancelled)
    followed up           the events published; a cancelled agent of this process stopped;
                          a merged or archived task's worktree cleaned

Counted on a real SQLite store (its statements traced: tests/integration/test_operations.py), an
approval was an fsync and four write transactions (the anchor, the transition, the
announcement, the next run), and is now an fsync and one; on Postgres add the audit
lock's own transaction to each (five, now two). A merge anchors its line before git
changes anything, so it keeps an anchor of its own and records its worktree's cleaning
after it: an fsync and three (it was four), by reading the code.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.config.live import ConfigFile, Reread
from core.config.schema import Config
from core.control import baselines
from core.control.decision_door import at_the_door, valid_priority
from core.control.decision_writes import decision_write
from core.control.decisions_by_name import DecisionsByName
from core.control.forge_merge import ForgeMerges
from core.control.history import (
    merge_blocker,
    sealed_history,
)
from core.control.merge_decisions import MergeDecisions
from core.control.merge_landing import landed
from core.control.merge_record import (
    AuditLine,
    apply_merge,
    void_after,
)
from core.control.moves import legal_move
from core.control.overtaken import RULED_AGAIN, ruled_again_when_overtaken
from core.control.queries import Queries
from core.control.rulings import RULES
from core.control.task_book import ControlTaskBook
from core.control.verb_rules import (
    Ruling,
)
from core.domain.clock import Clock, system_clock
from core.domain.decisions import Decision
from core.domain.events import (
    Event,
    EventBus,
    TaskUpdated,
    WorktreeCleaned,
)
from core.domain.evidence import MergeEvidence
from core.domain.models import (
    NewRun,
    NewTask,
    Project,
    Run,
    Task,
    TaskState,
    TaskType,
)
from core.domain.states import STAGE_ROLE
from core.domain.verbs import Verb
from core.ports import STORE_PATIENCE_S, CheckRunner, DecisionWrite, Operations, Store
from core.ports.task_book import Move
from core.workspace.git import default_branch, one_line_log
from core.workspace.merge_preview import MergePreview, preview_merge

if TYPE_CHECKING:
    from core.control.audit import AuditLog, AuditWriter
    from core.control.keyring import Keyring
    from core.ports.forge import ForgeOpener
    from core.workspace.trial_merge import TrialMerge
    from core.workspace.worktrees import Workspace, Worktrees


class ControlPlane(
    Queries, ControlTaskBook, MergeDecisions, ForgeMerges, DecisionsByName, Operations
):
    """The store, the event bus, the audit log and the clock of one T25 installation."""

    def __init__(
        self,
        config: Config,
        store: Store,
        bus: EventBus | None = None,
        *,
        clock: Clock = system_clock,
        run_check: CheckRunner | None = None,
    ) -> None:
        self.clock = clock
        self.run_check = run_check  # QA's checks, run on a merge's result before it lands
        super().__init__(config, store, self._open_audit_log)
        self.bus = bus or EventBus()
        # Runs going on in this process, by task: cancel stops them at once.
        self.live: dict[str, asyncio.Event] = {}
        # Set whenever a run is queued, so in-process workers wake without polling.
        self.work_queued = asyncio.Event()
        self._config_file = ConfigFile(config)  # read again at each decision
        self.store_patience_s = STORE_PATIENCE_S  # a landed merge waits this long to be recorded
        self.forges: ForgeOpener | None = None  # how `merge.via: forge` reaches the forge

    def _open_audit_log(self) -> AuditLog:
        from core.control.audit import AuditLog, log_path

        return AuditLog(log_path(self.config.root), self.store, clock=self.clock, keys=self.keys)

    @functools.cached_property
    def keys(self) -> Keyring:
        """The installation's sealing key (core.control.keyring), made on first use."""
        from core.control.keyring import KEY_FILE, Keyring

        return Keyring.open(self.config.audit.key_file or self.config.root / KEY_FILE)

    # The workspace is made, and the worktree machinery imported, when a run or a cleanup
    # first needs it: a command that only reads (`t25 task list`) never does.
    @functools.cached_property
    def workspace(self) -> Workspace:
        from core.workspace import ownership, worktrees

        return worktrees.Workspace(self.config, owner=ownership.owner_of(self.store.url))

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

    # -- the one way a state changes ---------------------------------------------------------

    async def record(self, event: Event) -> Event:
        """Stamp an event with this control plane's clock, persist it, then publish it."""
        stored = await self.store.append_event(event.model_copy(update={"at": self.clock()}))
        self.bus.publish(stored)
        return stored

    async def transition(
        self,
        task: Task,
        to: TaskState,
        *,
        actor: str,
        reason: str = "",
        facts: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Task:
        """Check the table, compare-and-set from `task.state`, record TaskTransitioned (with
        `facts` besides the fields it sets, sealed: core.control.history)."""
        event, fields = legal_move(
            task, to, actor=actor, reason=reason, fields=fields, keys=self.keys, at=self.clock(),
            facts=facts,
        )  # fmt: skip
        updated, stored = await self.store.apply_transition(task.id, task.state, event, fields)
        self.bus.publish(stored)
        return updated

    async def update(self, task: Task, *, actor: str, **fields: Any) -> Task:
        """Change non-state fields of a task still in the state it was read in."""
        event = TaskUpdated(at=self.clock(), task_id=task.id, fields=fields, actor=actor)
        updated, stored = await self.store.update_task(task.id, task.state, fields, event)
        self.bus.publish(stored)
        return updated

    async def enqueue(self, task: Task, role: str | None = None) -> Run:
        """Queue the run that works the task's current stage, only while the task is still
        in it (StaleState if it moved since `task` was read; the stage's live run, if it
        has one)."""
        new = NewRun(
            task_id=task.id,
            stage=task.state,
            role=role or STAGE_ROLE[task.state],
            while_in_stage=True,
        )
        run, event = await self.store.enqueue_run(new)
        self.bus.publish(event)
        self.work_queued.set()
        return run

    async def enter(
        self,
        task: Task,
        stage: TaskState,
        *,
        actor: str,
        reason: str = "",
        facts: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Task:
        """Move into a working stage and queue its run, in one store write (no task is left
        in a stage whose run was never queued, nor a run queued twice). A task whose budget,
        or whose budget for the stage's role, is spent waits for a human instead, before that
        run (`_budget_spent`)."""
        return await self.move(
            task, Move(stage, reason=reason, facts=facts, fields=fields, actor=actor)
        )

    async def merge_evidence(self, ref: str) -> MergeEvidence:
        """The store's evidence, with the commits the merge would take and the default
        branch, from git where this process has the checkout with the task's branch."""
        found = await super().merge_evidence(ref)
        task = await self.task(ref)
        history = await sealed_history(self.store, self.keys, task)
        if found.refusal is None and (sealed := merge_blocker(task, history)):
            found = found.model_copy(update={"refusal": sealed})
        found = found.model_copy(update={"approved_head": history.approved_head})
        if not await self._holds(task):
            return found
        worktrees = self.worktrees(task.project)
        head = task.reviewed_head or f"refs/heads/{task.branch}"
        commits = await one_line_log(worktrees.repo, f"refs/heads/{worktrees.default_branch}", head)
        unreviewed: tuple[str, ...] = ()
        if history.approved_head and task.reviewed_head != history.approved_head:
            unreviewed = await one_line_log(worktrees.repo, history.approved_head, head)
        tried = MergePreview() if found.refusal else await preview_merge(worktrees, task)
        return found.model_copy(
            update={
                "default_branch": worktrees.default_branch,
                "commits": commits,
                "unreviewed": unreviewed,
                "diff_stat": await worktrees.changes.diff_stat(task),
                "refusal": found.refusal or tried.refusal,
                "made_as": tried.made_as,
            }
        )

    async def new_task(
        self,
        title: str,
        *,
        actor: str,
        type: TaskType = TaskType.FEAT,
        description: str = "",
        project: str | None = None,
        request_key: str | None = None,
        priority: int = 0,
        after: Sequence[str] = (),
    ) -> Task:
        """File a task. The title and description are checked here, the one door every
        face (command line, cockpit, REST) comes through: bounded, no control characters,
        the title on one line (`core.domain.text`). Filed again under the same
        `request_key`, the task filed the first time is returned and nothing is written."""
        from core.domain import text

        title, description = text.title(title), text.description(description)
        name = self.config.project(project).name
        valid_priority(priority)
        waits = tuple(dict.fromkeys([(await self.task(ref)).id for ref in after]))
        task, event = await self.store.create_task(
            NewTask(
                project=name,
                title=title,
                type=type,
                description=description,
                request_key=request_key,
                priority=priority,
                after=waits,
            ),
            actor=actor,
        )
        self.bus.publish(event)
        return task

    # -- operator decisions ------------------------------------------------------------------

    def reread_config(self) -> Reread | None:
        """Take t25.yaml's changes that apply at once (core.config.live); what was found,
        or None when it did not change."""
        found = self._config_file.reread(self.config)
        if found is not None:
            self.config = found.config
        return found

    @property
    def config_notice(self) -> str | None:
        """What the last reading of a changed t25.yaml found, for a status line."""
        return self._config_file.notice

    async def decide(self, decision: Decision) -> Task:
        """The one way in for an operator decision, whichever face it comes from.

        A decision runs to its end even when its caller is cancelled (a cockpit closing, a
        dropped connection): a state change is never left without its audit line, nor an
        audit line without its effect or its void."""
        checked = at_the_door(decision)
        self.reread_config()
        decided = await asyncio.shield(self._decide(checked))
        if isinstance(decided, Run):  # a merge a worker makes: wait for its result
            return await self.merge_result(decided)
        return decided

    async def _decide(self, decision: Decision) -> Task | Run:
        """While this holds the audit log's writer (one decider at a time, in every process
        on this log and this store), the task is read afresh and ruled on: a refusal writes
        nothing. The line is then made durable (AuditError, nothing changed, if it cannot
        be), and only then does the decision change the task. An effect that fails — a
        worker moved the task meanwhile, a store fault, a merge git refused — is followed
        in the log by a void line saying so and why, and its error goes to the caller (a
        task the pipeline moved on meanwhile is ruled again first: core.control.overtaken).

        A merge is tried first, outside the log (its checks may take minutes, and no other
        decider waits on them): made on no branch, checked, then landed under the writer.
        Where this process has no checkout of the task's repository, the merge is a run a
        worker with one makes (`merge_by_worker`): that run is returned."""
        if decision.verb is Verb.MERGE and self.config.merge.via == "forge":
            return await self.merge_by_forge(decision)
        tried = await self.trial_merge(decision) if decision.verb is Verb.MERGE else None
        if decision.verb is Verb.MERGE and tried is None:
            return await self.merge_by_worker(decision)
        trial = tried[1] if tried else None
        try:
            async with self.audit.writer() as log:

                async def decide(task: Task) -> tuple[Ruling, DecisionWrite, Task, list[Event]]:
                    ruling = await self._rule(task, decision, trial)
                    write = decision_write(task, decision, ruling, at=self.clock(), keys=self.keys)
                    task, events = await self._apply(log, task, decision, ruling, write)
                    return ruling, write, task, events

                ruling, write, task, events = await ruled_again_when_overtaken(
                    lambda: self.task(decision.task),
                    decide,
                    again=0 if tried else RULED_AGAIN,  # a trial merge is of the task it read
                )
        finally:
            if tried is not None:
                worktrees, trial = tried
                await worktrees.merges.discard(trial)
        if ruling.merge is not None and task.merged:  # its trial's figures: the default branch's
            merge = ruling.merge
            kept = await baselines.keep(self.store, task, merge.commit, merge.checks)
            events += [kept] if kept else []
            worktrees = self.worktrees(task.project)
            events.append(await landed(self.store, worktrees, task, merge.commit, self.clock))
        for event in events:  # the announcement before the run it queued: its prompt reads it
            self.bus.publish(event)
        if write.enqueue is not None:
            self.work_queued.set()
        if ruling.cancel_runs and task.id in self.live:
            self.live[task.id].set()  # stop this process's agent now; others see a stale lease
        if ruling.cleans:
            await self._clean(task)
        return task

    async def _apply(
        self,
        log: AuditWriter,
        task: Task,
        decision: Decision,
        ruling: Ruling,
        write: DecisionWrite,
    ) -> tuple[Task, list[Event]]:
        """Record the decision's line, then apply `write` with its anchor in one transaction
        (a merge: anchored first, git, then the store: core.control.merge_record)."""
        line = AuditLine(
            actor=decision.actor,
            task=task.id,
            decision=decision.verb.value,
            reason=ruling.reason(decision),
            bound_to=ruling.bound_to,
        )
        if ruling.merge:
            worktrees = self.worktrees(task.project)
            return await apply_merge(
                log, self.audit, self.store, worktrees, write, ruling.merge, line,
                patience_s=self.store_patience_s,
            )  # fmt: skip
        entry = await line.to(log, anchored_now=False)
        write = log.with_line(write, entry)  # its anchor (and, where the store keeps it, the line)
        try:
            applied = await self.store.apply_decision(write)
        except Exception as exc:
            if write.anchor is not None and await log.landed(entry):
                return await self.task(task.id), []  # it committed; only the reply was lost
            await void_after(log, entry, exc)
            raise
        if write.anchor is not None:
            log.anchored(entry)
        return applied

    async def _rule(
        self, task: Task, decision: Decision, trial: TrialMerge | None = None
    ) -> Ruling:
        """What the decision does to the task as it is now (its verb's rule,
        core.control.rulings); PolicyRefused if it does not fit. A merge lands `trial`, the
        merge tried for it."""
        return await RULES[decision.verb](self, task, decision, trial)

    async def _clean(self, task: Task) -> None:
        """Remove a finished task's worktree, or record why it was kept (never forced)."""
        done = await self.worktrees(task.project).cleanup(task)
        await self.record(
            WorktreeCleaned(task_id=task.id, removed=done.removed, reason=done.reason)
        )
