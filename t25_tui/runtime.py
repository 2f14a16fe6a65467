"""Putting T25 together: the one place a process's parts are built and wired.

`open_runtime` opens the store of a configuration, and builds on it the event bus, the
control plane (core.control.service.ControlPlane, which every face holds as
`core.ports.Operations`) and, when asked, the sweeper driving this process's own workers.
Every command of the command line, the cockpit, `t25 serve`, the demo, the screenshots
and the tests' helpers open it here; none wires those parts itself. `remote_workers` is
its counterpart for `t25 worker --url`: the same workers, leasing from a `t25 serve`
elsewhere over HTTP instead of from a control plane of their own.

Time comes from one clock, given here: the control plane stamps its events with it, the
audit log its lines, the embedded store its rows. A seeded board (t25_tui.tui.sample_data)
passes a timeline of its own; everything else runs on the machine's clock.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from core.config.intake_config import IntakeConfig
from core.config.policy_config import QACheck
from core.config.pull_request_config import PullRequestConfig
from core.config.schema import Config, load_config
from core.control.service import ControlPlane
from core.domain.agent import CheckSandbox
from core.domain.backoff import Backoff
from core.domain.clock import Clock, system_clock
from core.domain.events import EventBus
from core.domain.models import CheckResult
from core.errors import (
    ControlPlaneUnreachable,
    CredentialRefused,
    ProtocolMismatch,
    StoreUnavailable,
)
from core.ports import AgentAdapter, Operations, RunQueue, Store

# The workers, the sweeper and the worktree machinery are imported by the functions that
# build them: a command that only reads (`t25 task list`) never does.
if TYPE_CHECKING:
    from core.control.sweeper import Sweeper
    from core.ports import CheckRunner
    from core.ports.forge import Forge
    from core.worker.pool import WorkerPool
    from core.worker.worker import Worker
    from t25_tui.api.worker_client import HttpRunQueue
    from t25_tui.tui.sample_data import Seeded

log = logging.getLogger("t25.remote")

# A remote worker that lost its control plane tries again after 0.5 s, doubling to 10 s;
# jittered, so the workers of a restarted serve do not all come back at the same instant.
WORKER_BACKOFF = Backoff(0.5, 10.0, jitter=0.5)


@dataclass(frozen=True)
class InProcessWorkers:
    """The workers a runtime drives in its own process, and how they keep time."""

    workers: int | None = None  # None: `limits.workers` of t25.yaml; 0: the sweeper alone
    lease_ttl_s: float = 30.0
    heartbeat_s: float = 2.0
    sweep_s: float = 0.5
    store_patience_s: float | None = None  # None: the sweeper's own (core.control.sweeper)


@dataclass(frozen=True)
class Runtime:
    """One T25 process's parts: what `open_runtime` built, for as long as it is open."""

    config: Config
    store: Store
    bus: EventBus
    control: ControlPlane
    sweeper: Sweeper | None  # with `in_process`: keeps tasks moving and drives the workers

    @property
    def operations(self) -> Operations:
        """The control plane, as a face holds it."""
        return self.control


@asynccontextmanager
async def open_runtime(
    config: Config,
    *,
    in_process: InProcessWorkers | None = None,
    clock: Clock | None = None,
    adapters: Mapping[str, AgentAdapter] | None = None,
    run_check: CheckRunner | None = None,
) -> AsyncIterator[Runtime]:
    """Open `config`'s store and build the control plane on it (its projects registered),
    with the sweeper and `in_process.workers` in-process workers when a `in_process` is given (the
    adapters T25 ships and its QA check runner unless told otherwise). The store closes
    when the block ends; a sweeper that was started must have been stopped by then."""
    from store import open_store

    store = await open_store(config.store_url, clock=clock)
    try:
        control = ControlPlane(
            config, store, clock=clock or system_clock, run_check=run_check or _shipped_check
        )
        control.forges = open_forge
        await control.sync_projects()
        sweeper = None
        if in_process is not None and in_process.store_patience_s is not None:
            control.store_patience_s = in_process.store_patience_s
        if in_process is not None:
            sweeper = local_sweeper(
                control,
                adapters,
                run_check,
                workers=in_process.workers,
                lease_ttl_s=in_process.lease_ttl_s,
                heartbeat_s=in_process.heartbeat_s,
                sweep_s=in_process.sweep_s,
                store_patience_s=in_process.store_patience_s,
            )
        yield Runtime(config, store, control.bus, control, sweeper)
    finally:
        await store.close()


