"""Opening a Postgres store: reach the server, check the schema is T25's, migrate it,
and pool the connections the store lends to its operations (`ConnectionPool`).

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

import asyncio
import contextlib
from collections import deque
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from core.errors import StoreError, StoreUnavailable
from store import migrations
from store import postgres_sql as sql

# What a lost connection looks like: the server went away, terminated our backend,
# or the socket closed under a statement. The pool replaces the connection.
CONNECTION_LOST: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.CannotConnectNowError,
    # asyncpg's protocol in a state it cannot leave: a terminated backend whose goodbye
    # arrived while the connection sat idle leaves it waiting for a reply that never
    # comes ("another operation (2) is in progress"). The connection is unusable.
    asyncpg.exceptions.InternalClientError,
    ConnectionError,
    OSError,  # TimeoutError too
)
# The server answered, but is busy for now: the statement was rolled back, and the same
# statement may succeed in a moment.
BUSY: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.TransactionRollbackError,  # serialization failure, deadlock
    asyncpg.exceptions.LockNotAvailableError,
)

# What the driver raises when it cannot do what it was asked: lost, or refused by the server.
DRIVER_FAILURES: tuple[type[BaseException], ...] = (*CONNECTION_LOST, asyncpg.PostgresError)

IDLE_LIFETIME_S = 300.0  # asyncpg's default max_inactive_connection_lifetime

_FOREIGN_HINT = (
    "point store.url (or T25_DATABASE_URL) at an empty database, or at one written by T25"
)
_REACH_HINT = "check that Postgres is running and that T25_DATABASE_URL (or store.url) is right"


def is_connection_lost(exc: BaseException) -> bool:
    if isinstance(exc, CONNECTION_LOST):
        return True
    return isinstance(exc, asyncpg.exceptions.InterfaceError) and "closed" in str(exc)


def is_transient(exc: BaseException) -> bool:
    """Unreachable or busy for now: the same call may succeed later (StoreUnavailable)."""
    return is_connection_lost(exc) or isinstance(exc, BUSY)


def shown(url: str) -> str:
    """The URL as it may appear in a message: without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def unreachable(url: str, exc: BaseException) -> StoreError:
    """The error for a failure of the driver: StoreUnavailable when it may pass (a lost
    connection, a restart, a busy server), StoreError when the server refuses us for good
    (the database is gone, the role may not log in)."""
    reason = str(exc) or type(exc).__name__
    if is_transient(exc):
        return StoreUnavailable(
            f"cannot reach the Postgres store at {shown(url)}: {reason}", hint=_REACH_HINT
        )
    return StoreError(f"the Postgres store at {shown(url)} refused T25: {reason}", hint=_REACH_HINT)


