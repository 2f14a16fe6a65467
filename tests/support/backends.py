"""The store's backends, and their fixtures (a plugin of tests/conftest.py): every contract
test runs against every backend.

A backend is a small class that knows how to open a store on a fresh database (and
another instance on the same one, to race two processes) and how to tamper with a
stored blob. The tests stay the same for every backend.

Postgres comes from T25_TEST_PG_DSN (default: the loopback server). A template
database is migrated once per session; each test gets a clone of it, dropped
afterwards (the contract suite's clones are made a little ahead: see `Clones`). Without
a reachable server the Postgres tests skip, with the reason; with T25_REQUIRE_PG=1 (as
.ci/run sets) they fail instead.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

import pytest

from core.domain.models import Project
from core.ports import Store
from store import open_store

PG_DSN = os.environ.get("T25_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
REQUIRE_PG = os.environ.get("T25_REQUIRE_PG") == "1"


class Backend(Protocol):
    async def open(self) -> Store: ...
    async def corrupt_blob(self, sha256: str) -> None: ...
    async def corrupt_chunk(self, sha256: str, n: int) -> None: ...
    async def drop(self) -> None: ...


class SqliteBackend:
    """A real database file in the test's temporary directory."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "t25.db"
        self.url = f"sqlite:///{self.path}"

    async def open(self) -> Store:
        return await open_store(self.url)

    async def corrupt_blob(self, sha256: str) -> None:
        def tamper() -> None:
            db = sqlite3.connect(self.path)
            try:
                with db:
                    db.execute(
                        "UPDATE blobs SET content = CAST(content || x'00' AS BLOB) WHERE sha256 = ?",
                        (sha256,),
                    )
            finally:
                db.close()

        await asyncio.to_thread(tamper)

    async def corrupt_chunk(self, sha256: str, n: int) -> None:
        def tamper() -> None:
            db = sqlite3.connect(self.path)
            try:
                with db:
                    db.execute(
                        "UPDATE blob_chunks SET content = CAST(x'00' || substr(content, 2) AS BLOB)"
                        " WHERE sha256 = ? AND n = ?",
                        (sha256, n),
                    )
            finally:
                db.close()

        await asyncio.to_thread(tamper)

    async def drop(self) -> None:
        """Nothing to do: tmp_path goes away by itself."""


def database_url(name: str) -> str:
    """T25_TEST_PG_DSN, pointed at another database on the same server."""
    return urlunsplit(urlsplit(PG_DSN)._replace(path=f"/{name}"))


async def admin(*statements: str) -> None:
    import asyncpg

    con = await asyncpg.connect(PG_DSN, timeout=5)
    try:
        for statement in statements:
            await con.execute(statement)
    finally:
        await con.close()


