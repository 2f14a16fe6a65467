"""Opening a SQLite store file: is it T25's, and is its schema up to date?

A T25 file carries a fixed `application_id` in its header. A file that is not SQLite,
or a SQLite database that belongs to someone else, is refused before anything is
written to it. A new (or empty) file becomes a T25 database: numbered migrations from
`store/migrations/sqlite/` are applied in order, each in its own BEGIN IMMEDIATE
transaction, and recorded in `schema_migrations`. A file that has seen a migration
this code does not know was written by a newer T25 and is refused.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

import aiosqlite

from core.domain.backoff import Backoff, retry
from core.errors import StoreError, StoreUnavailable
from store import migrations
from store import sqlite_sql as sql

APPLICATION_ID = 0x54323521  # "T25!"
BUSY_TIMEOUT_MS = 10_000
MIN_SQLITE = (3, 37, 0)  # STRICT tables (3.37) and RETURNING (3.35)

_SMALLEST_SQLITE_FILE = 512  # one page of the smallest page size
_SQLITE_NOTADB = 26
_CONNECTION_PRAGMAS = (f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}", "PRAGMA foreign_keys = ON")
# These are written into the file: applied only once it is known to be ours.
_FILE_PRAGMAS = ("PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL")

_FOREIGN_HINT = "point the store at a new file, or at a .factory/t25.db written by T25"
_OPEN_HINT = "check the file's permissions and the free disk space"


# Switching a new file to WAL takes a lock SQLite's busy timeout skips: an open that meets
# it is tried again, OPEN_ATTEMPTS times in all, after these pauses (about 23 s in all).
OPEN_ATTEMPTS = 50
OPEN_BACKOFF = Backoff(0.02, 0.5)


async def connect(path: Path) -> aiosqlite.Connection:
    """A connection to the T25 database at `path`, created and migrated as needed.

    Several processes may open a new file at once; the one switching it to WAL holds a
    lock that makes the others fail at once with "database is locked" (SQLite does not
    wait on the busy timeout there), so such an open is retried after a short pause."""
    try:
        return await retry(
            lambda _: _connect(path),
            pauses=OPEN_BACKOFF.pauses(OPEN_ATTEMPTS - 1),
            transient=lambda exc: isinstance(exc, _Locked),
        )
    except _Locked:
        raise StoreUnavailable(
            f"cannot open the store {path}: it stayed locked",
            hint="another process holds it; try again",
        ) from None


class _Locked(Exception):
    pass


async def _connect(path: Path) -> aiosqlite.Connection:
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise StoreError(
            f"SQLite {sqlite3.sqlite_version} is too old for the T25 store",
            hint=f"T25 needs SQLite {'.'.join(map(str, MIN_SQLITE))} or newer (a newer Python brings one)",
        )
    await asyncio.to_thread(_check_file, path)
    db = await aiosqlite.connect(path, isolation_level=None)  # transactions are explicit
    try:
        db.row_factory = sqlite3.Row
        for pragma in _CONNECTION_PRAGMAS:
            await db.execute_fetchall(pragma)
        await _check_identity(db, path)  # only reads: a foreign file stays untouched
        for pragma in _FILE_PRAGMAS:
            await db.execute_fetchall(pragma)
        await _migrate(db, path)
    except sqlite3.DatabaseError as e:
        await db.close()
        if getattr(e, "sqlite_errorcode", None) == _SQLITE_NOTADB:
            raise StoreError(f"{path} is not a T25 database ({e})", hint=_FOREIGN_HINT) from e
        if "database is locked" in str(e):
            raise _Locked() from e
        raise StoreError(f"cannot open the store {path}: {e}", hint=_OPEN_HINT) from e
    except BaseException:
        await db.close()
        raise
    return db


@asynccontextmanager
async def transaction(db: aiosqlite.Connection) -> AsyncIterator[aiosqlite.Connection]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back if anything raises (cancellation included).

    aiosqlite runs queued statements in order even when their awaiter was cancelled,
    so the ROLLBACK always lands after whatever the transaction had sent.
    """
    try:
        await db.execute_fetchall("BEGIN IMMEDIATE")
        yield db
        await db.execute_fetchall("COMMIT")
    except BaseException:
        try:
            await db.execute_fetchall("ROLLBACK")
        except sqlite3.OperationalError:  # BEGIN failed, or COMMIT landed: nothing to undo
            pass
        raise


