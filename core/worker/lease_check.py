"""A worker confirms its lease immediately before it commits the agent's work.

A worker learns that its lease is gone from a heartbeat or at completion; a worker frozen
past its lease (a suspended `t25 run`, a paused VM, a long stall) wakes with its agent
finished and, without this, would commit the attempt on the task branch before it heard,
where the next attempt would build on it (the change twice). `confirm_lease` is a heartbeat
that must succeed: LeaseLost when the run is another's, and the commit is skipped. A control
plane that does not answer now is asked again for as long as the lease would hold; then
the lease is taken for lost, since nothing says it is still ours. The next attempt starts
from the branch head T25 recorded (core.worker.worker), so a commit made in the moment
between this check and the commit is set aside rather than built on.
"""

from __future__ import annotations

from core.domain.backoff import Backoff, retry
from core.domain.models import Lease
from core.errors import LeaseLost, T25Error
from core.ports import RunQueue

PAUSES = Backoff(0.2, 2.0)


async def confirm_lease(runs: RunQueue, lease: Lease, ttl_s: float) -> Lease:
    """The lease, extended now; LeaseLost when it is gone or cannot be confirmed."""
    try:
        return await retry(
            lambda _: runs.heartbeat(lease, ttl_s),
            pauses=PAUSES.within(ttl_s / 2),
            transient=lambda exc: isinstance(exc, T25Error) and not isinstance(exc, LeaseLost),
        )
    except LeaseLost:
        raise
    except T25Error as exc:
        raise LeaseLost(
            f"the lease of {lease.run_id} could not be confirmed before committing: {exc.message}"
        ) from exc
