"""What only the embedded SQLite store does: the file, its identity, its migrations."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import subprocess
import sys
from importlib import resources
from pathlib import Path

import aiosqlite
import pytest

from core.domain.events import DecisionRecorded
from core.domain.models import ArtifactKind, ArtifactMeta, NewRun, NewTask, Project, TaskState
from core.errors import StoreError
from store import migrations, open_store, sqlite_sql
from store.sqlite_file import APPLICATION_ID
from tests.support import CHECKOUT

S = TaskState


def query(path: Path, statement: str) -> list[tuple]:
    db = sqlite3.connect(path)
    try:
        return db.execute(statement).fetchall()
    finally:
        db.close()


def url(path: Path) -> str:
    return f"sqlite:///{path}"


async def opened(path: Path) -> None:
    store = await open_store(url(path))
    await store.close()


async def test_a_new_store_is_a_wal_t25_database(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "t25.db"  # the folder is created

    await opened(path)

    assert query(path, "PRAGMA journal_mode") == [("wal",)]
    assert query(path, "PRAGMA application_id") == [(APPLICATION_ID,)]
    tables = {
        name for (name,) in query(path, "SELECT name FROM sqlite_schema WHERE type = 'table'")
    }
    assert {
        "projects",
        "tasks",
        "events",
        "runs",
        "blobs",
        "artifacts",
        "audit_anchor",
        "schema_migrations",
    } <= tables


async def test_migrations_are_applied_once_and_recorded(tmp_path: Path) -> None:
    path = tmp_path / "t25.db"
    await opened(path)
    first = query(path, "SELECT id, name, applied_at FROM schema_migrations ORDER BY id")

    await opened(path)
    await opened(path)

    assert [(i, n) for i, n, _ in first] == [(m.id, m.name) for m in migrations.load("sqlite")]
    assert query(path, "SELECT id, name, applied_at FROM schema_migrations ORDER BY id") == first


async def test_two_processes_creating_the_store_at_once_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "t25.db"
    stores = await asyncio.gather(*(open_store(url(path)) for _ in range(4)))
    try:
        await stores[0].upsert_project(Project(name="p", repo_path="/p", default_branch="main"))
        task, _ = await stores[1].create_task(NewTask(project="p", title="t"), actor="a")
        assert await stores[3].get_task(task.id) == task
    finally:
        for store in stores:
            await store.close()
    assert query(path, "SELECT count(*) FROM schema_migrations") == [
        (len(migrations.load("sqlite")),)
    ]


async def test_a_store_another_process_creates_while_this_one_reads_it_is_taken_for_ours(
    tmp_path: Path,
) -> None:
    """Whose the file is, read as one snapshot: another process that creates the store between
    this opener's reads of its id and of its objects makes no "not a T25 database"."""
    import aiosqlite

    from store import sqlite_file

    path = tmp_path / "t25.db"
    db = await aiosqlite.connect(path, isolation_level=None)
    read = db.execute_fetchall
    created: list[bool] = []

    async def another_process_creates_it_meanwhile(statement, *args):
        rows = await read(statement, *args)
        if not created:
            created.append(True)
            other = await open_store(url(path))
            await other.close()
        return rows

    db.execute_fetchall = another_process_creates_it_meanwhile  # type: ignore[method-assign]
    try:
        await sqlite_file._check_identity(db, path)
    finally:
        await db.close()
    assert created


def test_migration_files_are_numbered_consecutively() -> None:
    names = sorted(
        entry.name
        for entry in resources.files("store.migrations").joinpath("sqlite").iterdir()
        if entry.name.endswith(".sql")
    )
    assert names, "no migrations shipped"
    for expected, name in enumerate(names, start=1):
        assert re.fullmatch(r"\d{4}_[a-z0-9_]+\.sql", name), name
        assert int(name[:4]) == expected, names


