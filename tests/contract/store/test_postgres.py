"""What only the Postgres store does: its schema, migrations under concurrent first
opens, recovery from killed connections, a gap-free event log and coalesced NOTIFY."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from core.domain.events import DecisionRecorded
from core.domain.models import NewRun, NewTask, Project, RunOutcome, RunStatus, TaskState
from core.errors import StoreError
from store import migrations, open_store, postgres_sql
from store.postgres import PostgresStore
from store.postgres_events import CHANNEL, COALESCE_S
from tests.support.backends import PostgresBackend, admin, database_url
from tests.support.waiting import until

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(pg_database: PostgresBackend) -> PostgresBackend:
    return pg_database


@pytest.fixture
async def empty_database(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    request.getfixturevalue("pg_template")  # skips (or fails) without a server
    name = f"t25_{uuid.uuid4().hex}"
    await admin(f'CREATE DATABASE "{name}"')
    yield database_url(name)
    await admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def store(pg: PostgresBackend) -> AsyncIterator[PostgresStore]:
    s = await pg.open()
    assert isinstance(s, PostgresStore)
    await s.upsert_project(Project(name="demo", repo_path="/srv/demo", default_branch="main"))
    yield s
    await s.close()


async def raw(url: str) -> asyncpg.Connection:
    return await asyncpg.connect(url)


async def leased(store: PostgresStore, ttl_s: float = 30.0):
    task, _ = await store.create_task(NewTask(project="demo", title="t"), actor="alice")
    await store.enqueue_run(NewRun(task_id=task.id, stage=TaskState.SPEC, role="spec"))
    lease = await store.claim_run("w1", ttl_s)
    assert lease is not None
    return lease


# -- schema and migrations ------------------------------------------------------------------


async def test_concurrent_first_opens_apply_each_migration_once(empty_database: str) -> None:
    stores = await asyncio.gather(*(open_store(empty_database) for _ in range(6)))
    try:
        await stores[0].upsert_project(Project(name="p", repo_path="/p", default_branch="main"))
        task, _ = await stores[1].create_task(NewTask(project="p", title="t"), actor="a")
        assert await stores[5].get_task(task.id) == task
    finally:
        await asyncio.gather(*(s.close() for s in stores))
    con = await raw(empty_database)
    try:
        rows = await con.fetch("SELECT id, name FROM schema_migrations ORDER BY id")
    finally:
        await con.close()
    assert [(r["id"], r["name"]) for r in rows] == [
        (m.id, m.name) for m in migrations.load("postgres")
    ]


async def test_times_are_timestamptz(pg: PostgresBackend) -> None:
    con = await raw(pg.url)
    try:
        types = {
            (r["table_name"], r["column_name"]): r["data_type"]
            for r in await con.fetch(
                "SELECT table_name, column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND column_name LIKE ANY (ARRAY['%_at', 'at', 'not_before', 'state_since'])"
            )
        }
    finally:
        await con.close()
    assert types[("runs", "lease_expires_at")] == "timestamp with time zone"
    assert set(types.values()) == {"timestamp with time zone"}, types


async def test_a_foreign_database_is_refused_untouched(empty_database: str) -> None:
    con = await raw(empty_database)
    try:
        await con.execute("CREATE TABLE notes (body text); INSERT INTO notes VALUES ('keep me')")
        with pytest.raises(StoreError, match="is not a T25 database") as e:
            await open_store(empty_database)
        assert e.value.hint
        tables = await con.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        )
        assert [r["tablename"] for r in tables] == ["notes"]
        assert await con.fetchval("SELECT body FROM notes") == "keep me"
    finally:
        await con.close()


async def test_a_database_from_a_newer_t25_is_refused(pg: PostgresBackend) -> None:
    con = await raw(pg.url)
    try:
        await con.execute("INSERT INTO schema_migrations (id, name) VALUES (9999, 'future')")
    finally:
        await con.close()
    with pytest.raises(StoreError, match="newer T25") as e:
        await pg.open()
    assert "upgrade" in (e.value.hint or "")


async def test_an_unreachable_server_is_a_store_error_without_the_password() -> None:
    with pytest.raises(StoreError, match=r"cannot reach the Postgres store") as e:
        await open_store("postgresql://t25:hunter2@127.0.0.1:1/t25")
    assert "hunter2" not in str(e.value) and e.value.hint


# -- killed connections ----------------------------------------------------------------------


async def terminate(url: str, *, waiting_on_a_lock: bool = False) -> int:
    """pg_terminate_backend() on the store's pooled connections (or only a blocked one)."""
    con = await raw(url)
    try:
        for _ in range(500):
            killed = await con.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = 't25' "
                "AND ($1 = false OR wait_event_type = 'Lock')",
                waiting_on_a_lock,
            )
            if killed:
                return killed
            await asyncio.sleep(0.01)
        raise AssertionError("no store connection to terminate")
    finally:
        await con.close()


