"""The stores under faults: "not now" is StoreUnavailable, never a driver's exception.

Postgres runs in a throwaway cluster of this session (tests/support/pg_cluster.py) so it can be
stopped, and its backends terminated, without touching anyone else's; SQLite is locked by
another process, as an operator's long write would.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from core.domain.models import NewTask, Project, TaskState
from core.errors import StoreError, StoreUnavailable
from store import open_store
from tests.support.locks import hold_exclusive_lock, let_go
from tests.support.pg_cluster import HalfOpenLink

PROJECT = Project(name="demo", repo_path="/srv/demo", default_branch="main")


async def _some_work(store, n: int) -> None:
    """`n` operations at once, so the pool holds several connections afterwards."""
    await asyncio.gather(
        *(store.create_task(NewTask(project="demo", title=f"t{i}"), actor="ana") for i in range(n))
    )


@pytest.mark.postgres
async def test_terminated_backends_behind_a_half_open_link_are_retried_on_fresh_connections(
    cluster,
):
    """asyncpg takes a connection whose backend was terminated for open until it hears the
    hang-up; used before that, it raises InternalClientError ("another operation (2) is in
    progress"). The store drops it (and the idle ones beside it) and goes on."""
    name = f"t25_{uuid.uuid4().hex[:12]}"
    cluster.new_database(name)
    async with HalfOpenLink(cluster.port) as link:
        store = await open_store(link.url(name))
        try:
            await store.upsert_project(PROJECT)
            await _some_work(store, 6)
            for _ in range(3):
                assert cluster.terminate(name) >= 1
                await asyncio.sleep(0.2)  # the termination messages arrive; the hang-ups never do
                assert len(await store.list_tasks()) >= 6
                await _some_work(store, 6)  # and all at once, on whatever the pool has left
            assert len(await store.list_tasks()) == 24
        finally:
            await store.close()


@pytest.mark.postgres
async def test_a_stopped_server_is_store_unavailable_and_the_same_store_recovers(cluster):
    name = f"t25_{uuid.uuid4().hex[:12]}"
    store = await open_store(cluster.new_database(name))
    try:
        await store.upsert_project(PROJECT)
        task, _ = await store.create_task(NewTask(project="demo", title="before"), actor="ana")
        cluster.stop()
        calls = [
            store.list_tasks(),
            store.get_task(task.id),
            store.events_after(0),
            store.last_event_id(),
            store.wait_for_events(10**6, 0.5),
            store.create_task(NewTask(project="demo", title="during"), actor="ana"),
        ]
        for call in calls:
            with pytest.raises(StoreUnavailable, match="cannot reach the Postgres store") as e:
                await call
            assert e.value.hint
        cluster.start()
        after, _ = await store.create_task(NewTask(project="demo", title="after"), actor="ana")
        assert [t.title for t in await store.list_tasks()] == ["before", "after"]
        assert after.state is TaskState.RECEIVED
        assert await store.wait_for_events(0, 1.0)
    finally:
        await store.close()


@pytest.mark.postgres
async def test_opening_a_stopped_server_is_unavailable_and_a_missing_database_is_refused(cluster):
    cluster.stop()
    with pytest.raises(StoreUnavailable, match="cannot reach the Postgres store"):
        await open_store(cluster.url("t25"))
    cluster.start()
    with pytest.raises(StoreError, match=r"refused T25.*does not exist") as e:
        await open_store(cluster.url(f"t25_missing_{uuid.uuid4().hex[:8]}"))
    assert not isinstance(e.value, StoreUnavailable)  # that will not pass by waiting


async def test_a_sqlite_file_locked_past_the_busy_timeout_is_unavailable_for_writes_only(tmp_path):
    store = await open_store(f"sqlite:///{tmp_path / 't25.db'}")
    try:
        await store.upsert_project(PROJECT)
        holder = hold_exclusive_lock(tmp_path / "t25.db")
        try:
            assert await store.list_tasks() == []  # WAL: readers are not held up
            with pytest.raises(StoreUnavailable, match="stayed locked for over 10 s") as e:
                await store.create_task(NewTask(project="demo", title="during"), actor="ana")
            assert "try again" in e.value.hint
        finally:
            let_go(holder)
        _task, _ = await store.create_task(NewTask(project="demo", title="after"), actor="ana")
        assert [t.title for t in await store.list_tasks()] == ["after"]
    finally:
        await store.close()


async def test_a_sweep_with_no_lapsed_lease_takes_no_sqlite_write_lock(tmp_path):
    """`t25 run` sweeps twice a second; one stopped (Ctrl-Z) while it held the write lock
    would hold up every other process on the file, so a sweep with nothing to reap only reads."""
    store = await open_store(f"sqlite:///{tmp_path / 't25.db'}")
    try:
        await store.upsert_project(PROJECT)
        holder = hold_exclusive_lock(tmp_path / "t25.db")
        try:
            assert await store.reap_expired(retry_delay_s=1.0) == []
        finally:
            let_go(holder)
    finally:
        await store.close()
