"""The real `t25 serve` (a child process) while its store fails under it.

Postgres is the session's throwaway cluster (tests/support/pg_cluster.py): stopped and started
for real, its backends terminated (only this test database's), reached through a relay
that hangs up late where asyncpg's half-open connection is the fault. SQLite is locked by
another process past its busy timeout. Serve must keep serve_process (503 with Retry-After while
the store is away), keep its event streams whole, say once that the store went and once
that it is back, and exit non-zero, with one line why, only when it cannot go on.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from contextlib import suppress
from pathlib import Path

import httpx
import pytest
from httpx_sse import aconnect_sse

from core.config.schema import DATABASE_URL_ENV
from store import open_store
from tests.support.locks import hold_exclusive_lock, let_go
from tests.support.pg_cluster import HalfOpenLink
from tests.support.pipeline import write_config
from tests.support.serve_process import Serve, serve_healthy, serve_process
from tests.support.serving import CREDENTIAL, WORKER
from tests.support.waiting import until

GONE = "the store is unavailable"
BACK = "the store answers again"


async def _new_task(serve: Serve, title: str) -> str:
    made = await serve.client.post("/tasks", json={"title": title})
    assert made.status_code == 201, made.text
    return made.json()["id"]


async def _locked_before_a_lease_lapses(serve: Serve, db: Path) -> subprocess.Popen:
    """The store's file locked by another process while a worker's lease, taken just
    before, has not been reaped: its lapse is then the sweep's to write under the lock. The
    lease lasts 3 s, then 9, then 27, until the lock is taken before the sweep reaps it."""
    for ttl in (3, 9, 27):
        claimed: list[str] = []
        await until(lambda: _claim(serve, ttl, claimed), what="a run to claim")  # noqa: B023
        holder = hold_exclusive_lock(db)
        if (await serve.client.get(f"/runs/{claimed[0]}")).json()["status"] == "running":
            return holder
        let_go(holder)  # reaped before the lock was taken: again, with a longer lease
    raise AssertionError("the lock took longer than a 27 s lease to take")


async def _claim(serve: Serve, ttl: float, claimed: list[str]) -> bool:
    """Claim the queued run as a worker would (none may be claimable yet after a reap)."""
    got = await serve.client.post(
        "/worker/claim", json={"worker": "w", "ttl_s": ttl}, headers=WORKER
    )
    if got.status_code == 200:
        claimed.append(got.json()["run"]["id"])
    return bool(claimed)


async def _picked_up(serve: Serve, ref: str) -> bool:
    """The sweep moved the task on: it is alive."""
    got = await serve.client.get(f"/tasks/{ref}")
    return got.status_code == 200 and got.json()["task"]["state"] != "RECEIVED"


class Stream:
    """A real SSE client attached to serve's /events, collecting every event it is sent."""

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.events: list[tuple[int, str]] = []
        self.task: asyncio.Task | None = None
        self.attached = asyncio.Event()

    async def __aenter__(self) -> Stream:
        self.task = asyncio.create_task(self._read())
        await asyncio.wait_for(self.attached.wait(), 30)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with suppress(asyncio.CancelledError):
            await self.task

    async def _read(self) -> None:
        async with (
            httpx.AsyncClient(
                base_url=str(self.serve.client.base_url),
                timeout=httpx.Timeout(30, read=None),
                headers=self.serve.client.headers,
            ) as client,
            aconnect_sse(client, "GET", "/events") as source,
        ):
            source.response.raise_for_status()
            self.attached.set()
            async for sse in source.aiter_sse():
                if not sse.data:  # a keepalive comment: httpx-sse hands it on, empty
                    continue
                assert sse.id.isdigit(), f"an event without an id: {sse!r}"
                assert json.loads(sse.data)["kind"] == sse.event, repr(sse)
                self.events.append((int(sse.id), sse.event))

    async def caught_up(self) -> bool:
        assert self.task is not None and not self.task.done(), "the event stream ended"
        health = await self.serve.client.get("/health")
        return (
            health.status_code == 200
            and bool(self.events)
            and self.events[-1][0] == health.json()["last_event_id"]
        )

    async def assert_whole(self, store_url: str) -> None:
        """Every event the store holds, in order, each once: no gap, no duplicate. (Postgres
        may skip an id: a transaction the outage cut short had taken it.)"""
        store = await open_store(store_url)
        try:
            held = [e.id for e in await store.events_after(0, limit=100_000)]
        finally:
            await store.close()
        assert [i for i, _ in self.events] == held


def _database(cluster) -> tuple[str, str]:
    name = f"t25_{uuid.uuid4().hex[:12]}"
    return name, cluster.new_database(name)


@pytest.mark.postgres
async def test_serve_outlives_terminated_backends_of_its_store(shop, tmp_path, cluster):
    """The backends of serve's connections terminated, again and again, while its sweep and
    two workers use them (asyncpg's InternalClientError once escaped and ended serve, exit 0)."""
    write_config(shop)
    name, _ = _database(cluster)
    async with (
        HalfOpenLink(cluster.port) as link,
        serve_process(
            shop, tmp_path, "--workers", "2", env={DATABASE_URL_ENV: link.url(name)}
        ) as serve,
    ):
        terminated = 0
        for round_ in range(5):
            ref = await _new_task(serve, f"task {round_}")
            terminated += cluster.terminate(name)
            await until(lambda ref=ref: _picked_up(serve, ref), what=f"{ref} picked up")
        assert terminated >= 5 and await serve_healthy(serve)
    err = serve.stderr()
    assert "InternalClientError" not in err and "Traceback" not in err, err


