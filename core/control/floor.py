"""The factory floor: workers working the queue, and a sweep that keeps every task moving.

Deciding happens as each run completes (`Pipeline.complete`). The sweep covers what a
completion cannot: new tasks (RECEIVED), decisions taken in another process (an
approval from the command line), runs whose lease lapsed (back to the queue), and a
stage left without a run by a crash. `work` returns once nothing can move without a
human, unless it is told to follow.

When the store goes away (StoreUnavailable: Postgres restarting, our connections
terminated, the SQLite file locked past its busy timeout) the floor pauses instead of
ending: it says so once on stderr, tries again after 0.5 s, doubling to 10 s, and says
once when the store answers again. Its workers wait for that moment rather than die; a
run whose completion could not be written is redone once its lease lapses. The floor
gives up only when it truly cannot go on, and then raises a StoreError:

- the store refuses T25 for good (any StoreError that is not StoreUnavailable: not a
  T25 database, written by a newer T25, a database that no longer lets T25 in);
- the store stayed unavailable for longer than `store_patience_s` (STORE_PATIENCE_S,
  five minutes, unless told otherwise: `t25 serve --store-patience`), so that a
  supervisor restarts a control plane that would otherwise answer 503 for ever.

A pass creates no asyncio task that outlives it: between passes the sweep waits on its
workers' own tasks (a crashed worker ends the floor with its error) or sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from datetime import timedelta

from core.domain.agent import AgentAdapter, QuotaBook
from core.errors import StaleState, StoreError, StoreUnavailable
from core.domain.models import RunStatus, Task, TaskState, utcnow
from core.control.pipeline import Pipeline
from core.control.service import Factory
from core.domain.states import WORKING
from core.worker.worker import CheckRunner, LocalPlane, Worker, host_name

log = logging.getLogger("t25.floor")

ACTIVE = (RunStatus.QUEUED, RunStatus.RUNNING)
STALLED_AFTER = timedelta(seconds=30)  # a finished run with no decision after this: redo the stage
STORE_PATIENCE_S = 300.0  # unavailable for longer than this: give up (see the module docstring)
FIRST_PAUSE_S, LONGEST_PAUSE_S = 0.5, 10.0  # retrying an unavailable store: 0.5 s doubling to 10 s


class StoreWatch:
    """Whether the store answers, as this floor last found it.

    The first failure of an outage is logged, and its end; nothing in between. `back` is
    set while the store answers, so workers that met the outage wait on it instead of dying.
    """

    def __init__(self, patience_s: float) -> None:
        self.patience_s = patience_s
        self.back = asyncio.Event()
        self.back.set()
        self._since: float | None = None  # loop time of the outage's first failure
        self._pause: float | None = None  # the sweep's last pause in this outage

    def down(self, exc: StoreUnavailable) -> None:
        if self._since is None:
            self._since = asyncio.get_running_loop().time()
            self.back.clear()
            log.warning("t25: the store is unavailable (%s); the floor waits for it, "
                        "retrying with backoff", exc.message)

    def retry_in(self, exc: StoreUnavailable) -> float:
        """The pause before the next try; StoreError once the outage outlasted the patience."""
        self.down(exc)
        waited = asyncio.get_running_loop().time() - self._since  # type: ignore[operator]
        if waited > self.patience_s:
            raise StoreError(
                f"the store has been unavailable for over {self.patience_s:g} s ({exc.message})",
                hint="start T25 again once the store is back; "
                     "`t25 serve --store-patience S` sets how long serve waits") from exc
        self._pause = FIRST_PAUSE_S if self._pause is None else min(self._pause * 2, LONGEST_PAUSE_S)
        return self._pause

    def answered(self) -> None:
        if self._since is not None:
            waited = asyncio.get_running_loop().time() - self._since
            log.warning("t25: the store answers again after %.1f s; the floor goes on", waited)
            self._since = self._pause = None
            self.back.set()


class Floor:
    """In-process workers plus the sweep, for `t25 run`, `t25 serve` and the cockpit."""

    def __init__(
        self, factory: Factory, adapters: Mapping[str, AgentAdapter], run_check: CheckRunner,
        *, workers: int | None = None, lease_ttl_s: float = 30.0, heartbeat_s: float = 2.0,
        sweep_s: float = 0.5, store_patience_s: float = STORE_PATIENCE_S,
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
        self.store = StoreWatch(store_patience_s)

    async def work(self, *, follow: bool = False) -> None:
        """Run until nothing can move without a human (or forever, with `follow`)."""
        running = [asyncio.create_task(self._staff(w)) for w in self.workers]
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
                await self._between_passes(running, pause)
        except asyncio.CancelledError:
            # Shutting down (the cockpit closing, a dropped terminal): stop the agents now.
            # A cancelled worker ends its agent's process group and hands its lease back.
            for t in running:
                t.cancel()
            raise
        finally:
            for w in self.workers:
                w.stopping.set()
            self.store.back.set()  # nobody waits for the store any more
            await asyncio.gather(*running, return_exceptions=True)

    async def _staff(self, worker: Worker) -> None:
        """One worker, through store outages: it waits for the sweep to find the store back."""
        while not worker.stopping.is_set():
            try:
                return await worker.run_forever()
            except StoreUnavailable as exc:
                self.store.down(exc)
                await self.store.back.wait()

    @staticmethod
    async def _between_passes(running: list[asyncio.Task], seconds: float) -> None:
        """Wait `seconds`, or less if a worker crashed: its error ends the floor here
        instead of being silently lost. Waits on the workers' own tasks (a control plane
        without workers of its own only sleeps), so nothing is left behind."""
        for t in running:
            if t.done():
                t.result()
        pending = [t for t in running if not t.done()]
        if not pending:
            await asyncio.sleep(seconds)
            return
        done, _ = await asyncio.wait(pending, timeout=seconds, return_when=asyncio.FIRST_EXCEPTION)
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
