"""The port between the pipeline and the control plane it decides for (core.control.pipeline).

What code decides about a finished run needs the task's record — its runs, events and
artifacts, the project's baseline, the configuration in force — and a few writes: the run's
completion with its own artifacts, each move of the task with what the decision kept, a
run queued, a worker's merge settled. The pipeline holds this port, never the store:
whatever it writes goes through the control plane's clock, event bus and budget. The
control plane implements it (core.control.task_book).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.config.live import Reread
from core.config.schema import Config
from core.domain.decisions import Decision
from core.domain.events import Event
from core.domain.figures import Baseline
from core.domain.models import Artifact, CheckResult, Lease, Run, RunOutcome, Task, TaskState
from core.ports.store import NewArtifact

T25 = "t25"  # the actor of every decision code makes


@dataclass(frozen=True)
class Move:
    """One write of code's decision on a run, one store transaction: the task into `to` (a
    working stage with its run queued, unless its budget is spent: then it waits in
    NEEDS_INPUT), or its fields only (`to` None); with the artifacts the decision kept and
    the events that follow the change (a question asked, an approval requested)."""

    to: TaskState | None
    reason: str = ""
    facts: Mapping[str, Any] | None = None  # sealed with the transition (core.control.history)
    fields: Mapping[str, Any] = field(default_factory=dict)
    kept: tuple[NewArtifact, ...] = ()
    then: tuple[Event, ...] = ()
    actor: str = T25


class TaskBook(Protocol):
    """What the pipeline asks of the control plane: a task's record, and its writes."""

    config: Config  # the configuration in force

    def reread_config(self) -> Reread | None:
        """Take t25.yaml's changes that apply at once (core.config.live)."""
        ...

    # -- the task's record --------------------------------------------------------------------

    async def find_task(self, task_id: str) -> Task | None: ...
    async def find_run(self, run_id: str) -> Run | None: ...

    async def task_runs(self, task_id: str) -> list[Run]:
        """The task's runs, oldest first."""
        ...

    async def task_events_of(self, task_id: str, *kinds: type[Event]) -> list[Any]:
        """The task's events of these kinds, in id order: never its agents' output, which
        is read to find none of them."""
        ...

    async def task_artifacts(self, task_id: str) -> list[Artifact]:
        """The task's artifacts, oldest first (without their content)."""
        ...

    async def artifact(self, ref: str) -> tuple[Artifact, bytes]:
        """An artifact with its content, verified against its SHA-256."""
        ...

    async def baseline(self, project: str) -> Baseline | None:
        """The figures of the project's default branch, kept by its newest checked merge."""
        ...

    # -- the writes ---------------------------------------------------------------------------

    async def record_run(
        self, lease: Lease, outcome: RunOutcome, kept: Sequence[NewArtifact]
    ) -> Run:
        """Finish the run under its lease with its own artifacts, in one store transaction
        (LeaseLost, nothing written, when the lease no longer holds)."""
        ...

    async def move(self, task: Task, move: Move) -> Task:
        """Write `move` by compare-and-set from `task.state` (StaleState if it moved)."""
        ...

    async def keep(self, kept: Sequence[NewArtifact]) -> None:
        """Keep artifacts with no move of the task to carry them."""
        ...

    async def enqueue(self, task: Task, role: str | None = None) -> Run:
        """Queue a run of the task's current stage (another role's: `role`)."""
        ...

    async def merge_finished(self, run: Run, commit: str | None, *, error: str | None) -> Task:
        """A worker's merge run ended: landed at `commit`, or refused for `error`."""
        ...

    async def keep_baseline(
        self, task: Task, commit: str, checks: Sequence[CheckResult], *, run_id: str
    ) -> None:
        """Keep the figures of `checks`, run on the merge `commit` that `run_id` landed (once)."""
        ...

    async def decide(self, decision: Decision) -> Task:
        """Make a decision as an operator would — checked, written in the audit log, then
        applied: what someone said to T25 on the forge (a `note`, under their login)."""
        ...
