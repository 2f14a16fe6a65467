"""The run queue (core.ports.RunQueue) for workers in the control plane's own process."""

from __future__ import annotations

from core.control.pipeline import Pipeline
from core.control.service import ControlPlane
from core.domain.events import Event
from core.domain.models import CheckResult, Lease, Run, Task
from core.domain.reports import RunReport
from core.ports.runs import Claim


class LocalRunQueue:
    """The run queue of a control plane in the worker's own process: its service and pipeline."""

    def __init__(self, control: ControlPlane, pipeline: Pipeline | None = None) -> None:
        self.control, self.pipeline = control, pipeline or Pipeline(control)

    async def claim(self, worker: str, ttl_s: float) -> Claim | None:
        lease = await self.control.store.claim_run(worker, ttl_s)
        if lease is None:
            return None
        run, task = (
            await self.control.store.get_run(lease.run_id),
            await self.control.store.get_task(lease.task_id),
        )
        return Claim(lease, run, task)

    async def heartbeat(self, lease: Lease, ttl_s: float) -> Lease:
        return await self.control.store.heartbeat(lease, ttl_s)

    async def prompt(self, lease: Lease, run: Run, task: Task, checks: list[CheckResult]) -> str:
        return await self.pipeline.prompt_for(run, task, checks=checks)

    async def record(self, lease: Lease, event: Event) -> None:
        await self.control.record(event)

    async def complete(self, lease: Lease, report: RunReport) -> None:
        await self.pipeline.complete(lease, report)

    async def release(self, lease: Lease) -> None:
        await self.control.store.release_run(lease)
