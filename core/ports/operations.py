"""The port every face calls: what the command line, the cockpit and REST ask of T25.

Two implementations, one contract, checked by the type checker (each declares
`Operations` as its base):

    ControlPlane        core.control.service: the control plane of this process, on its store
    RemoteControlPlane  t25_tui.api.cockpit_client: a `t25 serve` elsewhere, over REST and SSE

A face holds an `Operations` and nothing more specific, so a cockpit cannot tell a local
control plane from a remote one, and a check, an audit line or a read can live in one
place only. Reads go through the control plane's query service (core.control.queries);
every operator decision is a `Decision` handed to `decide`.

The surface is exactly what the faces use: the configuration and the event bus (the
cockpit's live board), one task and its detail, the lists, an artifact's content, a
task's events (its history and its agents' output), its diff, cost, the audit trail, and the two
writes an operator makes, filing a task and deciding on one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Protocol

from core.config.live import Reread
from core.config.schema import Config
from core.domain.audit import AuditTrail
from core.domain.cost import COSTLIEST, CostSummary, TaskCost
from core.domain.decisions import Decision
from core.domain.detail import TaskDetail
from core.domain.diffs import TaskDiff
from core.domain.events import Event, EventBus
from core.domain.evidence import ApprovalEvidence, MergeEvidence
from core.domain.models import Artifact, Run, RunStatus, Task, TaskState, TaskType


class Operations(Protocol):
    """What a face may ask: reads, filing a task, and decisions. All methods are coroutines."""

    config: Config  # t25.yaml as the control plane validated it
    bus: EventBus  # every event the control plane records, as it records it

    def reread_config(self) -> Reread | None:
        """t25.yaml's changes taken where this process decides (core.config.live): what was
        found, or None when it did not change or another process decides."""
        ...

    # -- reads ------------------------------------------------------------------------------
    async def last_event_id(self) -> int:
        """The newest event id: a reader that has seen it has missed nothing before it."""
        ...

    async def task(self, ref: str) -> Task:
        """One task (`T-7`, `t7` or `7`); NotFound if there is none."""
        ...

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
        """Tasks by id, of some states or one project, merged or not; archived ones only
        when asked. Oldest first, or newest first; `after` a task's id: the list goes on
        past it in that order; at most `limit` of them."""
        ...

    async def task_counts(
        self,
        *,
        states: Sequence[TaskState] | None = None,
        project: str | None = None,
        archived: bool = False,
        merged: bool | None = None,
    ) -> dict[TaskState, int]:
        """How many of the tasks `tasks` would give each state holds (a state with none
        is left out)."""
        ...

    async def detail(self, ref: str, *, verify: bool = False) -> TaskDetail:
        """A task with its history, runs, artifacts and cost; `verify` re-hashes every
        artifact and names the damaged ones."""
        ...

    async def events(self, ref: str, *, after: int = 0, limit: int = 1000) -> list[Event]:
        """One task's events after `after`, oldest first, at most `limit` (5000 at most
        over REST: page by the last id)."""
        ...

    async def run_events(
        self, ref: str, *, before: int | None = None, limit: int = 500
    ) -> list[Event]:
        """One run's newest events below id `before` (its newest with None), oldest first,
        at most `limit` (5000 at most over REST): a run read from its end, page by page."""
        ...

    async def run(self, ref: str) -> Run: ...

    async def runs(
        self, *, task: str | None = None, status: RunStatus | None = None
    ) -> list[Run]: ...

    async def artifacts(self, *, task: str | None = None) -> list[Artifact]: ...

    async def artifact(self, ref: str) -> tuple[Artifact, bytes]:
        """An artifact and its content, verified against its SHA-256 (ArtifactCorrupted)."""
        ...

    async def diff(self, ref: str, *, attempt: int | None = None, stat: bool = False) -> TaskDiff:
        """The task's whole change against the default branch, or implementing attempt
        `attempt`'s (1 the first); with `stat`, its files and line counts but no text."""
        ...

    def artifact_chunks(self, ref: str) -> AsyncIterator[bytes]:
        """An artifact's content a chunk at a time, never held whole (a run's log): re-hashed
        as it streams, ArtifactCorrupted after the last chunk when it does not match."""
        ...

    async def cost(self, *, since: datetime | None = None) -> CostSummary:
        """Every run's estimated cost, in total and by role, adapter, model and stage; with
        `since`, of the runs that finished (or, not finished, were queued) at or after it."""
        ...

    async def costliest_tasks(self, limit: int = COSTLIEST) -> list[TaskCost]:
        """The `limit` tasks whose runs cost the most (1000 at most over REST)."""
        ...

    async def cost_by_task(self, tasks: Sequence[str] | None = None) -> dict[str, float]:
        """Each task's summed run cost, by task id (a task with no runs is absent), of
        every task or of `tasks`."""
        ...

    async def tokens_by_task(self, tasks: Sequence[str]) -> dict[str, int]:
        """Each of `tasks`' tokens, every kind its runs reported (a task with no runs is
        absent): what its token budget is held against."""
        ...

    async def audit_trail(
        self, *, task: str | None = None, after: int = 0, limit: int | None = None
    ) -> AuditTrail:
        """The audit log's entries after line `after` (one task's, when given; at most
        `limit`, with `next` the cursor to read on) and the whole chain's verdict."""
        ...

    async def audit_disagreements(self) -> list[str]:
        """What the audit log and the store disagree on: each line whose decision left no
        effect, and each decision in the store no line records (core.control.audit_cross)."""
        ...

    # -- writes -----------------------------------------------------------------------------
    async def approval_evidence(self, ref: str) -> ApprovalEvidence:
        """The spec, the plan and its SHA-256, earlier rejections and answers, and an
        estimate of what the stages left will cost."""
        ...

    async def merge_evidence(self, ref: str) -> MergeEvidence:
        """The reviewed head, the commits (where the checkout is here) and diff stat, the QA
        checks, the review rounds, the protected paths, and why a merge would be refused."""
        ...

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
        """File a task; its title and description are checked at this door. Filed again
        under the same `request_key` (a retry after a lost reply): the task filed first.
        `priority` orders the queue (higher first); `after` names tasks it waits for: it
        starts once each is merged."""
        ...

    async def decide(self, decision: Decision) -> Task:
        """Check a decision against the task as it is now, record it, apply it; the task
        as it became. PolicyRefused (nothing recorded) when it does not fit."""
        ...
