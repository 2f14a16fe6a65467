"""The Postgres store's reads of many tasks: a page of them, how many each state holds, what
their runs cost (migration 0018; summed in groups, one scan of the runs), and a run's newest
events (0019) — each one statement."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from core.domain.cost import CostGroup, TaskCost
from core.domain.events import Event
from core.domain.evidence import PastCosts
from core.domain.models import MAX_ID, Artifact, ArtifactKind, Task, TaskState, format_id, parse_id
from store import postgres_sql as sql
from store import rows, shared_sql
from store.postgres_writes import ROWS

if TYPE_CHECKING:
    from asyncpg import Record


class PostgresTaskReads:
    """`list_tasks`, `count_tasks`, `has_active_runs`, `cost_by_task`, `tokens_by_task`,
    `cost_groups`,
    `costliest_tasks`, `past_costs`,
    `newest_artifact` and `run_events_before`, for `store.postgres.PostgresStore`."""

    if TYPE_CHECKING:

        async def _fetch(self, statement: str, *args: Any) -> list[Record]: ...

    async def list_tasks(
        self,
        *,
        states: list[TaskState] | None = None,
        project: str | None = None,
        include_archived: bool = False,
        merged: bool | None = None,
        after: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        without_active_runs: bool = False,
    ) -> list[Task]:
        if states is not None and not states:
            return []
        wanted = None if states is None else [TaskState(s).value for s in states]
        where, args = sql.tasks_where(wanted, project, include_archived, merged)
        if without_active_runs:
            where += f" AND {shared_sql.NO_ACTIVE_RUN}"
        statement, args = sql.list_tasks(
            where,
            args,
            after=rows.number_or_none("T", after),
            limit=limit,
            newest_first=newest_first,
        )
        return [ROWS.task(r) for r in await self._fetch(statement, *args)]

    async def count_tasks(
        self,
        *,
        states: list[TaskState] | None = None,
        project: str | None = None,
        include_archived: bool = False,
        merged: bool | None = None,
    ) -> dict[TaskState, int]:
        if states is not None and not states:
            return {}
        wanted = None if states is None else [TaskState(s).value for s in states]
        where, args = sql.tasks_where(wanted, project, include_archived, merged)
        found = await self._fetch(sql.count_tasks(where), *args)
        return {TaskState(r["state"]): r["n"] for r in found}

    async def has_active_runs(self) -> bool:
        return bool((await self._fetch(shared_sql.HAS_ACTIVE_RUNS))[0][0])

    async def cost_by_task(self, task_ids: Sequence[str] | None = None) -> dict[str, float]:
        numbers = None if task_ids is None else [parse_id("T", t) for t in task_ids]
        costs = await self._fetch(sql.COST_BY_TASK, numbers)
        return {format_id("T", r["task_id"]): float(r["cost"]) for r in costs}

    async def tokens_by_task(self, task_ids: Sequence[str]) -> dict[str, int]:
        found = await self._fetch(sql.TOKENS_BY_TASK, [parse_id("T", t) for t in task_ids])
        return {format_id("T", r["task_id"]): int(r["tokens"]) for r in found}

    async def cost_groups(self, *, since: datetime | None = None) -> list[CostGroup]:
        if since is None:
            found = await self._fetch(sql.COST_GROUPS)
        else:
            found = await self._fetch(sql.COST_GROUPS_SINCE, since)
        return [rows.cost_group(r) for r in found]

    async def costliest_tasks(self, limit: int) -> list[TaskCost]:
        return [rows.task_cost(r) for r in await self._fetch(sql.COSTLIEST_TASKS, limit)]

    async def past_costs(
        self, *, project: str, roles: Mapping[str, str | None]
    ) -> dict[str, PastCosts]:
        found = await self._fetch(sql.PAST_COSTS, project, rows.wanted_roles(roles))
        return {r["role"]: rows.past_costs(r) for r in found}

    async def newest_artifact(self, kind: ArtifactKind, *, project: str) -> Artifact | None:
        found = await self._fetch(sql.NEWEST_ARTIFACT, ArtifactKind(kind).value, project)
        return ROWS.artifact(found[0]) if found else None

    async def run_events_before(
        self, run_id: str, *, before: int | None = None, limit: int = 500
    ) -> list[Event]:
        run = parse_id("R", run_id)
        newest = MAX_ID if before is None else before
        found = await self._fetch(sql.RUN_EVENTS_BEFORE, run, newest, limit)
        return [ROWS.event(r) for r in reversed(found)]
