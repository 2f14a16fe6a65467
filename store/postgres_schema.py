"""Opening a Postgres store: reach the server, check the schema is T25's, migrate it.

Migrations from `store/migrations/postgres/` (the same ids and names as SQLite's) are
applied in order, each in its own transaction, and recorded in `schema_migrations`.
The whole check-and-apply runs under a session advisory lock, so any number of
processes opening a new database at the same moment apply each migration exactly
once: the first does the work, the others wait and then find nothing to do.

A schema that holds tables but no `schema_migrations` belongs to someone else and is
refused untouched; one that has seen a migration this code does not know was written
by a newer T25 and is refused too.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from core.errors import StoreError
from store import migrations
from store import postgres_sql as sql

# What a lost connection looks like: the server went away, terminated our backend,
# or the socket closed under a statement. The pool replaces the connection.
CONNECTION_LOST: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.CannotConnectNowError,
    ConnectionError,
    OSError,
)

_FOREIGN_HINT = "point store.url (or T25_DATABASE_URL) at an empty database, or at one written by T25"
_REACH_HINT = "check that Postgres is running and that T25_DATABASE_URL (or store.url) is right"


def is_connection_lost(exc: BaseException) -> bool:
    if isinstance(exc, CONNECTION_LOST):
        return True
    return isinstance(exc, asyncpg.exceptions.InterfaceError) and "closed" in str(exc)


def shown(url: str) -> str:
    """The URL as it may appear in a message: without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def unreachable(url: str, exc: BaseException) -> StoreError:
    return StoreError(f"cannot reach the Postgres store at {shown(url)}: {exc}", hint=_REACH_HINT)


async def _keep_session(con: asyncpg.Connection) -> None:
    """Pool connections are returned as they are: the store never changes session state,
    so asyncpg's default reset (a round trip per release) would be pure cost."""


async def create_pool(url: str, *, min_size: int, max_size: int, application_name: str) -> asyncpg.Pool:
    """A pool on `url`, after the schema is migrated; StoreError if that cannot be done."""
    await migrate(url, application_name=application_name)
    try:
        return await asyncpg.create_pool(
            url, min_size=min_size, max_size=max_size, reset=_keep_session,
            server_settings={"application_name": application_name},
        )
    except (TimeoutError, *CONNECTION_LOST, asyncpg.PostgresError) as exc:
        raise unreachable(url, exc) from exc


async def connect(url: str, *, application_name: str) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(url, server_settings={"application_name": application_name})
    except (TimeoutError, *CONNECTION_LOST, asyncpg.PostgresError) as exc:
        raise unreachable(url, exc) from exc


async def migrate(url: str, *, application_name: str = "t25") -> None:
    """Bring the schema at `url` up to date, once however many processes ask at once."""
    con = await connect(url, application_name=f"{application_name}-migrate")
    try:
        await con.execute(sql.LOCK_FOR_MIGRATION, sql.MIGRATION_LOCK_KEY)
        try:
            await _migrate(con, url)
        finally:
            await con.execute(sql.UNLOCK_FOR_MIGRATION, sql.MIGRATION_LOCK_KEY)
    finally:
        await con.close()


async def _migrate(con: asyncpg.Connection, url: str) -> None:
    known = migrations.load("postgres")
    relations = [r["relname"] for r in await con.fetch(sql.SCHEMA_RELATIONS)]
    if relations and "schema_migrations" not in relations:
        listed = ", ".join(relations[:5]) + (", …" if len(relations) > 5 else "")
        raise StoreError(
            f"{shown(url)} is not a T25 database (its schema holds {len(relations)} other relations: {listed})",
            hint=_FOREIGN_HINT,
        )
    applied: dict[int, Any] = {}
    if relations:
        applied = {r["id"]: r["name"] for r in await con.fetch(sql.APPLIED_MIGRATIONS)}
    newer = sorted(set(applied) - {m.id for m in known})
    if newer:
        raise StoreError(
            f"{shown(url)} was written by a newer T25 (it has migration {newer[-1]}; "
            f"this T25 knows migrations up to {known[-1].id})",
            hint="upgrade T25 to open this store",
        )
    for migration in known:
        if migration.id in applied:
            continue
        async with con.transaction():
            if migration.id == 1:
                await con.execute(sql.CREATE_SCHEMA_MIGRATIONS)
            await con.execute(migration.sql)  # simple protocol: a whole script at once
            await con.execute(sql.RECORD_MIGRATION, migration.id, migration.name)