async def open_sample(repo: Path, *, make_repo: bool = True, seeded: bool = True) -> Seeded:
    """The sample repository's runtime on a fresh timeline (t25_tui.tui.sample_data), with
    the demo board seeded on it unless `seeded` is False: what the snapshot tests, the
    screenshots and the cockpit's benchmark show. Close it with `Seeded.close`."""
    from t25_tui.tui import sample_data

    path = await asyncio.to_thread(sample_data.write_sample, repo, make_repo=make_repo)
    timeline = sample_data.Timeline()
    opened = AsyncExitStack()
    runtime = await opened.enter_async_context(open_runtime(load_config(path), clock=timeline))
    try:
        now = await sample_data.seed(runtime.control) if seeded else timeline()
    except BaseException:
        await opened.aclose()
        raise
    return sample_data.Seeded(runtime.control, now, repo, opened.aclose)


def local_workers(
    control: ControlPlane,
    adapters: Mapping[str, AgentAdapter] | None = None,
    run_check: CheckRunner | None = None,
    *,
    count: int | None = None,
    lease_ttl_s: float = 30.0,
    heartbeat_s: float = 2.0,
) -> WorkerPool:
    """`count` workers in this process (default: `limits.workers`), leasing from `control`."""
    from core.control.run_queue import LocalRunQueue
    from core.worker.patience import PatientRunQueue
    from core.worker.pool import WorkerPool

    adapters, run_check = _tools(adapters, run_check)
    _sweep_leftovers()
    return WorkerPool(
        PatientRunQueue(LocalRunQueue(control), patience_s=lease_ttl_s),
        control.workspace,
        adapters,
        run_check,
        count=control.config.limits.workers if count is None else count,
        lease_ttl_s=lease_ttl_s,
        heartbeat_s=heartbeat_s,
        live=control.live,
        wake=control.work_queued,
        forges=open_forge,
    )


def local_sweeper(
    control: ControlPlane,
    adapters: Mapping[str, AgentAdapter] | None = None,
    run_check: CheckRunner | None = None,
    *,
    workers: int | None = None,
    lease_ttl_s: float = 30.0,
    heartbeat_s: float = 2.0,
    sweep_s: float = 0.5,
    store_patience_s: float | None = None,
) -> Sweeper:
    """The sweeper of `control`, driving `workers` in-process workers (0: none)."""
    from core.control.sweeper import Sweeper
    from core.ports import STORE_PATIENCE_S

    pool = local_workers(
        control,
        adapters,
        run_check,
        count=workers,
        lease_ttl_s=lease_ttl_s,
        heartbeat_s=heartbeat_s,
    )
    patience = STORE_PATIENCE_S if store_patience_s is None else store_patience_s
    return Sweeper(control, pool, sweep_s=sweep_s, store_patience_s=patience)


def remote_workers(
    config: Config,
    runs: RunQueue,
    *,
    owner: str,
    former: Sequence[str] = (),
    count: int,
    lease_ttl_s: float = 30.0,
    heartbeat_s: float = 5.0,
) -> list[Worker]:
    """`count` workers of this host, in its own checkouts (`config`), leasing from `runs`:
    a `t25 serve` elsewhere, or its replicas. The worktrees are owned by `owner`, the name
    serve gives its installation (core.workspace.ownership): on serve's own checkout, serve
    and `t25 cleanup` may remove them after a merge. Those made under a `former` name (the
    hash of serve's URL, before serve named it) are adopted too."""
    from core.worker.selection import QuotaBook
    from core.worker.worker import Worker, host_name
    from core.workspace.worktrees import Workspace

    adapters, run_check = _tools(None, None)
    _sweep_leftovers()
    workspace = Workspace(config, owner=owner, former=former)
    quota = QuotaBook()
    return [
        Worker(
            runs,
            workspace,
            adapters,
            run_check,
            quota=quota,
            name=f"{host_name()}-r{i}",
            lease_ttl_s=lease_ttl_s,
            heartbeat_s=heartbeat_s,
            forges=open_forge,
        )
        for i in range(1, count + 1)
    ]


