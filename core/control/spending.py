"""What runs cost and what a task has spent, as every face reads it: `t25 cost`, the cost
pane and the board's budgets from sums the store makes (`Store.cost_groups`,
`costliest_tasks`, `cost_by_task`, `tokens_by_task`), never from every run; one task's spend
against its budget from that task's runs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from core.config.schema import Config, RoleBudget
from core.control.cost import summarize_groups
from core.domain.cost import COSTLIEST, CostSummary, Spend, TaskCost, tokens_of
from core.domain.models import Budget, Run, Task, task_id

if TYPE_CHECKING:
    from core.ports import Store


class Spending:
    """The cost and spend reads of `core.control.queries.Queries`."""

    config: Config
    store: Store

    async def spend(self, task: Task) -> Spend:
        """What `task` has spent against its budget."""
        return self.spend_of(task, await self.store.list_runs(task_id=task.id))

    async def budget_reached(self, task: Task, role: str | None) -> Spend | None:
        """The budget the next run of `role` would go past: the task's, else the role's
        (limits.by_role); None while both hold."""
        runs = await self.store.list_runs(task_id=task.id)
        task_spend = self.spend_of(task, runs)
        if task_spend.reached:
            return task_spend
        role_spend = self.spend_of(task, runs, role=role) if role else None
        return role_spend if role_spend is not None and role_spend.reached else None

    def spend_of(self, task: Task, runs: list[Run], *, role: str | None = None) -> Spend:
        """`runs`' spend (the task's), against the task's budget: its own, raised by an
        answer, else its project's limits. With `role`, that role's runs against the role's
        budget, the same way (limits.by_role)."""
        limits = self.config.for_project(task.project).limits
        if role is None:
            configured = RoleBudget(max_cost_usd=limits.max_cost_usd, max_tokens=limits.max_tokens)
            own = Budget(usd=task.budget_usd, tokens=task.budget_tokens)
        else:
            runs = [r for r in runs if r.role == role]
            configured = limits.by_role.get(role) or RoleBudget()  # type: ignore[call-overload]
            own = task.role_budgets.get(role) or Budget()
        budget_usd = own.usd if own.usd is not None else configured.max_cost_usd
        budget_tokens = own.tokens if own.tokens is not None else configured.max_tokens
        unpriced = {
            r.model or r.usage.model or "unknown"
            for r in runs
            if tokens_of(r.usage)
            and not r.cost_usd
            and self.config.rate_for(r.model or r.usage.model) is None
        }
        return Spend(
            role=role,
            usd=sum(r.cost_usd for r in runs),
            tokens=sum(tokens_of(r.usage) for r in runs),
            budget_usd=budget_usd,
            budget_tokens=budget_tokens,
            unpriced=tuple(sorted(unpriced)),
        )

    async def cost(self, *, since: datetime | None = None) -> CostSummary:
        return summarize_groups(await self.store.cost_groups(since=since))

    async def costliest_tasks(self, limit: int = COSTLIEST) -> list[TaskCost]:
        return await self.store.costliest_tasks(limit)

    async def cost_by_task(self, tasks: Sequence[str] | None = None) -> dict[str, float]:
        return await self.store.cost_by_task(None if tasks is None else [task_id(t) for t in tasks])

    async def tokens_by_task(self, tasks: Sequence[str]) -> dict[str, int]:
        return await self.store.tokens_by_task([task_id(t) for t in tasks])
