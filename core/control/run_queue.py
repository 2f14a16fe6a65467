"""The run queue (core.ports.RunQueue) for workers in the control plane's own process.

`t25 serve` answers its remote workers with the same queue (t25_tui.api.routes.worker),
so a worker is held to the same lease wherever it runs.
"""

from __future__ import annotations

from core.control.pipeline import Pipeline
from core.control.service import ControlPlane
from core.domain.events import Event
from core.domain.models import CheckResult, Lease, Run, Task, TaskState
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
        run, task = await self.leased(lease)
        return await self.claimed(lease, run, task)

    async def claimed(self, lease: Lease, run: Run, task: Task) -> Claim:
        """The claim of a leased run, with what its worker needs to know beyond the run: a
        review's authors, a send-back's session to continue."""
        authors = await self.pipeline.authors(task) if run.stage is TaskState.REVIEW else ()
        return Claim(lease, run, task, authors, await self.pipeline.resumable(run, task))

    async def leased(self, lease: Lease) -> tuple[Run, Task]:
        """The run a lease is on, and its task."""
        return await self.control.run(lease.run_id), await self.control.task(lease.task_id)

    async def heartbeat(self, lease: Lease, ttl_s: float) -> Lease:
        return await self.control.store.heartbeat(lease, ttl_s)

    async def prompt(
        self,
        lease: Lease,
        run: Run,
        task: Task,
        checks: list[CheckResult],
        *,
        continuing: bool = False,
    ) -> str:
        return await self.pipeline.prompt_for(run, task, checks=checks, continuing=continuing)

    async def record(self, lease: Lease, event: Event) -> None:
        await self.control.record(event)

    async def complete(self, lease: Lease, report: RunReport) -> None:
        await self.pipeline.complete(lease, report)

    async def release(self, lease: Lease) -> None:
        await self.released(lease)

    async def released(self, lease: Lease) -> Run:
        """Hand the run back to the queue; the run as it now is."""
        return await self.control.store.release_run(lease)