@pytest.mark.postgres
async def test_serve_answers_503_through_a_postgres_outage_and_its_stream_goes_on_whole(
    shop, tmp_path, cluster
):
    write_config(shop)
    _, url = _database(cluster)
    async with (
        serve_process(shop, tmp_path, env={DATABASE_URL_ENV: url}) as serve,
        Stream(serve) as stream,
    ):
        for title in ("one", "two"):
            await _new_task(serve, title)
        await until(stream.caught_up, what="the stream caught up")

        cluster.stop()
        for answer in (
            await serve.client.get("/health"),
            await serve.client.get("/tasks"),
            await serve.client.post("/tasks", json={"title": "during"}),
        ):
            assert answer.status_code == 503, answer.text
            assert answer.headers["Retry-After"].isdigit()
            body = answer.json()
            assert body["error"].startswith("cannot reach the Postgres store at ") and body["hint"]
        await until(lambda: serve.said(GONE), what="the outage said")
        assert serve.proc.poll() is None
        cluster.start()
        await until(lambda: serve_healthy(serve), what="healthy again")
        await until(lambda: serve.said(BACK), what="the recovery said")

        written = [await _new_task(serve, f"after {n}") for n in range(3)]
        await until(stream.caught_up, what="the stream caught up after the outage")
        await stream.assert_whole(url)
        created = [i for i, kind in stream.events if kind == "task_created"]
        assert len(created) == 2 + len(written)  # "during" was refused, not half-written
    assert serve.said(GONE) == 1 and serve.said(BACK) == 1, serve.stderr()


async def test_serve_waits_out_a_sqlite_file_locked_past_its_busy_timeout(shop, tmp_path):
    """Another process holds the store's file with BEGIN EXCLUSIVE for longer than the 10 s
    busy timeout while a worker's lease lapses: the sweep's write (the run back to the
    queue) gives up, and serve waits instead of ending. (With nothing to write, a sweep
    only reads, which the lock does not hold up.)"""
    write_config(shop)
    env = {"FACTORY_WORKER_CREDENTIAL": CREDENTIAL}
    async with serve_process(shop, tmp_path, env=env) as serve, Stream(serve) as stream:
        ref = await _new_task(serve, "before")
        await until(lambda: _picked_up(serve, ref), what=f"{ref} picked up")
        await until(stream.caught_up, what="the stream caught up")
        holder = await _locked_before_a_lease_lapses(serve, shop / ".factory" / "t25.db")
        try:
            await until(lambda: serve.said(GONE), timeout=90, what="the lock said")
            assert serve.proc.poll() is None
            assert (await serve.client.get("/health")).status_code == 200  # WAL: reads go on
        finally:
            let_go(holder)
        await until(lambda: serve.said(BACK), what="the recovery said")
        ref = await _new_task(serve, "after")
        await until(lambda: _picked_up(serve, ref), what=f"{ref} picked up")
        await until(stream.caught_up, what="the stream caught up after the lock")
        await stream.assert_whole(f"sqlite:///{shop / '.factory' / 't25.db'}")
    assert "stayed locked for over 10 s" in serve.stderr()
    assert serve.said(GONE) == 1 and serve.said(BACK) == 1, serve.stderr()


@pytest.mark.postgres
async def test_serve_gives_up_with_one_line_when_the_store_stays_away_past_its_patience(
    shop, tmp_path, cluster
):
    write_config(shop)
    _, url = _database(cluster)
    async with serve_process(
        shop, tmp_path, "--store-patience", "1", env={DATABASE_URL_ENV: url}
    ) as serve:
        cluster.stop()
        await until(lambda: serve.proc.poll() is not None, what="serve exited")
    assert serve.proc.returncode == 1
    err = serve.stderr()
    assert (
        "t25: error: the store has been unavailable for over 1 s (cannot reach the Postgres "
        "store at " in err
    ), err
    assert "hint: start T25 again once the store is back" in err
    assert "Traceback" not in err


@pytest.mark.postgres
async def test_serve_exits_non_zero_when_its_database_refuses_it_for_good(shop, tmp_path, cluster):
    write_config(shop)
    name, url = _database(cluster)
    async with serve_process(shop, tmp_path, env={DATABASE_URL_ENV: url}) as serve:
        cluster.psql(f'DROP DATABASE "{name}" WITH (FORCE)')
        await until(lambda: serve.proc.poll() is not None, what="serve exited")
    assert serve.proc.returncode == 1
    err = serve.stderr()
    assert (
        f't25: error: the Postgres store at {url} refused T25: database "{name}" does not exist'
        in err
    ), err
    assert "Traceback" not in err


async def test_serve_without_workers_leaves_no_pending_task_to_be_destroyed(shop, tmp_path):
    """Each sweep pass used to leave a task behind, which the garbage collector then
    destroyed with "Task was destroyed but it is pending!" about once a second."""
    write_config(shop)
    debug = {"PYTHONASYNCIODEBUG": "1", "PYTHONWARNINGS": "default"}
    async with serve_process(shop, tmp_path, env=debug) as serve:
        for _ in range(40):  # some seconds of passes, and garbage to collect meanwhile
            assert (await serve.client.get("/health")).status_code == 200
            await serve.client.get("/tasks")
            await asyncio.sleep(0.1)
    err = serve.stderr()
    assert "Task was destroyed but it is pending!" not in err, err
    assert "Task exception was never retrieved" not in err, err
