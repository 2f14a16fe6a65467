"""Doubled work is impossible by construction: the contract, on every backend.

A task's stage has at most one queued or running run; a state change and the run of the
stage it enters are one write; a fencing token names one claim in the whole store and is
good only in the hands of the worker it was given to; stall checks read the store's clock.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from core.domain.events import RunQueued, TaskCreated, TaskTransitioned
from core.domain.models import NewRun, NewTask, Project, RunOutcome, RunStatus, Task, TaskState
from core.errors import LeaseLost, StaleState
from core.ports import Store

S = TaskState
OK = RunOutcome(status=RunStatus.SUCCEEDED)


async def new_task(store: Store, title: str = "add rate limiting") -> Task:
    task, _ = await store.create_task(NewTask(project="demo", title=title), actor="alice")
    return task


def enter(task: Task, to: TaskState) -> TaskTransitioned:
    return TaskTransitioned(task_id=task.id, from_state=task.state, to_state=to, actor="t25")


async def queued_events(store: Store, task_id: str) -> list[RunQueued]:
    return [e for e in await store.events_after(0, task_id=task_id) if isinstance(e, RunQueued)]


# -- a task filed twice under one key ----------------------------------------------------------


async def test_a_task_filed_again_under_its_request_key_is_the_task_already_filed(
    store: Store, second_store: Store, project: Project
) -> None:
    new = NewTask(project="demo", title="once", request_key="cockpit-7f3a")
    task, created = await store.create_task(new, actor="ana")
    again, created_again = await second_store.create_task(new, actor="ana")
    assert again.id == task.id and created_again.id == created.id
    assert isinstance(created_again, TaskCreated) and created_again.task_id == task.id

    racing = NewTask(project="demo", title="raced", request_key="cockpit-9b1c")
    filed = await asyncio.gather(
        *(s.create_task(racing, actor="ana") for s in [store, second_store] * 3)
    )
    assert len({t.id for t, _ in filed}) == 1
    other, _ = await store.create_task(NewTask(project="demo", title="once"), actor="ana")
    assert [t.id for t in await store.list_tasks()] == [task.id, filed[0][0].id, other.id]
    created_events = [e for e in await store.events_after(0) if isinstance(e, TaskCreated)]
    assert len(created_events) == 3


# -- one queued or running run per task and stage ---------------------------------------------


async def test_an_enqueue_of_a_stage_with_a_live_run_returns_that_run_and_writes_nothing(
    store: Store, project: Project
) -> None:
    task = await new_task(store)
    first, queued = await store.enqueue_run(NewRun(task_id=task.id, stage=S.SPEC, role="spec"))
    again, queued_again = await store.enqueue_run(
        NewRun(task_id=task.id, stage=S.SPEC, role="spec")
    )
    assert again.id == first.id and queued_again.id == queued.id

    lease = await store.claim_run("w1", 30)
    assert lease is not None and lease.run_id == first.id
    running, _ = await store.enqueue_run(NewRun(task_id=task.id, stage=S.SPEC, role="spec"))
    assert running.id == first.id and running.status is RunStatus.RUNNING

    other_stage, _ = await store.enqueue_run(NewRun(task_id=task.id, stage=S.PLAN, role="planner"))
    assert other_stage.id != first.id  # the index is per stage

    await store.complete_run(lease, OK)
    redo, _ = await store.enqueue_run(NewRun(task_id=task.id, stage=S.SPEC, role="spec"))
    assert redo.id not in (first.id, other_stage.id)  # a finished run does not hold the stage
    assert len(await store.list_runs(task_id=task.id)) == 3
    assert len(await queued_events(store, task.id)) == 3


async def test_racing_enqueues_from_two_processes_make_one_run(
    store: Store, second_store: Store, project: Project
) -> None:
    tasks = [await new_task(store, f"task {i}") for i in range(5)]

    async def enqueue(s: Store, task: Task) -> str:
        return (await s.enqueue_run(NewRun(task_id=task.id, stage=S.QA, role="qa")))[0].id

    got = await asyncio.gather(
        *(enqueue([store, second_store][i % 2], task) for task in tasks for i in range(6))
    )
    for n, task in enumerate(tasks):
        runs = await store.list_runs(task_id=task.id)
        assert len(runs) == 1 and set(got[n * 6 : n * 6 + 6]) == {runs[0].id}
        assert len(await queued_events(store, task.id)) == 1


async def test_a_run_queued_while_in_stage_is_not_queued_for_a_stage_the_task_left(
    store: Store, project: Project
) -> None:
    """A sweep read the task in SPEC; a completion has since moved it to PLAN (and queued
    PLAN's run). The sweep's enqueue of SPEC must write nothing."""
    task = await new_task(store)
    spec = NewRun(task_id=task.id, stage=S.SPEC, role="spec", while_in_stage=True)
    with pytest.raises(StaleState, match="is now in RECEIVED, not SPEC"):
        await store.enqueue_run(spec)
    await store.apply_transition(task.id, S.RECEIVED, enter(task, S.SPEC), {})
    run, _ = await store.enqueue_run(spec)
    assert run.stage is S.SPEC
    assert [r.id for r in await store.list_runs(task_id=task.id)] == [run.id]
    assert len(await queued_events(store, task.id)) == 1


# -- a state change and its stage's run: one write ---------------------------------------------


async def test_entering_a_stage_queues_its_run_in_the_same_write(
    store: Store, project: Project
) -> None:
    task = await new_task(store)
    run = NewRun(task_id=task.id, stage=S.SPEC, role="spec")
    moved, events = await store.enter_stage(task.id, S.RECEIVED, enter(task, S.SPEC), {}, run)

    assert moved.state is S.SPEC
    change, queued = events
    assert isinstance(change, TaskTransitioned) and isinstance(queued, RunQueued)
    assert change.id < queued.id and queued.task_id == task.id
    (stored,) = await store.list_runs(task_id=task.id)
    assert stored.id == queued.run_id and stored.stage is S.SPEC and stored.role == "spec"

    # The loser of a race from the same state writes nothing: no state, no event, no run.
    with pytest.raises(StaleState):
        await store.enter_stage(task.id, S.RECEIVED, enter(task, S.SPEC), {}, run)
    assert len(await store.list_runs(task_id=task.id)) == 1
    assert len(await store.events_after(0, task_id=task.id)) == 3  # created, moved, queued


async def test_entering_a_stage_that_has_its_run_keeps_that_run(
    store: Store, project: Project
) -> None:
    task = await new_task(store)
    spec = NewRun(task_id=task.id, stage=S.SPEC, role="spec")
    waiting, _ = await store.enqueue_run(spec)  # a run left over, say by a sweep
    moved, events = await store.enter_stage(task.id, S.RECEIVED, enter(task, S.SPEC), {}, spec)
    assert moved.state is S.SPEC and events[1].run_id == waiting.id
    assert [r.id for r in await store.list_runs(task_id=task.id)] == [waiting.id]


async def test_entering_a_stage_queues_a_run_of_that_stage_only(
    store: Store, project: Project
) -> None:
    task = await new_task(store)
    wrong = NewRun(task_id=task.id, stage=S.PLAN, role="planner")
    with pytest.raises(ValueError, match="queues a run of it"):
        await store.enter_stage(task.id, S.RECEIVED, enter(task, S.SPEC), {}, wrong)
    assert (await store.get_task(task.id)).state is S.RECEIVED  # type: ignore[union-attr]


# -- fencing tokens: one per claim in the store, bound to the worker ---------------------------


async def test_tokens_are_unique_across_the_store_and_keep_growing(
    store: Store, project: Project
) -> None:
    tokens = []
    for i in range(4):
        task = await new_task(store, f"task {i}")
        await store.enqueue_run(NewRun(task_id=task.id, stage=S.SPEC, role="spec", max_attempts=5))
        lease = await store.claim_run(f"w{i}", 30)
        assert lease is not None
        tokens.append(lease.token)
        await store.release_run(lease)  # and claimed again: a fresh token, not the old one
        again = await store.claim_run(f"w{i}", 30)
        assert again is not None and again.run_id == lease.run_id
        tokens.append(again.token)
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)


async def test_a_live_token_presented_under_another_workers_name_is_lease_lost(
    store: Store, project: Project
) -> None:
    a, b = await new_task(store, "a"), await new_task(store, "b")
    await store.enqueue_run(NewRun(task_id=a.id, stage=S.SPEC, role="spec"))
    await store.enqueue_run(NewRun(task_id=b.id, stage=S.SPEC, role="spec"))
    one = await store.claim_run("worker-1", 30)
    two = await store.claim_run("worker-2", 30)
    assert one is not None and two is not None and one.token != two.token

    impostor = one.model_copy(update={"worker": "worker-2"})
    with pytest.raises(LeaseLost, match="given to worker-1, not to worker-2"):
        await store.heartbeat(impostor, 30)
    with pytest.raises(LeaseLost):
        await store.complete_run(impostor, OK)
    with pytest.raises(LeaseLost):
        await store.release_run(impostor)
    # worker-2's own token on worker-1's run: stale, whatever its name says.
    crossed = two.model_copy(update={"run_id": one.run_id, "task_id": one.task_id})
    with pytest.raises(LeaseLost, match="stale"):
        await store.complete_run(crossed, OK)

    run = await store.get_run(one.run_id)
    assert run is not None and run.status is RunStatus.RUNNING and run.worker == "worker-1"
    finished, _ = await store.complete_run(one, OK)  # the holder still can
    assert finished.status is RunStatus.SUCCEEDED


# -- the store's clock -------------------------------------------------------------------------


async def test_now_is_the_clock_run_times_are_written_by(store: Store, project: Project) -> None:
    task = await new_task(store)
    before = await store.now()
    await store.enqueue_run(NewRun(task_id=task.id, stage=S.SPEC, role="spec"))
    lease = await store.claim_run("w1", 30)
    assert lease is not None
    run, _ = await store.complete_run(lease, OK)
    after = await store.now()
    assert before.tzinfo is not None and after.tzinfo is not None
    assert run.finished_at is not None and before <= run.enqueued_at <= run.finished_at <= after
    assert abs(after - datetime.now(UTC)) < timedelta(seconds=30)


async def test_a_lease_handed_back_says_so_not_that_another_worker_holds_it(
    store: Store, project: Project
) -> None:
    task = await new_task(store)
    await store.enqueue_run(NewRun(task_id=task.id, stage=S.SPEC, role="spec"))
    lease = await store.claim_run("w1", 30)
    assert lease is not None
    await store.release_run(lease)
    with pytest.raises(LeaseLost, match="handed back, and the run is now queued"):
        await store.heartbeat(lease, 30)
