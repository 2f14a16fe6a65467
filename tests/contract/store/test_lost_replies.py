"""A reply lost after its write committed: the Postgres store's retry has the effect of one.

The store retries a write on a fresh connection when its connection dies (postgres.py).
When the connection died after the server committed but before the reply arrived, the
retry must find what the first try wrote, not write it again. The loss is injected at
the driver: the pooled connection runs the statement (or commits the transaction) for
real, is then cut, and the call raises the driver's own "connection was closed" error,
as a network cut right behind the COMMIT would. An embedded SQLite store has no replies
to lose.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Iterator
from types import TracebackType
from typing import Any

import asyncpg
import pytest

from core.domain.events import (
    ArtifactStored,
    InputRequested,
    RunFinished,
    RunOutput,
    RunQueued,
    TaskCreated,
    TaskTransitioned,
)
from core.domain.models import (
    ArtifactKind,
    ArtifactMeta,
    NewRun,
    NewTask,
    Project,
    RunOutcome,
    RunStatus,
    TaskState,
)
from core.ports import NewArtifact, TaskMove
from store.postgres import PostgresStore
from tests.support.backends import PostgresBackend

pytestmark = pytest.mark.postgres
S = TaskState


def _cut() -> asyncpg.exceptions.ConnectionDoesNotExistError:
    return asyncpg.exceptions.ConnectionDoesNotExistError(
        "connection was closed in the middle of operation"
    )


class _LostCommit:
    """A transaction whose COMMIT reaches the server and whose reply does not come back."""

    def __init__(self, con: asyncpg.Connection, tx: Any) -> None:
        self._con, self._tx = con, tx

    async def __aenter__(self) -> Any:
        return await self._tx.__aenter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        done = await self._tx.__aexit__(kind, exc, tb)
        if kind is None:  # committed: now the reply is lost
            self._con.terminate()
            raise _cut()
        return done


class LostReply:
    """A pooled connection whose first write commits, and then the connection drops."""

    def __init__(self, con: asyncpg.Connection) -> None:
        self._con = con

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)

    async def _then_cut(self, call: Awaitable[Any]) -> Any:
        result = await call
        if not self._con.is_in_transaction():  # its own transaction: it committed
            self._con.terminate()
            raise _cut()
        return result  # inside a transaction: the commit decides (_LostCommit)

    async def fetchrow(self, *args: Any, **kw: Any) -> Any:
        return await self._then_cut(self._con.fetchrow(*args, **kw))

    async def fetchval(self, *args: Any, **kw: Any) -> Any:
        return await self._then_cut(self._con.fetchval(*args, **kw))

    async def fetch(self, *args: Any, **kw: Any) -> Any:
        return await self._then_cut(self._con.fetch(*args, **kw))

    async def execute(self, *args: Any, **kw: Any) -> Any:
        return await self._then_cut(self._con.execute(*args, **kw))

    def transaction(self, *args: Any, **kw: Any) -> _LostCommit:
        return _LostCommit(self._con, self._con.transaction(*args, **kw))


@contextlib.contextmanager
def reply_lost(store: PostgresStore) -> Iterator[list[LostReply]]:
    """The next connection the store borrows loses the reply of its first write."""
    pool = store._pool
    real = pool.acquire
    lent: list[LostReply] = []

    async def acquire() -> Any:
        con = await real()
        if lent:
            return con
        lent.append(LostReply(con))
        return lent[0]

    pool.acquire = acquire  # type: ignore[method-assign]
    try:
        yield lent
    finally:
        del pool.acquire  # the pool's own method again


@pytest.fixture
async def store(pg_database: PostgresBackend) -> AsyncIterator[PostgresStore]:
    s = await pg_database.open()
    assert isinstance(s, PostgresStore)
    await s.upsert_project(Project(name="demo", repo_path="/srv/demo", default_branch="main"))
    yield s
    await s.close()


async def test_a_task_created_under_a_lost_reply_is_filed_once(store: PostgresStore) -> None:
    with reply_lost(store) as lent:
        task, created = await store.create_task(NewTask(project="demo", title="once"), actor="ana")
    assert lent and lent[0].is_closed()  # the loss really happened
    assert [t.id for t in await store.list_tasks()] == [task.id]
    events = await store.events_after(0)
    assert [type(e) for e in events] == [TaskCreated] and events[0].id == created.id


async def test_a_transition_under_a_lost_reply_is_written_once_and_not_stale(
    store: PostgresStore,
) -> None:
    task, _ = await store.create_task(NewTask(project="demo", title="t"), actor="ana")
    move = TaskTransitioned(task_id=task.id, from_state=S.RECEIVED, to_state=S.SPEC, actor="t25")
    with reply_lost(store) as lent:
        moved, event = await store.apply_transition(task.id, S.RECEIVED, move, {})
    assert lent and lent[0].is_closed()
    assert moved.state is S.SPEC
    changes = [e for e in await store.events_after(0) if isinstance(e, TaskTransitioned)]
    assert [e.id for e in changes] == [event.id]


async def test_entering_a_stage_under_a_lost_reply_queues_one_run(store: PostgresStore) -> None:
    task, _ = await store.create_task(NewTask(project="demo", title="t"), actor="ana")
    move = TaskTransitioned(task_id=task.id, from_state=S.RECEIVED, to_state=S.SPEC, actor="t25")
    run = NewRun(task_id=task.id, stage=S.SPEC, role="spec")
    with reply_lost(store) as lent:
        moved, (change, queued) = await store.enter_stage(task.id, S.RECEIVED, move, {}, run)
    assert lent and lent[0].is_closed()
    assert moved.state is S.SPEC
    (stored,) = await store.list_runs(task_id=task.id)
    assert queued.run_id == stored.id
    kinds = [(type(e), e.id) for e in await store.events_after(0) if e.id > 1]
    assert kinds == [(TaskTransitioned, change.id), (RunQueued, queued.id)]


async def test_an_event_appended_under_a_lost_reply_is_kept_once(store: PostgresStore) -> None:
    task, _ = await store.create_task(NewTask(project="demo", title="t"), actor="ana")
    with reply_lost(store) as lent:
        kept = await store.append_event(RunOutput(task_id=task.id, stream="stdout", text="hello\n"))
    assert lent and lent[0].is_closed()
    outputs = [e for e in await store.events_after(0) if isinstance(e, RunOutput)]
    assert [e.id for e in outputs] == [kept.id]


async def test_a_run_queued_under_a_lost_reply_is_queued_once(store: PostgresStore) -> None:
    task, _ = await store.create_task(NewTask(project="demo", title="t"), actor="ana")
    with reply_lost(store) as lent:
        run, queued = await store.enqueue_run(NewRun(task_id=task.id, stage=S.SPEC, role="spec"))
    assert lent and lent[0].is_closed()
    assert [r.id for r in await store.list_runs()] == [run.id]
    assert [e.id for e in await store.events_after(0) if isinstance(e, RunQueued)] == [queued.id]


async def test_a_claim_under_a_lost_reply_leases_one_run(store: PostgresStore) -> None:
    for title in ("a", "b"):
        task, _ = await store.create_task(NewTask(project="demo", title=title), actor="ana")
        await store.enqueue_run(NewRun(task_id=task.id, stage=S.SPEC, role="spec"))
    with reply_lost(store) as lent:
        lease = await store.claim_run("w1", 30)
    assert lent and lent[0].is_closed()
    assert lease is not None
    running = await store.list_runs(status=RunStatus.RUNNING)
    assert [(r.id, r.lease_token) for r in running] == [(lease.run_id, lease.token)]
    assert len(await store.list_runs(status=RunStatus.QUEUED)) == 1


async def test_an_artifact_stored_under_a_lost_reply_is_stored_once(store: PostgresStore) -> None:
    task, _ = await store.create_task(NewTask(project="demo", title="t"), actor="ana")
    meta = ArtifactMeta(kind=ArtifactKind.SPEC, media_type="application/json", task_id=task.id)
    with reply_lost(store) as lent:
        artifact = await store.put_artifact(b'{"goal": "once"}', meta)
    assert lent and lent[0].is_closed()
    assert [a.id for a in await store.list_artifacts(task_id=task.id)] == [artifact.id]


async def test_a_run_completed_keeping_under_a_lost_reply_keeps_once(
    store: PostgresStore,
) -> None:
    task, _ = await store.create_task(NewTask(project="demo", title="t"), actor="ana")
    await store.enqueue_run(NewRun(task_id=task.id, stage=S.SPEC, role="spec"))
    lease = await store.claim_run("w1", 30)
    assert lease is not None
    meta = ArtifactMeta(kind=ArtifactKind.PROMPT, task_id=task.id, run_id=lease.run_id)
    with reply_lost(store) as lent:
        run, events = await store.complete_run_keeping(
            lease, RunOutcome(status=RunStatus.SUCCEEDED), [NewArtifact(meta, b"the prompt")]
        )
    assert lent and lent[0].is_closed()
    assert run.status is RunStatus.SUCCEEDED
    (kept,) = await store.list_artifacts(task_id=task.id)
    written = [e for e in await store.events_after(0) if e.id > events[0].id - 1]
    assert written == events and [type(e) for e in events] == [RunFinished, ArtifactStored]
    assert isinstance(events[1], ArtifactStored) and events[1].artifact_id == kept.id


async def test_a_task_moved_under_a_lost_reply_is_moved_once(store: PostgresStore) -> None:
    task, _ = await store.create_task(NewTask(project="demo", title="t"), actor="ana")
    change = TaskTransitioned(task_id=task.id, from_state=S.RECEIVED, to_state=S.SPEC, actor="t25")
    meta = ArtifactMeta(kind=ArtifactKind.SPEC, media_type="application/json", task_id=task.id)
    asked = InputRequested(task_id=task.id, stage=S.SPEC, question="which?")
    write = TaskMove(
        task_id=task.id,
        expected=S.RECEIVED,
        change=change,
        enqueue=NewRun(task_id=task.id, stage=S.SPEC, role="spec"),
        kept=(NewArtifact(meta, b"{}"),),
        then=(asked,),
    )
    with reply_lost(store) as lent:
        moved, events = await store.move_task(write)
    assert lent and lent[0].is_closed()
    assert moved.state is S.SPEC
    assert len(await store.list_runs(task_id=task.id)) == 1
    assert len(await store.list_artifacts(task_id=task.id)) == 1
    assert [e for e in await store.events_after(0) if e.id > 1] == events
    kinds = [type(e) for e in events]
    assert kinds == [ArtifactStored, TaskTransitioned, RunQueued, InputRequested]
