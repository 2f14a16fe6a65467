"""Leases under load and at their edges, against every backend, through the protocol only.

Each test opens several store instances on one database: as far as the store can
tell they are separate processes, each with connections of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from core.domain.events import RunFinished
from core.domain.models import (
    Lease,
    NewRun,
    NewTask,
    Project,
    RunOutcome,
    RunStatus,
    TaskState,
)
from core.errors import LeaseLost
from core.ports import Store
from tests.support.backends import Backend

S = TaskState
OK = RunOutcome(status=RunStatus.SUCCEEDED, exit_code=0)


@pytest.fixture
async def stores(backend: Backend, store: Store) -> AsyncIterator[list[Store]]:
    """Sixteen independent instances on the store's database (the first is `store`)."""
    others = await asyncio.gather(*(backend.open() for _ in range(15)))
    yield [store, *others]
    await asyncio.gather(*(s.close() for s in others))


async def queue_runs(store: Store, count: int) -> None:
    """`count` runs, each of a task of its own (a stage has one queued or running run)."""
    for i in range(count):
        task, _ = await store.create_task(NewTask(project="demo", title=f"load {i}"), actor="alice")
        await store.enqueue_run(NewRun(task_id=task.id, stage=S.IMPLEMENTING, role="dev"))


async def test_sixteen_claimers_claim_each_of_a_thousand_runs_exactly_once(
    stores: list[Store], project: Project
) -> None:
    await queue_runs(stores[0], 1000)

    async def claimer(store: Store, name: str) -> list[Lease]:
        got = []
        while (lease := await store.claim_run(name, 60)) is not None:
            got.append(lease)
        return got

    per_worker = await asyncio.gather(*(claimer(s, f"w{i}") for i, s in enumerate(stores)))

    claimed = Counter(lease.run_id for leases in per_worker for lease in leases)
    assert len(claimed) == 1000 and set(claimed.values()) == {1}
    runs = await stores[0].list_runs()
    assert all(r.status == RunStatus.RUNNING and r.attempts == 1 for r in runs)
    assert len({r.lease_token for r in runs}) == 1000  # one token per claim, store-wide
    assert sum(1 for leases in per_worker if leases) > 1  # the claimers really overlapped


async def test_completion_racing_the_reaper_at_the_deadline_has_exactly_one_winner(
    stores: list[Store], project: Project
) -> None:
    worker, reaper = stores[0], stores[1]
    await queue_runs(worker, 12)
    ttl = 0.2
    leases = [lease for _ in range(12) if (lease := await worker.claim_run("w", ttl)) is not None]
    started = asyncio.get_running_loop().time()

    async def complete_at(lease: Lease, offset: float) -> bool:
        # not a wait: each completion at its moment either side of the deadline
        await asyncio.sleep(max(0.0, started + ttl + offset - asyncio.get_running_loop().time()))
        try:
            await worker.complete_run(lease, OK)
        except LeaseLost:
            return False
        return True

    async def reap_at(offset: float) -> set[str]:
        # not a wait: each reap at its moment either side of the deadline
        await asyncio.sleep(max(0.0, started + ttl + offset - asyncio.get_running_loop().time()))
        return {r.id for r in await reaper.reap_expired()}

    offsets = [-0.03 + 0.005 * i for i in range(len(leases))]  # either side of the deadline
    results = await asyncio.gather(
        *(complete_at(lease, offset) for lease, offset in zip(leases, offsets, strict=False)),
        *(reap_at(offset) for offset in offsets),
    )
    completed = dict(zip((lease.run_id for lease in leases), results[: len(leases)], strict=False))
    reaped = set().union(
        *results[len(leases) :], {r.id for r in await reaper.reap_expired()}
    )  # the next cycle

    finished = {e.run_id for e in await worker.events_after(0) if isinstance(e, RunFinished)}
    for lease in leases:
        run = await worker.get_run(lease.run_id)
        assert run is not None
        won_by_worker, won_by_reaper = completed[lease.run_id], lease.run_id in reaped
        assert won_by_worker != won_by_reaper, (lease.run_id, won_by_worker, won_by_reaper)
        if won_by_worker:
            assert run.status == RunStatus.SUCCEEDED and lease.run_id in finished
        else:
            assert (
                run.status == RunStatus.QUEUED
                and run.exit_code is None
                and lease.run_id not in finished
            )


async def test_a_stale_worker_is_rejected_and_nothing_it_sent_is_attached(
    stores: list[Store], project: Project
) -> None:
    old_worker, reaper, new_worker = stores[:3]
    await queue_runs(old_worker, 1)
    stale = await old_worker.claim_run("old", 0.05)
    assert stale is not None
    await asyncio.sleep(0.2)  # not a wait: the old worker stalls past its deadline ...
    await reaper.reap_expired()
    fresh = await new_worker.claim_run("new", 30)  # ... and the run is someone else's now
    assert fresh is not None and fresh.run_id == stale.run_id and fresh.token > stale.token
    before_run, before_events = (
        await new_worker.get_run(fresh.run_id),
        await new_worker.last_event_id(),
    )

    late = RunOutcome(status=RunStatus.FAILED, exit_code=9, error="late", adapter="x", cost_usd=9.0)
    with pytest.raises(LeaseLost, match="stale"):
        await old_worker.heartbeat(stale, 60)
    with pytest.raises(LeaseLost, match="stale"):
        await old_worker.complete_run(stale, late)
    with pytest.raises(LeaseLost, match="stale"):
        await old_worker.release_run(stale)

    assert await new_worker.get_run(fresh.run_id) == before_run
    assert await new_worker.last_event_id() == before_events
    run, event = await new_worker.complete_run(await new_worker.heartbeat(fresh, 30), OK)
    assert run.status == RunStatus.SUCCEEDED and run.error is None and run.cost_usd == 0.0
    assert run.worker == "new" and event.run_id == run.id


async def test_crashing_workers_cannot_hold_up_the_queue(
    stores: list[Store], project: Project
) -> None:
    """Runs whose workers keep dying fail after their attempts; the rest all finish."""
    store = stores[0]

    async def queued(role: str, max_attempts: int) -> str:
        task, _ = await store.create_task(NewTask(project="demo", title=role), actor="alice")
        new = NewRun(task_id=task.id, stage=S.QA, role=role, max_attempts=max_attempts)
        return (await store.enqueue_run(new))[0].id

    crashers = [await queued("qa", 2) for _ in range(3)]
    healthy = [await queued("ok", 10) for _ in range(20)]
    done: set[str] = set()

    async def worker(s: Store, name: str) -> None:
        for _ in range(400):
            await s.reap_expired(retry_delay_s=0.05)
            lease = await s.claim_run(name, 0.3)
            if lease is None:
                failed = await s.list_runs(status=RunStatus.FAILED)
                if len(done) == len(healthy) and {r.id for r in failed} == set(crashers):
                    return
                await asyncio.sleep(0.02)
                continue
            if lease.run_id in crashers:
                continue  # this worker "dies": the lease is simply never completed
            with contextlib.suppress(LeaseLost):  # a machine too busy to finish in time: retried
                await s.complete_run(lease, OK)
                done.add(lease.run_id)
        raise AssertionError("the queue did not drain")

    await asyncio.wait_for(
        asyncio.gather(*(worker(s, f"w{i}") for i, s in enumerate(stores[:4]))), 60
    )

    for run_id in crashers:
        run = await store.get_run(run_id)
        assert run is not None and run.status == RunStatus.FAILED and run.attempts == 2
    assert done == set(healthy)