@pytest.mark.parametrize("content", [b"hello, this is not a database at all\n", b"x"])
async def test_a_file_that_is_not_sqlite_is_refused_untouched(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(content)

    with pytest.raises(StoreError, match="is not a T25 database") as e:
        await opened(path)

    assert e.value.hint
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


@pytest.mark.parametrize(
    "setup",
    [
        "CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('keep me')",
        "PRAGMA application_id = 1234",  # someone else's, even with no tables yet
        "PRAGMA journal_mode = WAL; CREATE TABLE notes (body TEXT)",
    ],
)
async def test_a_foreign_sqlite_database_is_refused_untouched(tmp_path: Path, setup: str) -> None:
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.executescript(setup)
    db.close()
    before = path.read_bytes()

    with pytest.raises(StoreError, match=f"{re.escape(str(path))} is not a T25 database"):
        await opened(path)

    assert path.read_bytes() == before


async def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "t25.db"
    path.touch()
    await opened(path)
    assert query(path, "PRAGMA application_id") == [(APPLICATION_ID,)]


async def test_a_store_from_a_newer_t25_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t25.db"
    await opened(path)
    db = sqlite3.connect(path)
    with db:
        db.execute(
            "INSERT INTO schema_migrations (id, name, applied_at) VALUES (9999, 'future', 0)"
        )
    db.close()

    with pytest.raises(StoreError, match="newer T25") as e:
        await opened(path)
    assert "upgrade" in (e.value.hint or "")


async def test_store_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = await open_store("sqlite:///.factory/t25.db")  # relative to the working directory
    try:
        assert store.url == "sqlite:///.factory/t25.db"
    finally:
        await store.close()
    assert (tmp_path / ".factory" / "t25.db").exists()

    with pytest.raises(
        StoreError, match="cannot reach the Postgres store at postgresql://t25:\\*\\*\\*@"
    ) as e:
        await open_store("postgresql://t25:secret@127.0.0.1:1/t25")  # nothing listens on port 1
    assert e.value.hint and "secret" not in str(e.value)
    with pytest.raises(StoreError, match="mysql") as e:
        await open_store("mysql://localhost/t25")
    assert "sqlite:///" in (e.value.hint or "")
    for bad in ("sqlite:///", "sqlite:///:memory:", "t25.db"):
        with pytest.raises(StoreError):
            await open_store(bad)


def test_importing_the_store_package_loads_no_driver() -> None:
    code = "import sys, store; print(sorted(m for m in ('aiosqlite', 'asyncpg', 'sqlite3') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


async def test_a_second_open_in_one_process_keeps_the_first_ones_commits_safe(
    tmp_path: Path,
) -> None:
    """Opening the file again must not drop this process's locks on it: another process
    closing its last connection would then delete the WAL under us and lose our commits."""
    path = tmp_path / "t25.db"
    first = await open_store(url(path))
    second = await open_store(url(path))  # the same file, in the same process
    try:
        await first.upsert_project(Project(name="p", repo_path="/p", default_branch="main"))
        code = (
            "import asyncio, sys; from store import open_store\n"
            "async def main():\n"
            "    s = await open_store(sys.argv[1]); await s.last_event_id(); await s.close()\n"
            "asyncio.run(main())"
        )
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", code, url(path), cwd=CHECKOUT
        )
        assert await child.wait() == 0
        # Had this process lost its locks, that close would have deleted the WAL under us.
        assert path.with_name(path.name + "-wal").exists()
        task, _ = await first.create_task(NewTask(project="p", title="kept"), actor="a")
    finally:
        await first.close()
        await second.close()
    reopened = await open_store(url(path))
    try:
        assert await reopened.get_task(task.id) == task
    finally:
        await reopened.close()


# What 0007 adds, taken out again: the file as a T25 before 0007 left it.
BEFORE_0007 = """
DROP INDEX runs_one_active_per_stage;
DROP INDEX runs_by_lease_token;
DROP INDEX tasks_by_request_key;
ALTER TABLE tasks DROP COLUMN request_key;
ALTER TABLE runs DROP COLUMN claim_key;
DELETE FROM schema_migrations WHERE id = 7;
"""


