"""In-process workers: several `Worker`s leasing from one run queue, sharing one quota book.

The pool only works runs; keeping tasks moving is the control plane's sweeper
(core.control.sweeper), which drives the pool between its passes. A worker that meets a
store outage (StoreUnavailable) waits until the sweeper finds the store back, instead of
dying; any other error of a worker ends the pool with it, so it is never silently lost
(an error that is no T25 error, a defect, is logged with its traceback as it happens).
A pass creates no asyncio task that outlives it: between passes the pool waits on its
workers' own tasks, or sleeps when it has none.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Protocol

from core.config.schema import Config
from core.errors import StoreUnavailable, T25Error
from core.ports import AgentAdapter, CheckRunner, RunQueue
from core.ports.forge import ForgeOpener
from core.worker.selection import QuotaBook
from core.worker.worker import Worker, host_name
from core.workspace.worktrees import Workspace

log = logging.getLogger("t25.worker")


class StoreOutage(Protocol):
    """Who tells workers that the store is gone, and when it is back."""

    back: asyncio.Event

    def down(self, exc: StoreUnavailable) -> None: ...


class WorkerPool:
    """`count` workers of this process; `start` them, `wait` between passes, `stop` them."""

    def __init__(
        self,
        runs: RunQueue,
        workspace: Workspace,
        adapters: Mapping[str, AgentAdapter],
        run_check: CheckRunner,
        *,
        count: int,
        lease_ttl_s: float = 30.0,
        heartbeat_s: float = 2.0,
        live: dict[str, asyncio.Event] | None = None,
        wake: asyncio.Event | None = None,
        forges: ForgeOpener | None = None,
    ) -> None:
        quota = QuotaBook()
        self.workers = [
            Worker(
                runs,
                workspace,
                adapters,
                run_check,
                quota=quota,
                name=f"{host_name()}-w{i}",
                lease_ttl_s=lease_ttl_s,
                heartbeat_s=heartbeat_s,
                live=live,
                wake=wake,
                forges=forges,
            )
            for i in range(1, count + 1)
        ]
        self._running: list[asyncio.Task[None]] = []
        self._used = [adapters[n] for n in _adapter_names(workspace.config) if n in adapters]
        self._probes: list[asyncio.Task[str | None]] = []

    @property
    def busy(self) -> bool:
        return any(w.busy for w in self.workers)

    @property
    def size(self) -> int:
        return len(self.workers)

    def start(self, outage: StoreOutage) -> None:
        self._running = [asyncio.create_task(self._staff(w, outage)) for w in self.workers]
        # Each CLI's version is read now, beside the first claims, not in front of its first run.
        self._probes = [asyncio.create_task(adapter.version()) for adapter in self._used]

    @staticmethod
    async def _staff(worker: Worker, outage: StoreOutage) -> None:
        """One worker, through store outages: it waits for the store to be found back."""
        while not worker.stopping.is_set():
            try:
                return await worker.run_forever()
            except StoreUnavailable as exc:
                outage.down(exc)
                await outage.back.wait()
            except Exception as exc:
                crashed(worker.name, exc)
                raise
        return None

    async def wait(self, seconds: float) -> None:
        """Wait `seconds`, or less if a worker crashed: its error is raised here."""
        for t in self._running:
            if t.done():
                t.result()
        pending = [t for t in self._running if not t.done()]
        if not pending:
            await asyncio.sleep(seconds)
            return
        done, _ = await asyncio.wait(pending, timeout=seconds, return_when=asyncio.FIRST_EXCEPTION)
        for t in done:
            t.result()

    def cancel(self) -> None:
        """Stop now (the cockpit closing, a dropped terminal): a cancelled worker ends its
        agent's process group and hands its lease back."""
        for t in [*self._running, *self._probes]:
            t.cancel()

    async def stop(self) -> None:
        """Let every worker finish and end; waits for them."""
        for w in self.workers:
            w.stopping.set()
        for probe in self._probes:  # a version nobody waits for any more is not worth waiting for
            probe.cancel()
        await asyncio.gather(*self._running, *self._probes, return_exceptions=True)


def _adapter_names(config: Config) -> list[str]:
    """The adapters the configuration's roles name, each once."""
    return list(dict.fromkeys(profile.adapter for profile in config.profiles()))


def crashed(name: str, exc: Exception) -> None:
    """Log a worker ended by a defect (no T25 error) with its traceback: the process ends
    with it and prints one line. A T25 error is that line already."""
    if not isinstance(exc, T25Error):
        log.error("%s crashed; its process ends", name, exc_info=exc)