async def store_backends(url: str) -> set[int]:
    """The pids of the store's backends (its pooled connections) now."""
    con = await raw(url)
    try:
        rows = await con.fetch(
            "SELECT pid FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = 't25'"
        )
    finally:
        await con.close()
    return {row["pid"] for row in rows}


async def test_terminated_idle_connections_are_replaced_and_a_committed_claim_survives(
    store: PostgresStore,
) -> None:
    lease = await leased(store)
    before = await store_backends(store.url)

    assert await terminate(store.url) >= 1

    async def ended() -> bool:
        return not before & await store_backends(store.url)

    await until(ended, 10, "the terminated backends' exit")

    extended = await store.heartbeat(lease, 30)  # on a fresh connection
    run, _ = await store.complete_run(extended, RunOutcome(status=RunStatus.SUCCEEDED, exit_code=0))
    assert (
        run.status == RunStatus.SUCCEEDED and run.lease_token == lease.token and run.attempts == 1
    )


async def test_a_statement_killed_mid_flight_is_retried_on_a_fresh_connection(
    store: PostgresStore,
) -> None:
    lease = await leased(store)
    await store.enqueue_run(NewRun(task_id=lease.task_id, stage=TaskState.PLAN, role="second"))
    blocker = await raw(store.url)
    try:
        tx = blocker.transaction()
        await tx.start()
        await blocker.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
        beat = asyncio.create_task(store.heartbeat(lease, 30))
        claim = asyncio.create_task(store.claim_run("w2", 30))
        await terminate(store.url, waiting_on_a_lock=True)  # kills them while they wait
        # not a wait: terminations land before the lock frees; landing later, they end it alike
        await asyncio.sleep(0.1)
        await tx.rollback()
        extended, second = await asyncio.wait_for(asyncio.gather(beat, claim), 10)
    finally:
        await blocker.close()

    assert extended.token == lease.token and extended.expires_at > lease.expires_at
    assert second is not None and second.run_id != lease.run_id
    running = await store.list_runs(status=RunStatus.RUNNING)
    assert sorted((r.id, r.lease_token) for r in running) == sorted(
        [(lease.run_id, lease.token), (second.run_id, second.token)]
    )


# -- the event log ---------------------------------------------------------------------------


async def test_a_reader_never_pages_past_an_event_still_being_committed(
    store: PostgresStore,
) -> None:
    slow = await raw(store.url)
    try:
        tx = slow.transaction()
        await tx.start()
        early = await slow.fetchval(
            "INSERT INTO events (at, kind, payload) VALUES (now(), 'decision_recorded', "
            '\'{"decision": "slow", "actor": "a", "reason": ""}\') RETURNING id'
        )
        late = await store.append_event(DecisionRecorded(decision="fast", actor="b"))
        assert late.id > early
        reading = asyncio.create_task(store.events_after(0))
        # not a wait: it awaits an earlier id; negative: load only eases it, never fails it falsely
        await asyncio.sleep(0.2)
        assert not reading.done()  # it waits for the earlier id to settle rather than skip it
        await tx.commit()
        events = await asyncio.wait_for(reading, 10)
    finally:
        await slow.close()
    assert [e.id for e in events] == [early, late.id]
    assert await store.last_event_id() == late.id


async def test_notifications_are_coalesced_per_process(
    store: PostgresStore, pg: PostgresBackend
) -> None:
    heard: list[str] = []
    listener = await raw(pg.url)
    await listener.add_listener(CHANNEL, lambda *args: heard.append(args[-1]))
    try:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await asyncio.gather(
            *(store.append_event(DecisionRecorded(decision=f"d{i}", actor="a")) for i in range(200))
        )
        await until(lambda: heard, 10, "a notification")
        # not a wait: the window for more notifications, COALESCE_S apart (longer: eases it)
        await asyncio.sleep(0.2)
        elapsed = loop.time() - start
    finally:
        await listener.close()
    assert 1 <= len(heard) <= elapsed / COALESCE_S + 1
    assert len(heard) < 200