async def work_remotely(
    urls: Sequence[str],
    credential: str,
    config: Config,
    *,
    workers: int,
    lease_ttl_s: float = 30.0,
    heartbeat_s: float = 5.0,
) -> None:
    """Run `workers` workers against the control plane at `urls` (one serve, or replicas
    on one Postgres to fail over between, in order) until SIGTERM/SIGINT."""
    from core.workspace.ownership import owner_of
    from t25_tui.api.worker_client import HttpRunQueue

    runs = HttpRunQueue(urls, credential, lease_ttl_s=lease_ttl_s)
    named, former = await _owner_named_by(runs), owner_of(urls[0])  # before serve named it
    in_process = remote_workers(
        config,
        runs,
        owner=named or former,
        former=(former,),
        count=workers,
        lease_ttl_s=lease_ttl_s,
        heartbeat_s=heartbeat_s,
    )
    running = [asyncio.create_task(_keep_working(w)) for w in in_process]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stopping = asyncio.create_task(stop.wait())
    try:
        # Until stopped, or until a worker cannot go on (serve refused the credential or
        # the protocol, or a defect).
        await asyncio.wait([stopping, *running], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        for t in running:  # a cancelled worker stops its agent and hands its lease back
            t.cancel()
        ended = await asyncio.gather(*running, return_exceptions=True)
        await runs.close()
    failed = [e for e in ended if isinstance(e, Exception)]  # cancelled ones are not
    ending = (CredentialRefused, ProtocolMismatch)  # what the others met is said by these
    for error in sorted(failed, key=lambda e: not isinstance(e, ending)):
        raise error


async def _owner_named_by(runs: HttpRunQueue) -> str | None:
    """The owner serve names (None: it does not say), asked until serve answers."""
    pauses = WORKER_BACKOFF.pauses()
    while True:
        try:
            return await runs.owner()
        except ControlPlaneUnreachable as exc:
            pause = next(pauses)
            log.warning("%s; retrying in %.1f s", exc, pause)
            await asyncio.sleep(pause)


async def _keep_working(worker: Worker) -> None:
    """A worker that outlives a control plane restart, or its store's outage: retry with
    backoff. A refused credential (CredentialRefused), a serve of another protocol
    (ProtocolMismatch) or any other error ends it, and the process with it."""
    pauses = WORKER_BACKOFF.pauses()
    while True:
        try:
            await worker.run_forever(poll_s=0.5)
            return
        except (ControlPlaneUnreachable, StoreUnavailable) as exc:
            pause = next(pauses)
            log.warning("%s; retrying in %.1f s", exc, pause)
            await asyncio.sleep(pause)
        except Exception as exc:  # the process ends with it: no slot is left idle
            from core.worker.pool import crashed

            crashed(worker.name, exc)
            raise


def _sweep_leftovers() -> None:
    """Before the first run: kill what runs of a T25 that died (SIGKILLed with its
    reaper, or its machine's T25 crashed) left running."""
    from adapters.containment import sweep_leftovers

    sweep_leftovers()


def _tools(
    adapters: Mapping[str, AgentAdapter] | None, run_check: CheckRunner | None
) -> tuple[Mapping[str, AgentAdapter], CheckRunner]:
    """The adapters T25 ships and its QA check runner, unless others are given."""
    if adapters is None:
        from adapters.registry import builtin_adapters

        adapters = builtin_adapters()
    return adapters, run_check or _shipped_check


async def open_intake_forge(config: IntakeConfig) -> Forge:
    """The forge a project's tasks come from, as the operator's own login."""
    from adapters.github_forge import open_forge as open_github

    return await open_github(config.host)


async def open_forge(config: PullRequestConfig) -> Forge:
    """The forge a project's pull requests are on, as the operator's own login (imported when
    a pull request is first opened)."""
    from adapters.github_forge import open_forge as open_github

    return await open_github(config.host)


async def _shipped_check(
    check: QACheck, cwd: Path, abort: asyncio.Event, confine: CheckSandbox
) -> CheckResult:
    """T25's QA check runner, imported when a check first runs (a read never does)."""
    from adapters.checks import run_check

    return await run_check(check, cwd, abort, confine)