class ConnectionPool:
    """The store's connections to its database, lent out one operation at a time.

    asyncpg's own pool costs more client CPU per loan than a one-statement claim: every
    release goes through a task (behind `asyncio.shield`) and re-arms an inactivity timer,
    and the client is one thread sharing the CPUs with the server (bench/leases.py: about a
    third of T25's client time per claim-and-complete; bench/store_pool.py, a whole pipeline
    with output streaming and readers: see store/postgres.py). Here a loan is a list pop and a
    return is a list push, neither waiting for a turn of the event loop. Connections open on
    demand up to `max_size`; past that, borrowers wait in line. Like asyncpg's, the pool
    closes connections left idle for `idle_lifetime_s`, down to `min_size`, but checks for
    them on one timer of its own rather than one per release. A connection that is closed
    or still in a transaction is never lent again. Session state is never reset: the store
    never changes it.
    """

    def __init__(
        self,
        url: str,
        *,
        min_size: int,
        max_size: int,
        application_name: str,
        idle_lifetime_s: float = IDLE_LIFETIME_S,
    ) -> None:
        self._url = url
        self._min_size = min_size
        self._max_size = max_size
        self._application_name = application_name
        self._idle_lifetime_s = idle_lifetime_s
        # (connection, when it came back); the most recently used last: it is lent first
        self._idle: list[tuple[asyncpg.Connection, float]] = []
        self._size = 0  # connections open, being opened, or promised to a waiter
        self._waiters: deque[asyncio.Future[asyncpg.Connection | None]] = deque()
        self._trimmer: asyncio.TimerHandle | None = None
        self._closers: set[asyncio.Task[None]] = set()
        self._closing = False
        self._drained: asyncio.Future[None] | None = None

    async def start(self) -> None:
        """Open the first `min_size` connections; if one cannot be, close the others and raise."""
        loop = asyncio.get_running_loop()
        opened = await asyncio.gather(
            *(self._open() for _ in range(self._min_size)), return_exceptions=True
        )
        self._idle = [(con, loop.time()) for con in opened if isinstance(con, asyncpg.Connection)]
        self._size = len(self._idle)
        failed = [exc for exc in opened if isinstance(exc, BaseException)]
        if failed:
            await self.close()
            raise failed[0]
        self._trimmer = loop.call_later(self._idle_lifetime_s / 2, self._trim)

    async def acquire(self) -> asyncpg.Connection:
        if self._closing:
            raise asyncpg.InterfaceError("the store's connection pool is closing")
        while self._idle:
            con, _ = self._idle.pop()
            if not con.is_closed():
                return con
            self._size -= 1  # lost while idle (the server went away): open another below
        if self._size < self._max_size:
            self._size += 1
        else:
            handed = await self._wait()
            if handed is not None:
                return handed
            # else a connection was dropped, and its place passed to us
        try:
            return await self._open()
        except BaseException:
            self._free_place()
            raise

    def release(self, con: asyncpg.Connection) -> None:
        """Take `con` back. A statement its borrower was cancelled in is being cancelled on
        the server by asyncpg, and the next borrower's first statement waits for that."""
        if con.is_closed() or con.is_in_transaction():
            con.terminate()
            self._free_place()
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(con)
                return
        self._idle.append((con, asyncio.get_running_loop().time()))
        if self._closing:
            self._wake_close()

    async def execute(self, statement: str) -> None:
        con = await self.acquire()
        try:
            await con.execute(statement)
        except BaseException as exc:
            self.discard_if_lost(con, exc)
            raise
        finally:
            self.release(con)

    def discard_if_lost(self, con: asyncpg.Connection, exc: BaseException) -> None:
        """Call before `release` when a statement on `con` failed. A connection lost is
        never lent again, even one asyncpg still takes for open (a half-open connection,
        the InternalClientError above); and the idle ones beside it are closed too: what
        dropped one (a restart, a mass terminate) has likely dropped them, perhaps as
        silently, and a borrower after a restart should meet fresh connections."""
        if not is_connection_lost(exc):
            return
        con.terminate()
        loop = asyncio.get_running_loop()
        while self._idle:
            idle, _ = self._idle.pop()
            self._size -= 1
            closer = loop.create_task(_close_quietly(idle))
            self._closers.add(closer)
            closer.add_done_callback(self._closers.discard)

    async def close(self) -> None:
        """Close every connection, waiting for those lent out to come back."""
        self._closing = True
        if self._trimmer is not None:
            self._trimmer.cancel()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(
                    asyncpg.InterfaceError("the store's connection pool is closing")
                )
        while self._size:
            idle, self._idle = self._idle, []
            self._size -= len(idle)
            await asyncio.gather(*(con.close(timeout=2) for con, _ in idle), return_exceptions=True)
            if self._size:
                self._drained = asyncio.get_running_loop().create_future()
                await self._drained
        await asyncio.gather(*self._closers)

    async def _open(self) -> asyncpg.Connection:
        return await _connected(self._url, self._application_name)

    async def _wait(self) -> asyncpg.Connection | None:
        waiter: asyncio.Future[asyncpg.Connection | None] = (
            asyncio.get_running_loop().create_future()
        )
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if not waiter.done() or waiter.cancelled():
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            elif waiter.exception() is None:  # served just as we were cancelled: pass it on
                con = waiter.result()
                if con is None:
                    self._free_place()
                else:
                    self.release(con)
            raise

    def _trim(self) -> None:
        """Close the connections idle for `idle_lifetime_s`, least recently used first."""
        loop = asyncio.get_running_loop()
        stale = loop.time() - self._idle_lifetime_s
        while self._idle and self._idle[0][1] <= stale and self._size > self._min_size:
            con, _ = self._idle.pop(0)
            self._size -= 1
            closer = loop.create_task(_close_quietly(con))
            self._closers.add(closer)
            closer.add_done_callback(self._closers.discard)
        self._trimmer = loop.call_later(self._idle_lifetime_s / 2, self._trim)

    def _free_place(self) -> None:
        """A connection is gone: its place goes to the first borrower in line, if any."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._size -= 1
        if self._closing:
            self._wake_close()

    def _wake_close(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)


async def _close_quietly(con: asyncpg.Connection) -> None:
    with contextlib.suppress(Exception):  # a connection that cannot say goodbye is gone anyway
        await con.close(timeout=2)


async def create_pool(
    url: str, *, min_size: int, max_size: int, application_name: str
) -> ConnectionPool:
    """A pool on `url`, after the schema is migrated; StoreError if that cannot be done."""
    await migrate(url, application_name=application_name)
    pool = ConnectionPool(
        url, min_size=min_size, max_size=max_size, application_name=application_name
    )
    try:
        await pool.start()
    except DRIVER_FAILURES as exc:
        raise unreachable(url, exc) from exc
    return pool


async def connect(url: str, *, application_name: str) -> asyncpg.Connection:
    try:
        return await _connected(url, application_name)
    except DRIVER_FAILURES as exc:
        raise unreachable(url, exc) from exc


async def _connected(url: str, application_name: str) -> asyncpg.Connection:
    """A connection whose text parameters may hold NUL. Postgres text cannot: an agent's
    error or model name (written by an in-process worker, nothing checked in between) would
    fail its whole statement, so NUL is kept as U+FFFD, as in event payloads."""
    con = await asyncpg.connect(url, server_settings={"application_name": application_name})
    try:
        await con.set_type_codec(
            "text", schema="pg_catalog", format="text", encoder=_without_nul, decoder=str
        )
    except BaseException:
        await con.close()
        raise
    return con


def _without_nul(value: str) -> str:
    return value.replace("\x00", "\ufffd")


async def migrate(url: str, *, application_name: str = "t25") -> None:
    """Bring the schema at `url` up to date, once however many processes ask at once."""
    con = await connect(url, application_name=f"{application_name}-migrate")
    try:
        await con.execute(sql.LOCK_FOR_MIGRATION, sql.MIGRATION_LOCK_KEY)
        try:
            await _migrate(con, url)
        finally:
            await con.execute(sql.UNLOCK_FOR_MIGRATION, sql.MIGRATION_LOCK_KEY)
    except (
        Exception
    ) as exc:  # lost mid-way: each migration is its own transaction, so none is half-done
        if is_transient(exc):
            raise unreachable(url, exc) from exc
        raise
    finally:
        await _close_quietly(con)


async def _applied(con: asyncpg.Connection, url: str) -> dict[int, Any]:
    """The migrations already applied, by id (none in an empty schema); a schema that holds
    relations but no migration table is another program's and refused."""
    relations = [r["relname"] for r in await con.fetch(sql.SCHEMA_RELATIONS)]
    if not relations:
        return {}
    if "schema_migrations" not in relations:
        listed = ", ".join(relations[:5]) + (", …" if len(relations) > 5 else "")
        raise StoreError(
            f"{shown(url)} is not a T25 database (its schema holds {len(relations)} other relations: {listed})",
            hint=_FOREIGN_HINT,
        )
    return {r["id"]: r["name"] for r in await con.fetch(sql.APPLIED_MIGRATIONS)}


async def _migrate(con: asyncpg.Connection, url: str) -> None:
    known = migrations.load("postgres")
    applied = await _applied(con, url)
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
