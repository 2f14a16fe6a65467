"""The sweeper: keeps every task moving, and drives the in-process workers between passes.

Deciding happens as each run completes (`Pipeline.complete`). The sweeper covers what a
completion cannot: new tasks (RECEIVED), decisions taken in another process (an
approval from the command line), runs whose lease lapsed (back to the queue), and a
stage whose finished run was never decided on (the deciding process died). Stall
detection reads the store's clock (`Store.now`), the one run times are written by, never
the process's; and a stage has at most one queued or running run, so a sweep that races
a completion finds the run the completion queued instead of adding another. `work` returns once nothing can move without a
human, unless it is told to follow.

When the store goes away (StoreUnavailable: Postgres restarting, our connections
terminated, the SQLite file locked past its busy timeout) the sweeper pauses instead of
ending: it says so once on stderr, tries again after 0.5 s, doubling to 10 s, and says
once when the store answers again. The workers wait for that moment rather than die; a
run whose completion could not be written is redone once its lease lapses. The sweeper
gives up only when it truly cannot go on, and then raises a StoreError:

- the store refuses T25 for good (any StoreError that is not StoreUnavailable: not a
  T25 database, written by a newer T25, a database that no longer lets T25 in);
- the store stayed unavailable for longer than `store_patience_s` (STORE_PATIENCE_S,
  five minutes, unless told otherwise: `t25 serve --store-patience`), so that a
  supervisor restarts a control plane that would otherwise answer 503 for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Protocol

from core.control.service import ControlPlane
from core.domain.backoff import Backoff
from core.domain.models import MERGE_ROLE, RunStatus, Task, TaskState
from core.domain.states import WORKING
from core.errors import AuditError, StaleState, StoreError, StoreUnavailable
from core.ports import STORE_PATIENCE_S

log = logging.getLogger("t25.sweeper")

ACTIVE = (RunStatus.QUEUED, RunStatus.RUNNING)
STALLED_AFTER = timedelta(seconds=30)  # a finished run with no decision after this: redo the stage
STORE_BACKOFF = Backoff(0.5, 10.0)  # retrying an unavailable store: 0.5 s doubling to 10 s


class Workers(Protocol):
    """The in-process workers the sweeper drives (core.worker.pool.WorkerPool)."""

    @property
    def busy(self) -> bool: ...
    @property
    def size(self) -> int: ...
    def start(self, outage: StoreWatch) -> None: ...
    async def wait(self, seconds: float) -> None: ...
    def cancel(self) -> None: ...
    async def stop(self) -> None: ...


class StoreWatch:
    """Whether the store answers, as the sweeper last found it.

    The first failure of an outage is logged, and its end; nothing in between. `back` is
    set while the store answers, so workers that met the outage wait on it instead of dying.
    """

    def __init__(self, patience_s: float) -> None:
        self.patience_s = patience_s
        self.back = asyncio.Event()
        self.back.set()
        self._since: float | None = None  # loop time of the outage's first failure
        self._pauses: Iterator[float] | None = None  # the sweep's pauses in this outage

    def down(self, exc: StoreUnavailable) -> None:
        if self._since is None:
            self._since = asyncio.get_running_loop().time()
            self.back.clear()
            log.warning(
                "t25: the store is unavailable (%s); the sweeper waits for it, "
                "retrying with backoff",
                exc.message,
            )

    def retry_in(self, exc: StoreUnavailable) -> float:
        """The pause before the next try; StoreError once the outage outlasted the patience."""
        self.down(exc)
        since = self._since if self._since is not None else asyncio.get_running_loop().time()
        waited = asyncio.get_running_loop().time() - since
        if waited > self.patience_s:
            raise StoreError(
                f"the store has been unavailable for over {self.patience_s:g} s ({exc.message})",
                hint="start T25 again once the store is back; "
                "`t25 serve --store-patience S` sets how long serve waits",
            ) from exc
        if self._pauses is None:
            self._pauses = STORE_BACKOFF.pauses()
        return next(self._pauses)

    def answered(self) -> None:
        if self._since is not None:
            waited = asyncio.get_running_loop().time() - self._since
            log.warning("t25: the store answers again after %.1f s; the sweeper goes on", waited)
            self._since, self._pauses = None, None
            self.back.set()


class Sweeper:
    """Keeps tasks moving for `t25 run`, `t25 serve` and the cockpit; drives `workers`."""

    def __init__(
        self,
        control: ControlPlane,
        pool: Workers | None = None,
        *,
        sweep_s: float = 0.5,
        store_patience_s: float = STORE_PATIENCE_S,
    ) -> None:
        self.control = control
        self.pool = pool
        self.sweep_s = sweep_s
        self.store = StoreWatch(store_patience_s)

    async def work(self, *, follow: bool = False) -> None:
        """Run until nothing can move without a human (or forever, with `follow`)."""
        await self._settle_audit()
        if self.pool is not None:
            self.pool.start(self.store)
        try:
            while True:
                try:
                    await self.sweep()
                    self.store.answered()
                    if not follow and await self.idle():
                        return
                    pause = self.sweep_s
                except StoreUnavailable as exc:
                    pause = self.store.retry_in(exc)
                if self.pool is None:
                    await asyncio.sleep(pause)
                else:
                    await self.pool.wait(pause)
        except asyncio.CancelledError:
            if self.pool is not None:
                self.pool.cancel()
            raise
        finally:
            self.store.back.set()  # nobody waits for the store any more
            if self.pool is not None:
                await self.pool.stop()

    async def _settle_audit(self) -> None:
        """Void the audit lines of deciders that were killed before their decision took
        effect, rather than leave them unanchored until the next decision."""
        try:
            voided = await self.control.audit.settle()
        except (AuditError, StoreError) as exc:
            log.warning("t25: the audit log's unanchored lines were not voided: %s", exc.message)
            return
        if voided:
            log.warning("t25: voided %d audit line(s) no decider anchored", voided)

    async def sweep(self) -> None:
        """One pass: lapsed leases back to the queue (or their task failed), then every
        task that can move and has nothing queued moved on."""
        await self._reap()
        waiting = await self.control.store.list_tasks(
            states=[TaskState.RECEIVED, *WORKING], without_active_runs=True
        )
        for task in waiting:
            if task.id not in self.control.live:
                try:
                    await self.advance(task)
                except StaleState:
                    pass  # someone decided first (an operator's cancel, another process)

    async def _reap(self) -> None:
        """Runs whose lease lapsed go back to the queue; one that used its last attempt
        fails its task, unless the task moved on meanwhile. Only a run whose agent its
        worker had started pays an attempt for the lapse (Store.reap_expired)."""
        store = self.control.store
        for run in await store.reap_expired(retry_delay_s=1.0):
            if run.status is not RunStatus.FAILED:
                continue
            if run.role == MERGE_ROLE:  # its workers died: the merge did not take effect
                await self.control.merge_finished(run, None, error=run.error or "lease lapsed")
                continue
            task = await store.get_task(run.task_id)
            if task and task.state is run.stage:
                with contextlib.suppress(StaleState):  # the task moved on meanwhile
                    await self.control.transition(
                        task,
                        TaskState.FAILED,
                        actor="t25",
                        reason=run.error or "",
                        error=f"{run.stage} run {run.id}: {run.error}",
                    )

    async def advance(self, task: Task) -> None:
        """Queue the next step of a task that can move and has nothing queued."""
        if task.state is TaskState.RECEIVED:
            if task.after and await self.control.blockers(task):
                return  # it waits for the tasks it names to be merged
            await self.control.enter(task, TaskState.SPEC, actor="t25", reason="picked up")
            return
        runs = await self.control.store.list_runs(task_id=task.id)
        if any(r.status in ACTIVE for r in runs):
            return  # queued or running since the sweep looked
        latest = next((r for r in reversed(runs) if r.stage is task.state), None)
        finished = latest.finished_at if latest else None
        # The run's times and the task's state_since are the store's clock; so is `now`. A
        # process whose clock is off (serve's ahead by minutes) would otherwise take every
        # decision in progress for a stall and run the stage again.
        if (
            finished
            and finished >= task.state_since
            and await self.control.store.now() - finished < STALLED_AFTER
        ):
            return  # its decision is being made (perhaps by another process)
        await self.control.enqueue(task)  # the stage's one run: a racing enqueue finds it

    async def idle(self) -> bool:
        if self.pool is not None and self.pool.busy:
            return False
        return not await self.control.store.has_active_runs()