async def test_a_rolled_back_event_id_leaves_a_hole_that_never_stalls_a_reader(
    store: PostgresStore,
) -> None:
    con = await raw(store.url)
    try:
        tx = con.transaction()
        await tx.start()
        lost = await con.fetchval(
            "INSERT INTO events (at, kind, payload) VALUES (now(), 'x', '{}') RETURNING id"
        )
        await tx.rollback()
    finally:
        await con.close()
    after = await store.append_event(DecisionRecorded(decision="after the hole", actor="a"))

    assert after.id > lost
    assert [e.id for e in await asyncio.wait_for(store.events_after(0), 10)] == [after.id]
    assert await store.last_event_id() == after.id


async def test_a_write_in_flight_after_the_settled_events_does_not_hold_up_a_reader(
    store: PostgresStore,
) -> None:
    first = await store.append_event(DecisionRecorded(decision="settled", actor="a"))
    slow = await raw(store.url)
    try:
        tx = slow.transaction()
        await tx.start()
        await slow.execute("INSERT INTO events (at, kind, payload) VALUES (now(), 'x', '{}')")
        assert [e.id for e in await asyncio.wait_for(store.events_after(0), 2)] == [first.id]
        await tx.rollback()
    finally:
        await slow.close()


# What 0007 adds, taken out again: the database as a T25 before 0007 left it.
BEFORE_0007 = """
DROP INDEX runs_one_active_per_stage;
DROP SEQUENCE lease_tokens;
DROP INDEX tasks_by_request_key;
ALTER TABLE tasks DROP COLUMN request_key;
ALTER TABLE runs DROP COLUMN claim_key;
DELETE FROM schema_migrations WHERE id = 7;
"""


async def test_0007_keeps_the_oldest_live_run_of_a_doubled_stage_and_tokens_go_on_growing(
    store: PostgresStore,
) -> None:
    task, _ = await store.create_task(NewTask(project="demo", title="t"), actor="alice")
    con = await raw(store.url)
    try:
        await con.execute(BEFORE_0007)
        for status, token in (("running", 7), ("queued", 0), ("succeeded", 3)):
            await con.execute(
                "INSERT INTO runs (task_id, stage, role, status, lease_token, worker,"
                " lease_expires_at, not_before, enqueued_at) VALUES ($1, 'SPEC', 'spec', $2, $3,"
                " 'w', now() + interval '1 hour', now(), now())",
                int(task.id[2:]),
                status,
                token,
            )
    finally:
        await con.close()

    again = await open_store(store.url)  # 0007 again
    try:
        runs = await again.list_runs(task_id=task.id)
        assert [r.status.value for r in runs] == ["running", "cancelled", "succeeded"]
        assert "0007" in (runs[1].error or "")
        await again.enqueue_run(NewRun(task_id=task.id, stage=TaskState.PLAN, role="planner"))
        lease = await again.claim_run("w2", 30)
        assert lease is not None and lease.token == 8  # past every token any run holds
    finally:
        await again.close()


# -- the claim's plan ---------------------------------------------------------------------


def plan_nodes(plan: dict) -> list[dict]:
    return [plan, *(node for child in plan.get("Plans", []) for node in plan_nodes(child))]


async def query_plan(url: str, fill: list[str], statement: str, *args: object) -> list[dict]:
    """Every node of `statement`'s plan in the database at `url` once `fill` ran."""
    con = await raw(url)
    try:
        for step in fill:
            await con.execute(step)
        (explained,) = await con.fetchrow(f"EXPLAIN (FORMAT JSON) {statement}", *args)
    finally:
        await con.close()
    return plan_nodes(json.loads(explained)[0]["Plan"])


async def test_the_decisions_are_read_off_their_index_among_any_number_of_events(
    store: PostgresStore,
) -> None:
    fill = [
        (
            "INSERT INTO events (at, kind, payload) SELECT now(), CASE WHEN n % 100 = 0"
            " THEN 'decision_recorded' ELSE 'run_output' END, '{}' FROM generate_series(1, 20000)"
            " AS n"
        ),
        "ANALYZE events",
    ]
    nodes = await query_plan(
        store.url, fill, postgres_sql.DECISIONS_AFTER, 0, 30000, 5000, None, "decision_recorded"
    )

    kinds = [node["Node Type"] for node in nodes]
    assert "Seq Scan" not in kinds and "Sort" not in kinds, kinds
    assert any(node.get("Index Name") == "events_decisions" for node in nodes), kinds


