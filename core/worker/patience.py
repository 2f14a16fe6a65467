"""A run queue whose calls under a lease ride out a store that is away for a moment.

An in-process worker calls the control plane's store directly (core.control.run_queue);
when Postgres restarts under it, a prompt, an output event or a completion raises
StoreUnavailable, which used to fail the run (the prompt), stop its agent (the output) or
send the run round again (the completion). `PatientRunQueue` tries those again, with
backoff, for as long as the lease would hold (`patience_s`), then raises what it met.
Claims and heartbeats are not wrapped: the worker's own loops try those again already.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from core.domain.backoff import Backoff, retry
from core.domain.events import Event
from core.domain.models import CheckResult, Lease, Run, Task
from core.domain.reports import RunReport
from core.errors import StoreUnavailable
from core.ports import Claim, RunQueue

T = TypeVar("T")

BACKOFF = Backoff(0.5, 5.0, jitter=0.2)


class PatientRunQueue:
    """`runs`, with its calls under a lease tried again while the store is unavailable."""

    def __init__(self, runs: RunQueue, *, patience_s: float, backoff: Backoff = BACKOFF) -> None:
        self.runs, self.patience_s, self.backoff = runs, patience_s, backoff

    async def claim(self, worker: str, ttl_s: float) -> Claim | None:
        return await self.runs.claim(worker, ttl_s)

    async def heartbeat(self, lease: Lease, ttl_s: float) -> Lease:
        return await self.runs.heartbeat(lease, ttl_s)

    async def prompt(
        self,
        lease: Lease,
        run: Run,
        task: Task,
        checks: list[CheckResult],
        *,
        continuing: bool = False,
    ) -> str:
        return await self._patiently(
            lambda: self.runs.prompt(lease, run, task, checks, continuing=continuing)
        )

    async def record(self, lease: Lease, event: Event) -> None:
        await self._patiently(lambda: self.runs.record(lease, event))

    async def complete(self, lease: Lease, report: RunReport) -> None:
        await self._patiently(lambda: self.runs.complete(lease, report))

    async def release(self, lease: Lease) -> None:
        await self.runs.release(lease)

    async def _patiently(self, call: Callable[[], Awaitable[T]]) -> T:
        return await retry(
            lambda _: call(),
            pauses=self.backoff.within(self.patience_s),
            transient=lambda exc: isinstance(exc, StoreUnavailable),
        )