def _check_file(path: Path) -> None:
    """The blocking part: refuse a directory, create the folder of a new file.

    The file itself is never opened here, only through SQLite: closing any descriptor
    of a database file drops every POSIX lock this process holds on it, including
    those of the store connections already open in this process. Another process
    closing its last connection would then take the database for unused, checkpoint
    and delete the WAL under them, and their later commits could be lost (under load,
    bench/leases.py saw acknowledged claims and completions go missing before this). A file that is not SQLite is
    refused by SQLite itself ("file is not a database") before anything is written;
    one too short to be SQLite (SQLite would take it for a new, empty database and
    write over it) is refused from its size alone.
    """
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a T25 database", hint=_FOREIGN_HINT)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    elif 0 < path.stat().st_size < _SMALLEST_SQLITE_FILE:  # an empty file is a new database
        raise StoreError(
            f"{path} is not a T25 database (it is not SQLite at all)", hint=_FOREIGN_HINT
        )


async def _check_identity(db: aiosqlite.Connection, path: Path) -> None:
    """Ours: it carries T25's application_id, or it is an empty database we may create."""
    app_id, objects = await _first_row(db, sql.IDENTITY)
    if app_id == APPLICATION_ID:
        return
    if app_id != 0 or objects:
        raise StoreError(
            f"{path} is not a T25 database (application_id {app_id:#x}, {objects} schema objects)",
            hint=_FOREIGN_HINT,
        )


async def _first_row(db: aiosqlite.Connection, statement: str) -> sqlite3.Row:
    """The row of a statement that returns one (a PRAGMA, a count)."""
    found = list(await db.execute_fetchall(statement))
    return found[0]


async def _migrate(db: aiosqlite.Connection, path: Path) -> None:
    """Apply each pending migration in its own transaction.

    Identity and the applied set are re-read under the write lock, so processes
    opening a new file at the same moment apply every migration exactly once.
    """
    known = migrations.load("sqlite")
    for migration in known:
        applied = await _applied(db)
        _refuse_newer(path, applied, known)
        if migration.id in applied:
            continue
        async with transaction(db):
            await _check_identity(db, path)
            applied = await _applied(db)
            _refuse_newer(path, applied, known)
            if migration.id in applied:  # another process got here first
                continue
            if migration.id == 1:
                await db.execute_fetchall(f"PRAGMA application_id = {APPLICATION_ID}")
                await db.execute_fetchall(sql.CREATE_SCHEMA_MIGRATIONS)
            for statement in _statements(migration.sql):
                await db.execute_fetchall(statement)
            await db.execute_fetchall(sql.RECORD_MIGRATION, (migration.id, migration.name))


async def _applied(db: aiosqlite.Connection) -> set[int]:
    if not await db.execute_fetchall(sql.HAS_SCHEMA_MIGRATIONS):
        return set()
    return {r["id"] for r in await db.execute_fetchall(sql.APPLIED_MIGRATIONS)}


def _refuse_newer(path: Path, applied: set[int], known: list[migrations.Migration]) -> None:
    newer = sorted(applied - {m.id for m in known})
    if newer:
        raise StoreError(
            f"{path} was written by a newer T25 (it has migration {newer[-1]}; "
            f"this T25 knows migrations up to {known[-1].id})",
            hint="upgrade T25 to open this store",
        )


def _statements(script: str) -> Iterable[str]:
    """Split a migration into statements: executescript would COMMIT our transaction."""
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            code = "\n".join(
                line for line in pending.splitlines() if not line.lstrip().startswith("--")
            )
            if code.strip(" \n;"):
                yield pending
            pending = ""
    if pending.strip(" \n;"):
        raise ValueError(f"a migration ends in an incomplete statement: {pending[:80]!r}")
