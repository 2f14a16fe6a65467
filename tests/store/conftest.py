"""Store fixtures: every contract test runs against every backend.

A backend is a small class that knows how to open a store on a fresh database (and
another instance on the same one, to race two processes) and how to tamper with a
stored blob. Adding Postgres means adding one class to BACKENDS; the tests stay as
they are.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Protocol

import pytest

from core.models import Project
from core.store import Store
from store import open_store


class Backend(Protocol):
    async def open(self) -> Store: ...
    async def corrupt_blob(self, sha256: str) -> None: ...
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
                    db.execute("UPDATE blobs SET content = CAST(content || x'00' AS BLOB) WHERE sha256 = ?", (sha256,))
            finally:
                db.close()

        await asyncio.to_thread(tamper)

    async def drop(self) -> None:
        """Nothing to do: tmp_path goes away by itself."""


BACKENDS: dict[str, Callable[[Path], Backend]] = {"sqlite": SqliteBackend}


@pytest.fixture(params=sorted(BACKENDS))
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    backend = BACKENDS[request.param](tmp_path)
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
    return await store.upsert_project(Project(name="demo", repo_path="/srv/demo", default_branch="main"))
