"""The SQLite store's reads of many tasks: a page of them, how many each state holds, what
their runs cost (migration 0018; summed in groups, one scan of the runs), and a run's newest
events (0019) — each one statement."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from core.domain.cost import CostGroup, TaskCost
from core.domain.events import Event
from core.domain.evidence import PastCosts
from core.domain.models import MAX_ID, Artifact, ArtifactKind, Task, TaskState, format_id, parse_id
from store import rows, shared_sql
from store import sqlite_sql as sql
from store.sqlite_writes import ROWS, ts

if TYPE_CHECKING:
    import sqlite3


class SqliteTaskReads:
    """`list_tasks`, `count_tasks`, `has_active_runs`, `cost_by_task`, `tokens_by_task`,
    `cost_groups`,
    `costliest_tasks`, `past_costs`,
    `newest_artifact` and `run_events_before`, for `store.sqlite.SqliteStore`."""

    if TYPE_CHECKING:

        async def _read(
            self, statement: str, params: Sequence[Any] | Mapping[str, Any] = ()
        ) -> list[sqlite3.Row]: ...

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
        where, params = _tasks_where(states, project, include_archived, merged)
        if without_active_runs:
            where.append(shared_sql.NO_ACTIVE_RUN)
        if after is not None:
            where.append("id < ?" if newest_first else "id > ?")
            params.append(parse_id("T", after))
        statement = sql.LIST_TASKS.format(
            where=" AND ".join(where), order="DESC" if newest_first else "ASC"
        )
        found = await self._read(statement, [*params, -1 if limit is None else limit])
        return [ROWS.task(r) for r in found]

    async def count_tasks(
        self,
        *,
        states: list[TaskState] | None = None,
        project: str | None = None,
        include_archived: bool = False,
        merged: bool | None = None,
    ) -> dict[TaskState, int]:
        where, params = _tasks_where(states, project, include_archived, merged)
        found = await self._read(sql.COUNT_TASKS.format(where=" AND ".join(where)), params)
        return {TaskState(r["state"]): r["n"] for r in found}

    async def has_active_runs(self) -> bool:
        return bool((await self._read(shared_sql.HAS_ACTIVE_RUNS))[0]["active"])

    async def cost_by_task(self, task_ids: Sequence[str] | None = None) -> dict[str, float]:
        if task_ids is None:
            costs = await self._read(sql.COST_BY_TASK.format(where=""))
        else:
            numbers = [parse_id("T", t) for t in task_ids]
            # One parameter per id would meet SQLite's limit on parameters; a JSON array
            # is one, however many tasks the board shows.
            where = "WHERE task_id IN (SELECT value FROM json_each(?))"
            costs = await self._read(sql.COST_BY_TASK.format(where=where), [json.dumps(numbers)])
        return {format_id("T", r["task_id"]): float(r["cost"]) for r in costs}

    async def tokens_by_task(self, task_ids: Sequence[str]) -> dict[str, int]:
        numbers = json.dumps([parse_id("T", t) for t in task_ids])
        found = await self._read(sql.TOKENS_BY_TASK, [numbers])
        return {format_id("T", r["task_id"]): int(r["tokens"]) for r in found}

    async def cost_groups(self, *, since: datetime | None = None) -> list[CostGroup]:
        if since is None:
            found = await self._read(sql.COST_GROUPS)
        else:
            found = await self._read(sql.COST_GROUPS_SINCE, [ts(since)])
        return [rows.cost_group(r) for r in found]

    async def costliest_tasks(self, limit: int) -> list[TaskCost]:
        return [rows.task_cost(r) for r in await self._read(sql.COSTLIEST_TASKS, [limit])]

    async def past_costs(
        self, *, project: str, roles: Mapping[str, str | None]
    ) -> dict[str, PastCosts]:
        asked = {"project": project, "wanted": rows.wanted_roles(roles)}
        return {r["role"]: rows.past_costs(r) for r in await self._read(sql.PAST_COSTS, asked)}

    async def newest_artifact(self, kind: ArtifactKind, *, project: str) -> Artifact | None:
        found = await self._read(sql.NEWEST_ARTIFACT, (ArtifactKind(kind).value, project))
        return ROWS.artifact(found[0]) if found else None

    async def run_events_before(
        self, run_id: str, *, before: int | None = None, limit: int = 500
    ) -> list[Event]:
        run = parse_id("R", run_id)
        newest = MAX_ID if before is None else before
        found = await self._read(sql.RUN_EVENTS_BEFORE, (run, newest, limit))
        return [ROWS.event(r) for r in reversed(found)]


def _tasks_where(
    states: Sequence[TaskState] | None,
    project: str | None,
    include_archived: bool,
    merged: bool | None,
) -> tuple[list[str], list[Any]]:
    """The conditions of a read of tasks, and their parameters."""
    where: list[str] = ["1"]
    params: list[Any] = []
    if states is not None:
        where.append(f"state IN ({', '.join('?' * len(states))})")
        params += [TaskState(s).value for s in states]
    if project is not None:
        where.append("project = ?")
        params.append(project)
    if not include_archived:
        where.append("archived = 0")
    if merged is not None:
        where.append("merged = ?")
        params.append(int(merged))
    return where, params
