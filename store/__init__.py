"""Backends of the Store contract (`core.ports.Store`), chosen by URL.

    sqlite:///relative/path.db     the embedded store: one file, WAL mode (the default)
    sqlite:////absolute/path.db    (three slashes, then the path: absolute paths show four)
    postgresql://user@host/db      the production store: Postgres, asyncpg connections in the store's own pool
    postgres://user@host/db        (the same)

Importing this package is cheap: a backend's driver is imported only when a store of
that kind is opened.

Failures reach callers as `core.errors` classes, never as a driver's exceptions. "Not
now" is StoreUnavailable: the server is restarting or refused the connection, our
connection was terminated, SQLite's file stayed locked past its busy timeout. The same
call may succeed later, and callers that can wait (the sweep, serve's event stream) do.
Anything else the store refuses is a plain StoreError: not a T25 database, written by
a newer T25, a database that refuses to let T25 in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from core.errors import StoreError

if TYPE_CHECKING:
    from core.domain.clock import Clock
    from core.ports import Store

__all__ = ["open_store"]

_ACCEPTED = "sqlite:///path/to/t25.db or postgresql://user@host/database"


async def open_store(url: str, *, clock: Clock | None = None) -> Store:
    """Open the store at `url`, creating and migrating it as needed.

    `clock` stamps what the embedded store writes (a seeded board's timeline); Postgres
    keeps the database server's clock, the one its workers on many hosts share, and
    refuses another. StoreError if the URL names no backend T25 has, or the database
    cannot be used.
    """
    scheme = urlsplit(url).scheme.lower()
    if scheme == "sqlite":
        from store.sqlite import SqliteStore

        if clock is None:
            return await SqliteStore.open(_sqlite_path(url), url=url)
        return await SqliteStore.open(_sqlite_path(url), url=url, clock=clock)
    if scheme in ("postgresql", "postgres"):
        if clock is not None:
            raise StoreError(
                "a Postgres store keeps its server's clock; it takes no other",
                hint="seed a board with a clock of its own on a SQLite store",
            )
        from store.postgres import PostgresStore

        return await PostgresStore.open(url)
    raise StoreError(
        f"unknown store URL scheme {scheme + ':' if scheme else '(none)'} in {url!r}",
        hint=f"T25 accepts {_ACCEPTED}",
    )


def _sqlite_path(url: str) -> str:
    """`sqlite:///rel.db` → `rel.db`, `sqlite:////abs.db` → `/abs.db` (SQLAlchemy's convention)."""
    prefix = "sqlite:///"
    if not url.lower().startswith(prefix) or len(url) == len(prefix):
        raise StoreError(
            f"{url!r} is not a SQLite store URL with a file path",
            hint="write sqlite:///relative/path.db or sqlite:////absolute/path.db",
        )
    path = url[len(prefix) :]
    if path == ":memory:" or path.startswith("file:"):
        raise StoreError(
            f"{url!r} names no file: the T25 store is a file shared by every T25 process",
            hint="write sqlite:///.factory/t25.db",
        )
    return path
