"""What runs cost, read from a serve: the remote cockpit's cost pane and board budgets
(`GET /cost`, `/cost/costliest`, `/cost/tasks`, `/cost/tokens`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from core.domain.cost import COSTLIEST, CostSummary, TaskCost

if TYPE_CHECKING:
    import httpx

COSTS_NAMED = 200  # the most task ids serve takes per request (GET /cost/tasks, /cost/tokens)


class RemoteCosts:
    """The cost reads of `t25_tui.api.cockpit_client.RemoteControlPlane`."""

    if TYPE_CHECKING:

        async def _get(self, path: str, **params: Any) -> httpx.Response: ...

    async def cost(self, *, since: datetime | None = None) -> CostSummary:
        found = await self._get("/cost", since=since and since.isoformat())
        return CostSummary.model_validate_json(found.content)

    async def costliest_tasks(self, limit: int = COSTLIEST) -> list[TaskCost]:
        found = await self._get("/cost/costliest", limit=limit)
        return [TaskCost.model_validate(t) for t in found.json()]

    async def cost_by_task(self, tasks: Sequence[str] | None = None) -> dict[str, float]:
        found = await self._by_task("/cost/tasks", tasks)
        return {task: float(usd) for task, usd in found.items()}

    async def tokens_by_task(self, tasks: Sequence[str]) -> dict[str, int]:
        return {task: int(n) for task, n in (await self._by_task("/cost/tokens", tasks)).items()}

    async def _by_task(self, path: str, tasks: Sequence[str] | None) -> dict[str, Any]:
        """A figure by task id, of every task (None) or of `tasks`, COSTS_NAMED a request."""
        if tasks is None:
            pages: list[list[str] | None] = [None]
        else:
            named = list(tasks)
            pages = [named[i : i + COSTS_NAMED] for i in range(0, len(named), COSTS_NAMED)]
        figures = {}
        for page in pages:
            found = (await self._get(path, task=page)).json()
            figures.update({str(task): figure for task, figure in found.items()})
        return figures
