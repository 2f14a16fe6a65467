"""The factory floor: workers working the queue, and a sweep that keeps every task moving.

Deciding happens as each run completes (`Pipeline.complete`). The sweep covers what a
completion cannot: new tasks (RECEIVED), decisions taken in another process (an
approval from the command line), runs whose lease lapsed (back to the queue), and a
stage left without a run by a crash. `work` returns once nothing can move without a
human, unless it is told to follow.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from datetime import timedelta

from core.agent import AgentAdapter, QuotaBook
from core.errors import StaleState
from core.models import RunStatus, Task, TaskState, utcnow
from core.pipeline import Pipeline
from core.service import Factory
from core.states import WORKING
from core.worker import CheckRunner, LocalPlane, Worker, host_name

ACTIVE = (RunStatus.QUEUED, RunStatus.RUNNING)
STALLED_AFTER = timedelta(seconds=30)  # a finished run with no decision after this: redo the stage


class Floor:
    """In-process workers plus the sweep, for `t25 run` and the cockpit."""

    def __init__(
        self, factory: Factory, adapters: Mapping[str, AgentAdapter], run_check: CheckRunner,
        *, workers: int | None = None, lease_ttl_s: float = 30.0, heartbeat_s: float = 2.0,
        sweep_s: float = 0.5,
    ) -> None:
        self.f = factory
        self.pipeline = Pipeline(factory)
        quota = QuotaBook()
        count = factory.config.limits.workers if workers is None else workers
        plane = LocalPlane(factory, self.pipeline)
        self.workers = [
            Worker(plane, factory.site, adapters, run_check, quota=quota, name=f"{host_name()}-w{i}",
                   lease_ttl_s=lease_ttl_s, heartbeat_s=heartbeat_s, live=factory.live,
                   wake=factory.work_queued)
            for i in range(1, count + 1)
        ]
        self.sweep_s = sweep_s

    async def work(self, *, follow: bool = False) -> None:
        """Run until nothing can move without a human (or forever, with `follow`)."""
        running = [asyncio.create_task(w.run_forever()) for w in self.workers]
        try:
            while True:
                await self.sweep()
                if not follow and await self.idle():
                    return
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(self._settle(running)), self.sweep_s)
        except asyncio.CancelledError:
            # Shutting down (the cockpit closing, a dropped terminal): stop the agents now.
            # A cancelled worker ends its agent's process group and hands its lease back.
            for t in running:
                t.cancel()
            raise
        finally:
            for w in self.workers:
                w.stopping.set()
            await asyncio.gather(*running, return_exceptions=True)

    @staticmethod
    async def _settle(running: list[asyncio.Task]) -> None:
        # A crashed worker surfaces here instead of being silently lost.
        if not running:  # a control plane without workers of its own only sweeps
            await asyncio.Event().wait()
        done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_EXCEPTION)
        for t in done:
            t.result()

    async def sweep(self) -> None:
        store = self.f.store
        for run in await store.reap_expired(retry_delay_s=1.0):
            task = await store.get_task(run.task_id)
            if run.status is RunStatus.FAILED and task and task.state is run.stage:
                with contextlib.suppress(StaleState):  # the task moved on meanwhile
                    await self.f.transition(task, TaskState.FAILED, actor="t25",
                                            reason=run.error or "",
                                            error=f"{run.stage} run {run.id}: {run.error}")
        active = {r.task_id for s in ACTIVE for r in await store.list_runs(status=s)}
        for task in await store.list_tasks(states=[TaskState.RECEIVED, *WORKING]):
            if task.id not in active and task.id not in self.f.live:
                try:
                    await self.advance(task)
                except StaleState:
                    pass  # someone decided first (an operator's cancel, another process)

    async def advance(self, task: Task) -> None:
        """Queue the next step of a task that can move and has nothing queued."""
        if task.state is TaskState.RECEIVED:
            await self.f.enter(task, TaskState.SPEC, actor="t25", reason="picked up")
            return
        runs = await self.f.store.list_runs(task_id=task.id)
        if any(r.status in ACTIVE for r in runs):
            return  # queued or running since the sweep looked
        latest = next((r for r in reversed(runs) if r.stage is task.state), None)
        if latest and latest.finished_at and latest.finished_at >= task.state_since:
            if utcnow() - latest.finished_at < STALLED_AFTER:
                return  # its decision is being made (perhaps by another process)
        await self.f.enqueue(task)

    async def idle(self) -> bool:
        if any(w.busy for w in self.workers):
            return False
        for status in ACTIVE:
            if await self.f.store.list_runs(status=status):
                return False
        return True