async def test_0007_keeps_the_oldest_live_run_of_a_doubled_stage_and_tokens_go_on_growing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t25.db"
    store = await open_store(url(path))
    await store.upsert_project(Project(name="demo", repo_path="/srv/demo", default_branch="main"))
    task, _ = await store.create_task(NewTask(project="demo", title="t"), actor="ana")
    await store.close()
    db = sqlite3.connect(path)
    try:
        db.executescript(BEFORE_0007)
        with db:  # a stage run twice, as before 0007 it could be: one running, one queued
            for status, token in (("running", 7), ("queued", 0), ("succeeded", 3)):
                db.execute(
                    "INSERT INTO runs (task_id, stage, role, status, lease_token, worker,"
                    " lease_expires_at, not_before, enqueued_at) VALUES (?, 'SPEC', 'spec', ?, ?,"
                    " 'w', 9e9, 0, 0)",
                    (int(task.id[2:]), status, token),
                )
    finally:
        db.close()

    store = await open_store(url(path))  # 0007 again
    try:
        runs = await store.list_runs(task_id=task.id)
        assert [r.status.value for r in runs] == ["running", "cancelled", "succeeded"]
        assert "0007" in (runs[1].error or "")
        await store.enqueue_run(NewRun(task_id=task.id, stage=S.PLAN, role="planner"))
        lease = await store.claim_run("w2", 30)
        assert lease is not None and lease.token == 8  # past every token any run holds
    finally:
        await store.close()


# What 0011 adds, taken out again: the file as a T25 before 0011 left it.
BEFORE_0011 = """
DROP TABLE blob_chunks;
ALTER TABLE blobs DROP COLUMN chunks;
DELETE FROM schema_migrations WHERE id = 11;
"""


async def test_0011_keeps_the_blobs_stored_whole_and_stores_large_ones_in_chunks(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t25.db"
    store = await open_store(url(path))
    plan = await store.put_artifact(b"# Plan\n", ArtifactMeta(kind=ArtifactKind.PLAN))
    await store.close()
    db = sqlite3.connect(path)
    try:
        db.executescript(BEFORE_0011)
    finally:
        db.close()

    store = await open_store(url(path))  # 0011 again
    try:
        assert (await store.get_artifact(plan.id))[1] == b"# Plan\n"  # whole, as it was
        log = tmp_path / "run.log"
        log.write_bytes(b"x" * (2**20 + 1))
        stored = await store.put_artifact_file(log, ArtifactMeta(kind=ArtifactKind.LOG))
        assert (await store.get_artifact(stored.id))[1] == log.read_bytes()
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT chunks FROM blobs WHERE sha256 = ?", (plan.sha256,)).fetchone()
        assert db.execute("SELECT count(*) FROM blob_chunks").fetchone() == (2,)


async def query_plan(path: Path, fill: list[str], statement: str, params: dict) -> list[str]:
    """The steps of `statement`'s plan in a new store filled by `fill`, after ANALYZE."""
    await opened(path)
    db = sqlite3.connect(path)
    try:
        for step in fill:
            db.execute(step)
        db.execute("ANALYZE")
        db.create_function("t25_now", 0, lambda: 0.0)  # as the store registers it
        explained = db.execute(f"EXPLAIN QUERY PLAN {statement}", params)
        return [step for (_, _, _, step) in explained]
    finally:
        db.close()


async def test_the_decisions_are_read_off_their_index_among_any_number_of_events(
    tmp_path: Path,
) -> None:
    fill = [
        (
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)"
            " INSERT INTO events (at, kind, task_id, payload) SELECT 0,"
            " CASE WHEN i % 100 = 0 THEN 'decision_recorded' ELSE 'run_output' END, i % 50, '{}'"
            " FROM n"
        )
    ]
    params = {"kind": "decision_recorded", "after": 0, "task": None, "limit": 100}
    plan = await query_plan(tmp_path / "t25.db", fill, sqlite_sql.DECISIONS_AFTER, params)

    assert any("INDEX events_decisions" in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan


async def test_a_claim_walks_the_queued_runs_index_whatever_the_queue_length(
    tmp_path: Path,
) -> None:
    fill = [
        "INSERT INTO projects (name, repo_path, default_branch) VALUES ('p', '/p', 'main')",
        (
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)"
            " INSERT INTO tasks (project, title, type, description, state, created_at,"
            " state_since, priority) SELECT 'p', 't' || i, 'feat', '', 'IMPLEMENTING', 0, 0,"
            " i % 7 FROM n"
        ),
        (
            "INSERT INTO runs (task_id, stage, role, not_before, enqueued_at, priority)"
            " SELECT id, 'IMPLEMENTING', 'dev', 0, 0, priority FROM tasks"
        ),
    ]
    params = {"worker": "w", "ttl": 30.0}
    plan = await query_plan(tmp_path / "t25.db", fill, sqlite_sql.CLAIM_RUN, params)

    assert any("INDEX runs_claimable" in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan


TASK_HISTORY = [
    "INSERT INTO projects (name, repo_path, default_branch) VALUES ('p', '/p', 'main')",
    (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)"
        " INSERT INTO tasks (project, title, type, description, state, created_at, state_since,"
        " merged) SELECT 'p', 't' || i, 'feat', '', CASE WHEN i % 100 = 0 THEN 'DONE'"
        " WHEN i % 10 = 0 THEN 'CANCELLED' ELSE 'QA' END, 0, 0, i % 100 = 0 FROM n"
    ),
]