async def test_a_claim_walks_the_queued_runs_index_whatever_the_queue_length(
    store: PostgresStore,
) -> None:
    fill = [
        (
            "INSERT INTO tasks (project, title, type, description, state, created_at,"
            " state_since, priority) SELECT 'demo', 't' || n, 'feat', '', 'IMPLEMENTING',"
            " now(), now(), n % 7 FROM generate_series(1, 3000) AS n"
        ),
        (
            "INSERT INTO runs (task_id, stage, role, not_before, enqueued_at, priority)"
            " SELECT id, 'IMPLEMENTING', 'dev', now(), now(), priority FROM tasks"
        ),
        "ANALYZE runs; ANALYZE tasks",
    ]
    nodes = await query_plan(store.url, fill, postgres_sql.CLAIM_RUN, "w", 30.0, "key")

    kinds = [node["Node Type"] for node in nodes]
    assert "Sort" not in kinds and "Hash Join" not in kinds, kinds
    assert any(node.get("Index Name") == "runs_claimable" for node in nodes), kinds


async def test_the_newest_finished_tasks_of_a_state_are_read_off_an_index(
    store: PostgresStore,
) -> None:
    fill = [
        (
            "INSERT INTO tasks (project, title, type, description, state, created_at,"
            " state_since, merged) SELECT 'demo', 't' || n, 'feat', '', CASE WHEN n % 100 = 0"
            " THEN 'DONE' WHEN n % 10 = 0 THEN 'CANCELLED' ELSE 'QA' END, now(), now(),"
            " n % 100 = 0 FROM generate_series(1, 20000) AS n"
        ),
        "ANALYZE tasks",
    ]
    where, args = postgres_sql.tasks_where(["DONE"], None, False, True)
    statement, args = postgres_sql.list_tasks(where, args, after=None, limit=100, newest_first=True)
    nodes = await query_plan(store.url, fill, statement, *args)

    kinds = [node["Node Type"] for node in nodes]
    assert "Seq Scan" not in kinds and "Sort" not in kinds, kinds
    assert any(node.get("Index Name") == "tasks_by_state" for node in nodes), kinds


async def test_a_tasks_events_of_one_kind_are_read_off_an_index(store: PostgresStore) -> None:
    con = await raw(store.url)
    try:
        await con.execute(
            "INSERT INTO tasks (project, title, type, description, state, created_at,"
            " state_since) SELECT 'demo', 't' || n, 'feat', '', 'QA', now(), now()"
            " FROM generate_series(1, 5) AS n"
        )
        first = int(await con.fetchval("SELECT min(id) FROM tasks"))
        await con.execute(
            "INSERT INTO events (at, kind, task_id, payload) SELECT now(), CASE WHEN n % 100 = 0"
            f" THEN 'task_transitioned' ELSE 'run_output' END, {first} + n % 5, '{{}}'"
            " FROM generate_series(1, 20000) AS n"
        )
        await con.execute("ANALYZE events")
    finally:
        await con.close()
    statement = postgres_sql.TASK_KIND_EVENTS_AFTER
    nodes = await query_plan(
        store.url, [], statement, 0, 30000, 5000, first + 2, "task_transitioned", None
    )

    kinds = [node["Node Type"] for node in nodes]  # a sort of the 40 found may follow
    assert "Seq Scan" not in kinds, kinds
    assert any(node.get("Index Name") == "events_by_task_and_kind" for node in nodes), kinds


async def test_a_tasks_network_records_are_read_off_their_index_not_its_output(
    store: PostgresStore,
) -> None:
    fill = [  # a task's long run, a network record every 500 lines
        (
            "INSERT INTO events (at, kind, task_id, payload) SELECT now(), 'run_output', n % 5,"
            " jsonb_build_object('stream', CASE WHEN n % 500 = 0 THEN 'network' ELSE 'stdout' END)"
            " FROM generate_series(1, 20000) AS n"
        ),
        "ANALYZE events",
    ]
    nodes = await query_plan(store.url, fill, postgres_sql.TASK_NETWORK_AFTER, 0, 30000, 5000, 3)

    kinds = [node["Node Type"] for node in nodes]  # a sort of the 8 found may follow
    assert "Seq Scan" not in kinds, kinds
    assert any(node.get("Index Name") == "events_network" for node in nodes), kinds


async def test_a_runs_newest_events_are_read_off_an_index(store: PostgresStore) -> None:
    fill = [  # a long run, then many short ones written after it
        (
            "INSERT INTO events (at, kind, run_id, payload) SELECT now(), 'run_output',"
            " CASE WHEN n <= 10000 THEN 7 ELSE 100 + n % 400 END, '{}'"
            " FROM generate_series(1, 30000) AS n"
        ),
        "ANALYZE events",
    ]
    nodes = await query_plan(store.url, fill, postgres_sql.RUN_EVENTS_BEFORE, 7, 2**63 - 1, 500)

    kinds = [node["Node Type"] for node in nodes]
    assert "Seq Scan" not in kinds and "Sort" not in kinds, kinds
    assert any(node.get("Index Name") == "events_by_run" for node in nodes), kinds
