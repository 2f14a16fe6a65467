"""The port between a worker and the control plane: the queue of runs it leases.

A worker claims a run (a lease with a deadline and a fencing token), heartbeats, asks for
the run's prompt, sends its output as events, and completes or releases it under the
same token. Nothing else crosses between the two planes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from core.domain.events import Event
from core.domain.models import Author, CheckResult, Lease, ResumableSession, Run, Task
from core.domain.reports import RunReport


@dataclass(frozen=True)
class Claim:
    """A claimed run: the lease, and the run and task it is for. A REVIEW run's claim also
    says who wrote the change (`authors`), so its worker can pick a reviewer that did not
    (policies.reviewer_differs_from_author); a send-back's IMPLEMENTING run, the session of
    the last dev run it may continue (`resume`)."""

    lease: Lease
    run: Run
    task: Task
    authors: tuple[Author, ...] = ()
    resume: ResumableSession | None = None


class RunQueue(Protocol):
    """What a worker asks of the control plane: in-process (core.control.run_queue) or over
    HTTP (t25_tui.api.worker_client)."""

    async def claim(self, worker: str, ttl_s: float) -> Claim | None: ...
    async def heartbeat(self, lease: Lease, ttl_s: float) -> Lease: ...
    async def prompt(
        self,
        lease: Lease,
        run: Run,
        task: Task,
        checks: list[CheckResult],
        *,
        continuing: bool = False,
    ) -> str: ...
    async def record(self, lease: Lease, event: Event) -> None: ...
    async def complete(self, lease: Lease, report: RunReport) -> None: ...
    async def release(self, lease: Lease) -> None: ...
