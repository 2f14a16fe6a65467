"""The control plane's reads: one answer to each question a face asks, for every face.

`t25 task show`, `GET /tasks/{id}` and the cockpit's detail screen all read a task's
detail here, as the lists, an artifact, a task's events, cost and the audit trail are
read here; REST serves these answers as they are, and the remote cockpit turns them back
into the same values. Ids are taken as a person types them (`T-7`, `t7`, `7`); one that
names nothing is NotFound, with a hint.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from core.config.schema import Config
from core.control.cost import summarize
from core.control.spending import Spending
from core.control.task_events import EVERY_EVENT, events_of_kinds
from core.domain.audit import AuditTrail
from core.domain.detail import DamagedArtifact, TaskDetail
from core.domain.diffs import TaskDiff
from core.domain.events import (
    DecisionRecorded,
    Event,
    InputRequested,
    RunOutput,
    TaskTransitioned,
)
from core.domain.evidence import ApprovalEvidence, MergeEvidence
from core.domain.figures import Baseline
from core.domain.models import (
    Artifact,
    CheckResult,
    Run,
    RunStatus,
    Task,
    TaskState,
    artifact_id,
    run_id,
    task_id,
)
from core.domain.network import NETWORK_STREAM, tally
from core.domain.text import printable
from core.errors import ArtifactCorrupted, ConfigError, NotFound
from core.ports import Store

if TYPE_CHECKING:
    from core.control.audit import AuditLog


class Queries(Spending):
    """The reads of one T25 installation, over its store and its audit log."""

    def __init__(self, config: Config, store: Store, audit: Callable[[], AuditLog]) -> None:
        self.config = config
        self.store = store
        self._open_audit = audit

    @functools.cached_property
    def audit(self) -> AuditLog:
        """The audit log, opened (and its module imported) when first used: a command that
        only lists tasks never needs it."""
        return self._open_audit()

    async def last_event_id(self) -> int:
        return await self.store.last_event_id()

    async def task(self, ref: str) -> Task:
        tid = task_id(ref)
        found = await self.store.get_task(tid)
        if found is None:
            raise NotFound(f"no task {tid}", hint="`t25 task list` shows the tasks")
        return found

    async def tasks(
        self,
        *,
        states: Sequence[TaskState] | None = None,
        project: str | None = None,
        archived: bool = False,
        merged: bool | None = None,
        after: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Task]:
        if project is not None:
            await self._known_project(project)
        return await self.store.list_tasks(
            states=None if states is None else list(states),
            project=project,
            include_archived=archived,
            merged=merged,
            after=None if after is None else task_id(after),
            limit=limit,
            newest_first=newest_first,
        )

    async def task_counts(
        self,
        *,
        states: Sequence[TaskState] | None = None,
        project: str | None = None,
        archived: bool = False,
        merged: bool | None = None,
    ) -> dict[TaskState, int]:
        if project is not None:
            await self._known_project(project)
        return await self.store.count_tasks(
            states=None if states is None else list(states),
            project=project,
            include_archived=archived,
            merged=merged,
        )

    async def detail(self, ref: str, *, verify: bool = False) -> TaskDetail:
        task = await self.task(ref)
        history = await self._of_kinds(task.id, TaskTransitioned, DecisionRecorded)
        asked = [e.question for e in await self._of_kinds(task.id, InputRequested)]
        network = await self.store.events_after(
            0, task_id=task.id, kind=RunOutput.kind, stream=NETWORK_STREAM, limit=EVERY_EVENT
        )
        runs = await self.store.list_runs(task_id=task.id)
        artifacts = await self.store.list_artifacts(task_id=task.id)
        checks, baseline = await self._checks(task)
        return TaskDetail(
            task=task,
            history=history,
            runs=runs,
            artifacts=artifacts,
            cost=summarize(runs),
            spend=self.spend_of(task, runs),
            question=asked[-1] if asked else None,
            blockers=await self.blockers(task) if task.state is TaskState.RECEIVED else (),
            damaged=[d for a in artifacts if (d := await self._damage(a))] if verify else [],
            network=tally(
                (e.run_id or "", e.text)
                for e in network
                if isinstance(e, RunOutput) and e.stream == NETWORK_STREAM
            ),
            checks=checks,
            baseline=baseline,
        )

    async def _of_kinds(self, task_id: str, *kinds: type[Event]) -> list[Any]:
        """The task's events of these kinds, in id order: each kind one indexed read (0018),
        so its agents' output, however long, is never read to find them."""
        return await events_of_kinds(self.store, task_id, *kinds)

    async def _checks(self, task: Task) -> tuple[tuple[CheckResult, ...], Baseline | None]:
        """The checks of the task's last QA beside the default branch's figures; none when
        its QA report no longer matches its SHA-256 (`damaged` names it)."""
        from core.control import evidence  # its policies: only for a task's detail

        try:
            return await evidence.checks_of(self, task)
        except ArtifactCorrupted:
            return (), None

    async def approval_evidence(self, ref: str) -> ApprovalEvidence:
        """What an approval of the task's plan is decided on (core.domain.evidence)."""
        from core.control import evidence

        return await evidence.approval(self, await self.task(ref))

    async def merge_evidence(self, ref: str) -> MergeEvidence:
        """What a merge of the task would take (core.domain.evidence)."""
        from core.control import evidence

        return await evidence.merge(self, await self.task(ref))

    async def blockers(self, task: Task) -> tuple[str, ...]:
        """The tasks `task` waits for (`after`) that are not merged yet: until there are
        none, it stays in RECEIVED."""
        waiting = []
        for ref in task.after:
            other = await self.store.get_task(ref)
            if other is None or not other.merged:
                waiting.append(ref)
        return tuple(waiting)

    async def events(self, ref: str, *, after: int = 0, limit: int = 1000) -> list[Event]:
        task = await self.task(ref)
        return await self.store.events_after(after, task_id=task.id, limit=limit)

    async def run_events(
        self, ref: str, *, before: int | None = None, limit: int = 500
    ) -> list[Event]:
        return await self.store.run_events_before(run_id(ref), before=before, limit=limit)

    async def decisions(self, ref: str) -> list[DecisionRecorded]:
        """The decisions that took effect on a task, oldest first (what its prompts quote)."""
        return await self._of_kinds(ref, DecisionRecorded)

    async def run(self, ref: str) -> Run:
        rid = run_id(ref)
        found = await self.store.get_run(rid)
        if found is None:
            raise NotFound(f"no run {rid}", hint="`t25 task show ID` lists a task's runs")
        return found

    async def runs(self, *, task: str | None = None, status: RunStatus | None = None) -> list[Run]:
        return await self.store.list_runs(task_id=task_id(task) if task else None, status=status)

    async def artifacts(self, *, task: str | None = None) -> list[Artifact]:
        return await self.store.list_artifacts(task_id=task_id(task) if task else None)

    async def artifact(self, ref: str) -> tuple[Artifact, bytes]:
        return await self.store.get_artifact(artifact_id(ref))

    async def diff(self, ref: str, *, attempt: int | None = None, stat: bool = False) -> TaskDiff:
        from core.control.diffs import read_diff  # git is asked only when a diff is

        found = await read_diff(self.config, self.store, await self.task(ref), attempt)
        return found.stat_only() if stat else found

    async def artifact_chunks(self, ref: str) -> AsyncIterator[bytes]:
        _, chunks = await self.store.stream_artifact(artifact_id(ref))
        async for chunk in chunks:
            yield chunk

    async def audit_trail(
        self, *, task: str | None = None, after: int = 0, limit: int | None = None
    ) -> AuditTrail:
        return await self.audit.trail(
            task=task_id(task) if task else None, after=after, limit=limit
        )

    async def audit_disagreements(self) -> list[str]:
        from core.control import audit_cross as cross  # only `t25 audit verify` asks

        log = self.audit
        lines = cross.chain_lines(log.chain) if log.chain else cross.file_lines(log.path)
        return await cross.disagreements(lines, cross.recorded(self.store))

    async def _known_project(self, name: str) -> None:
        """A project the store knows (the configured ones, and any that still has tasks)."""
        known = sorted(
            {p.name for p in await self.store.list_projects()}
            | {p.name for p in self.config.projects}
        )
        if name not in known:
            raise ConfigError(
                f"unknown project {printable(name)!r} (known: {', '.join(known)})",
                hint=f"projects are listed under `projects:` in {self.config.path}",
            )

    async def _damage(self, artifact: Artifact) -> DamagedArtifact | None:
        """Why an artifact's stored content cannot be trusted, or None when it re-hashes right."""
        try:
            _, chunks = await self.store.stream_artifact(artifact.id)  # a log is never held
            async for _ in chunks:
                pass
        except ArtifactCorrupted as exc:
            return DamagedArtifact(id=artifact.id, error=exc.message, hint=exc.hint)
        return None