async def test_the_newest_finished_tasks_of_a_state_are_read_off_an_index(tmp_path: Path) -> None:
    statement = sqlite_sql.LIST_TASKS.format(
        where="state IN (?) AND archived = 0 AND merged = ?", order="DESC"
    )
    plan = await query_plan(tmp_path / "t25.db", TASK_HISTORY, statement, ("DONE", 1, 100))

    assert any("INDEX tasks_by_state " in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan


async def test_a_tasks_events_of_one_kind_are_read_off_an_index(tmp_path: Path) -> None:
    fill = [
        (
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)"
            " INSERT INTO events (at, kind, task_id, payload) SELECT 0,"
            " CASE WHEN i % 100 = 0 THEN 'task_transitioned' ELSE 'run_output' END, i % 5, '{}'"
            " FROM n"
        )
    ]
    params = {"task": 3, "kind": "task_transitioned", "after": 0, "stream": None, "limit": 100}
    plan = await query_plan(tmp_path / "t25.db", fill, sqlite_sql.TASK_KIND_EVENTS_AFTER, params)

    assert any("INDEX events_by_task_and_kind" in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan


async def test_a_tasks_network_records_are_read_off_their_index_not_its_output(
    tmp_path: Path,
) -> None:
    fill = [
        (
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)"
            " INSERT INTO events (at, kind, task_id, payload) SELECT 0, 'run_output', i % 5,"
            " json_object('stream', CASE WHEN i % 500 = 0 THEN 'network' ELSE 'stdout' END)"
            " FROM n"
        )
    ]
    params = {"task": 3, "kind": "run_output", "after": 0, "stream": "network", "limit": 100}
    plan = await query_plan(tmp_path / "t25.db", fill, sqlite_sql.TASK_NETWORK_AFTER, params)

    assert any("INDEX events_network" in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan


async def test_a_runs_newest_events_are_read_off_an_index(tmp_path: Path) -> None:
    fill = [
        (
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)"
            " INSERT INTO events (at, kind, run_id, payload) SELECT 0, 'run_output', i % 50, '{}'"
            " FROM n"
        )
    ]
    statement = sqlite_sql.RUN_EVENTS_BEFORE
    plan = await query_plan(tmp_path / "t25.db", fill, statement, (7, 2**63 - 1, 500))

    assert any("INDEX events_by_run" in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan


async def test_an_event_and_a_claim_are_one_statement_each_and_one_trip_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write of one statement is its own transaction: no BEGIN and COMMIT around it."""
    store = await open_store(url(tmp_path / "t25.db"))
    try:
        await store.upsert_project(Project(name="p", repo_path="/p", default_branch="main"))
        task, _ = await store.create_task(NewTask(project="p", title="t"), actor="ana")
        await store.enqueue_run(NewRun(task_id=task.id, stage=S.SPEC, role="spec"))
        sent: list[str] = []
        real = aiosqlite.Connection.execute_fetchall

        async def counted(self, statement, *args):
            sent.append(statement.split()[0].upper())
            return await real(self, statement, *args)

        monkeypatch.setattr(aiosqlite.Connection, "execute_fetchall", counted)
        event = await store.append_event(
            DecisionRecorded(task_id=task.id, decision="retry", actor="ana")
        )
        lease = await store.claim_run("w1", 60)
    finally:
        await store.close()

    assert sent == ["INSERT", "UPDATE"]
    assert event.id and lease is not None and lease.task_id == task.id