def _in_thread(coro: Callable[[], Awaitable[None]]) -> None:
    """Run a coroutine to completion on a loop of its own (a session fixture has none)."""
    import threading

    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(coro())  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """A database migrated once per session, to be cloned by every Postgres test."""
    name = f"t25_template_{uuid.uuid4().hex[:12]}"

    async def create() -> None:
        await admin(f'CREATE DATABASE "{name}"')
        store = await open_store(database_url(name))
        await store.close()

    try:
        _in_thread(create)
    except (TimeoutError, OSError) as exc:
        reason = f"no Postgres at {PG_DSN} ({exc}); set T25_TEST_PG_DSN"
        if REQUIRE_PG:
            pytest.fail(f"T25_REQUIRE_PG=1 but {reason}")
        pytest.skip(reason)
    yield name
    _in_thread(lambda: admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


class Clones:
    """Fresh clones of the session's template database, made ahead of the tests that take them.

    Cloning takes a few hundred milliseconds on a busy server and the contract tests take
    some hundred clones; made on threads of their own while the tests before run (two at a
    time: the server makes two in about 70 % of the time of one after the other), they are
    mostly ready when asked for. Every test still gets a database no other test has used."""

    AHEAD = 3

    def __init__(self, template: str) -> None:
        self.template = template
        self._maker = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pg-clones")
        self._made: deque[Future[str]] = deque()

    def _clone(self) -> str:
        name = f"t25_{uuid.uuid4().hex}"
        asyncio.run(admin(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"'))
        return name

    def take(self) -> Future[str]:
        """The next clone (a future: it may still be in the making), and another one begun."""
        while len(self._made) < self.AHEAD + 1:
            self._made.append(self._maker.submit(self._clone))
        return self._made.popleft()

    def drop(self, name: str) -> None:
        """Drop a clone a test is done with, on the cloning threads, without waiting for it."""
        self._maker.submit(asyncio.run, admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    def close(self) -> None:
        """Drop the clones no test took (the drops begun are done by then)."""
        self._maker.shutdown(wait=True)
        left = [f.result() for f in self._made if f.exception() is None]
        _in_thread(lambda: admin(*(f'DROP DATABASE IF EXISTS "{n}" WITH (FORCE)' for n in left)))


@pytest.fixture(scope="session")
def pg_clones(pg_template: str) -> Iterator[Clones]:
    clones = Clones(pg_template)
    yield clones
    clones.close()


class PostgresBackend:
    """A fresh clone of the session's template database on the test server: made by
    `create`, or taken from `clones`, which also drops it."""

    def __init__(self, template: str, clones: Clones | None = None) -> None:
        self.name = f"t25_{uuid.uuid4().hex}"
        self.template = template
        self.url = database_url(self.name)
        self.created = False
        self._clones = clones

    async def create(self) -> None:
        if self._clones is not None:
            self.name = await asyncio.wrap_future(self._clones.take())
            self.url = database_url(self.name)
        else:
            await admin(f'CREATE DATABASE "{self.name}" TEMPLATE "{self.template}"')
        self.created = True

    async def open(self) -> Store:
        return await open_store(self.url)

    async def corrupt_blob(self, sha256: str) -> None:
        import asyncpg

        con = await asyncpg.connect(self.url)
        try:
            await con.execute(
                "UPDATE blobs SET content = content || '\\x00'::bytea WHERE sha256 = $1", sha256
            )
        finally:
            await con.close()

    async def corrupt_chunk(self, sha256: str, n: int) -> None:
        import asyncpg

        con = await asyncpg.connect(self.url)
        try:
            await con.execute(
                "UPDATE blob_chunks SET content = '\\x00'::bytea || substr(content, 2)"
                " WHERE sha256 = $1 AND n = $2",
                sha256,
                n,
            )
        finally:
            await con.close()

    async def drop(self) -> None:
        if self.created and self._clones is not None:
            self._clones.drop(self.name)
        elif self.created:
            await admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


@pytest.fixture
async def pg_database(pg_clones: Clones) -> AsyncIterator[PostgresBackend]:
    """A fresh clone of the session's template on the test server, made ahead and dropped
    behind by the session's clones (a test of the Postgres store alone)."""
    backend = PostgresBackend(pg_clones.template, pg_clones)
    await backend.create()
    yield backend
    await backend.drop()


async def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return SqliteBackend(tmp_path)


async def _postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    clones = request.getfixturevalue("pg_clones")
    backend = PostgresBackend(clones.template, clones)
    await backend.create()
    return backend


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], Awaitable[Backend]]] = {
    "sqlite": _sqlite,
    "postgres": _postgres,
}
MARKS = {"postgres": [pytest.mark.postgres]}


@pytest.fixture(params=[pytest.param(name, marks=MARKS.get(name, [])) for name in sorted(BACKENDS)])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    backend = await BACKENDS[request.param](request, tmp_path)
    yield backend
    await backend.drop()


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[Store]:
    s = await backend.open()
    yield s
    await s.close()


@pytest.fixture
async def second_store(backend: Backend, store: Store) -> AsyncIterator[Store]:
    """An independent instance on the same database: another process, as far as the store knows."""
    s = await backend.open()
    yield s
    await s.close()


@pytest.fixture
def corrupt_blob(backend: Backend) -> Callable[[str], Awaitable[None]]:
    """Change the stored content of a blob behind the store's back."""
    return backend.corrupt_blob


@pytest.fixture
async def project(store: Store) -> Project:
    return await store.upsert_project(
        Project(name="demo", repo_path="/srv/demo", default_branch="main")
    )


@pytest.fixture
def corrupt_chunk(backend: Backend) -> Callable[[str, int], Awaitable[None]]:
    """Change one stored chunk of a chunked blob behind the store's back."""
    return backend.corrupt_chunk
