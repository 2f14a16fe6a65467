"""A task's detail: everything the command line, the cockpit and REST show about one task.

`core.control.queries` builds it once for every face (`t25 task show`, `GET /tasks/{id}`,
the cockpit's detail screen), so the three cannot drift apart.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from core.domain.cost import CostSummary, Spend
from core.domain.events import DecisionRecorded, TaskTransitioned
from core.domain.figures import Baseline
from core.domain.models import Artifact, CheckResult, Run, Task
from core.domain.network import ConnectionTally

# What a person reads as the task's history: its state changes and the decisions on it.
# (Its agents' output is its log, read page by page: see Operations.events.)
HistoryEvent = TaskTransitioned | DecisionRecorded


class DamagedArtifact(BaseModel):
    """An artifact whose stored content no longer matches its SHA-256."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: str
    error: str
    hint: str | None = None


class TaskDetail(BaseModel):
    """One task, its history, runs, artifacts and cost, read together."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    task: Task
    history: list[HistoryEvent] = []
    runs: list[Run] = []
    artifacts: list[Artifact] = []
    cost: CostSummary = Field(default_factory=CostSummary)
    spend: Spend = Field(default_factory=Spend)  # against the task's budget
    # The question a task asked a human, the newest one (NEEDS_INPUT shows it).
    question: str | None = None
    # The tasks it names in `after` that are not merged yet: while any is left, it waits in
    # RECEIVED (empty once it has started).
    blockers: tuple[str, ...] = ()
    # Filled only when the reader asked for the artifacts to be re-hashed (`verify`).
    damaged: list[DamagedArtifact] = []
    # What its runs asked of the network, as T25's proxy decided (network: allowlist).
    network: list[ConnectionTally] = []
    # The checks of its last QA, and the default branch's test figures to show them beside.
    checks: tuple[CheckResult, ...] = ()
    baseline: Baseline | None = None
