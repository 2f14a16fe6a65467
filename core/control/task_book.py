"""The control plane's side of the pipeline's port (core.ports.task_book.TaskBook).

A task's record read from the store, and the writes of a run's completion and of the
decision on it, each one store transaction (Store.complete_run_keeping, Store.move_task),
stamped with the control plane's clock, published on its bus, and a move into a working
stage held to the task's budget. `ControlPlane` is this, with everything else it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from core.control import baselines
from core.control.moves import legal_move
from core.control.task_events import events_of_kinds
from core.control.verb_rules import suggest, suggest_tokens
from core.domain.clock import Clock
from core.domain.cost import Spend
from core.domain.events import ArtifactStored, Event, EventBus, InputRequested, TaskUpdated
from core.domain.figures import Baseline
from core.domain.models import (
    Artifact,
    CheckResult,
    Lease,
    NewRun,
    Run,
    RunOutcome,
    Task,
    TaskState,
)
from core.domain.states import STAGE_ROLE
from core.ports.store import NewArtifact, Store, TaskMove
from core.ports.task_book import T25, Move

if TYPE_CHECKING:
    from core.config.schema import Config
    from core.control.keyring import Keyring


class ControlTaskBook:
    """`TaskBook` over the control plane's store, clock, bus and budget."""

    if TYPE_CHECKING:
        config: Config
        store: Store
        clock: Clock
        bus: EventBus
        work_queued: asyncio.Event

        @property
        def keys(self) -> Keyring: ...

        async def budget_reached(self, task: Task, role: str | None) -> Spend | None: ...

    # -- the task's record --------------------------------------------------------------------

    async def find_task(self, task_id: str) -> Task | None:
        return await self.store.get_task(task_id)

    async def find_run(self, run_id: str) -> Run | None:
        return await self.store.get_run(run_id)

    async def task_runs(self, task_id: str) -> list[Run]:
        return await self.store.list_runs(task_id=task_id)

    async def task_events_of(self, task_id: str, *kinds: type[Event]) -> list[Any]:
        """The task's events of these kinds, in id order, none of its agents' output."""
        return await events_of_kinds(self.store, task_id, *kinds)

    async def task_artifacts(self, task_id: str) -> list[Artifact]:
        return await self.store.list_artifacts(task_id=task_id)

    async def baseline(self, project: str) -> Baseline | None:
        return await baselines.latest(self.store, project)

    # -- the writes ---------------------------------------------------------------------------

    async def record_run(
        self, lease: Lease, outcome: RunOutcome, kept: Sequence[NewArtifact]
    ) -> Run:
        run, events = await self.store.complete_run_keeping(lease, outcome, kept)
        self._publish(events)
        return run

    async def move(self, task: Task, move: Move) -> Task:
        fields, enqueue = dict(move.fields), None
        if move.to in STAGE_ROLE:
            role = STAGE_ROLE[move.to]
            if move.to is not TaskState.PR_OPEN:
                spend = await self.budget_reached(task, role)
                if spend is not None:
                    return await self._budget_spent(
                        task, move.to, spend, move.reason, fields, move.facts, kept=move.kept
                    )
            enqueue = NewRun(task_id=task.id, stage=move.to, role=role)
        change: Event
        if move.to is None:
            change = TaskUpdated(at=self.clock(), task_id=task.id, fields=fields, actor=move.actor)
        else:
            change, fields = legal_move(
                task, move.to, actor=move.actor, reason=move.reason, fields=fields,
                keys=self.keys, at=self.clock(), facts=move.facts,
            )  # fmt: skip
        then = tuple(e.model_copy(update={"at": self.clock()}) for e in move.then)
        write = TaskMove(task.id, task.state, change, fields, enqueue, move.kept, then)
        updated, events = await self.store.move_task(write)
        self._publish(events)
        if enqueue is not None:
            self.work_queued.set()
        return updated

    async def keep(self, kept: Sequence[NewArtifact]) -> None:
        for one in kept:
            if isinstance(one.content, bytes):
                artifact = await self.store.put_artifact(one.content, one.meta)
            else:
                artifact = await self.store.put_artifact_file(one.content, one.meta)
            stored = ArtifactStored.of(artifact, at=self.clock())
            self.bus.publish(await self.store.append_event(stored))

    async def keep_baseline(
        self, task: Task, commit: str, checks: Sequence[CheckResult], *, run_id: str
    ) -> None:
        stored = await baselines.keep(self.store, task, commit, checks, run_id=run_id)
        if stored is not None:
            self.bus.publish(stored)

    async def _budget_spent(
        self,
        task: Task,
        stage: TaskState,
        spend: Spend,
        reason: str,
        fields: dict[str, Any],
        facts: Mapping[str, Any] | None = None,
        *,
        kept: Sequence[NewArtifact] = (),
    ) -> Task:
        """Wait in NEEDS_INPUT before `stage`'s run, with the spend so far; the answer that
        names a new budget sends the task on into `stage` (the fields it would have set
        set now). One store transaction, with the artifacts the decision `kept`."""
        whose = f"its {spend.role} budget (limits.by_role)" if spend.role else "its budget"
        question = (
            f"{task.id} has spent {spend.line()}: {whose} is reached before "
            f"{stage} ({STAGE_ROLE[stage]}){f', after: {reason}' if reason else ''}. Answer with "
            f'a new budget to go on (e.g. "budget ${suggest(spend.usd, spend.budget_usd)}" or '
            f'"budget {suggest_tokens(spend)} tokens"), or cancel it.'
        )
        event, changed = legal_move(
            task,
            TaskState.NEEDS_INPUT,
            actor=T25,
            reason=question,
            fields={**fields, "resume_state": stage},
            keys=self.keys,
            at=self.clock(),
            facts=facts,
        )
        asked = InputRequested(at=self.clock(), task_id=task.id, stage=stage, question=question)
        write = TaskMove(task.id, task.state, event, changed, kept=tuple(kept), then=(asked,))
        updated, events = await self.store.move_task(write)
        self._publish(events)
        return updated

    def _publish(self, events: Sequence[Event]) -> None:
        for event in events:
            self.bus.publish(event)
