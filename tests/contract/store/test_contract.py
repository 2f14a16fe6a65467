"""The Store contract, checked against every backend through the protocol only."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from datetime import UTC, timedelta
from pathlib import Path

import pytest

from core.domain.events import (
    ArtifactStored,
    DecisionRecorded,
    InputRequested,
    RunFinished,
    RunOutput,
    RunQueued,
    RunStarted,
    TaskCreated,
    TaskTransitioned,
    TaskUpdated,
)
from core.domain.evidence import PastCosts
from core.domain.models import (
    Artifact,
    ArtifactKind,
    ArtifactMeta,
    AuditAnchor,
    Lease,
    NewRun,
    NewTask,
    Project,
    RunOutcome,
    RunStatus,
    Task,
    TaskState,
    TaskType,
    Usage,
)
from core.domain.output import truncation_marker
from core.errors import ArtifactCorrupted, LeaseLost, NotFound, StaleState
from core.ports import DecisionWrite, NewArtifact, Store, TaskMove

S = TaskState


def move(task: Task, to: TaskState, *, actor: str = "alice") -> TaskTransitioned:
    return TaskTransitioned(task_id=task.id, from_state=task.state, to_state=to, actor=actor)


async def new_task(store: Store, title: str = "add rate limiting", **kw: object) -> Task:
    task, _ = await store.create_task(NewTask(project="demo", title=title, **kw), actor="alice")
    return task


async def leased_run(store: Store, *, ttl_s: float = 30.0, max_attempts: int = 3) -> Lease:
    task = await new_task(store)
    await store.enqueue_run(
        NewRun(task_id=task.id, stage=S.SPEC, role="spec", max_attempts=max_attempts)
    )
    lease = await store.claim_run("w1", ttl_s)
    assert lease is not None
    return lease


async def expire(store: Store, *, max_attempts: int = 3, agent: bool = True) -> Lease:
    """A run whose first lease lapsed, its agent started under it unless told otherwise."""
    lease = await leased_run(store, ttl_s=0.05, max_attempts=max_attempts)
    if agent:
        await agent_started(store, lease, 1)
    # not a wait: the 0.05 s lease lapses by the clock (load lapses it further)
    await asyncio.sleep(0.2)
    return lease


async def agent_started(store: Store, lease: Lease, attempt: int) -> None:
    """What T25's worker records as it starts the run's agent."""
    await store.append_event(
        RunStarted(task_id=lease.task_id, run_id=lease.run_id, worker=lease.worker, attempt=attempt)
    )


def test_every_protocol_method_is_implemented(store: Store) -> None:
    assert isinstance(store, Store)
    for name, _member in inspect.getmembers(Store, inspect.isfunction):
        if not name.startswith("_"):
            assert inspect.iscoroutinefunction(getattr(store, name)), name


# -- projects ---------------------------------------------------------------------------------


async def test_projects_upsert_and_list(store: Store) -> None:
    await store.upsert_project(Project(name="web", repo_path="/srv/web", default_branch="main"))
    await store.upsert_project(Project(name="api", repo_path="/srv/api", default_branch="main"))
    moved = await store.upsert_project(
        Project(name="web", repo_path="/srv/web2", default_branch="trunk")
    )

    assert moved == Project(name="web", repo_path="/srv/web2", default_branch="trunk")
    assert await store.list_projects() == [
        Project(name="api", repo_path="/srv/api", default_branch="main"),
        moved,
    ]


# -- tasks ------------------------------------------------------------------------------------


async def test_create_task_assigns_ids_and_writes_task_created(
    store: Store, project: Project
) -> None:
    first, created = await store.create_task(
        NewTask(project="demo", title="add rate limiting", type=TaskType.FIX, description="login"),
        actor="alice",
    )
    second = await new_task(store, "second")

    assert (first.id, second.id) == ("T-1", "T-2")
    assert first.state == S.RECEIVED and first.type == TaskType.FIX and first.description == "login"
    assert first.created_at.tzinfo is not None and first.created_at.utcoffset() == timedelta(0)
    assert isinstance(created, TaskCreated) and created.id > 0
    assert (created.task_id, created.title, created.project, created.actor) == (
        "T-1",
        "add rate limiting",
        "demo",
        "alice",
    )
    assert await store.events_after(0, task_id="T-1") == [created]
    assert await store.get_task("T-1") == first
    assert await store.get_task("t1") == first  # ids are accepted the way people type them
    assert await store.get_task("T-99") is None


async def test_create_task_in_unknown_project_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound, match="nowhere"):
        await store.create_task(NewTask(project="nowhere", title="x"), actor="alice")
    assert await store.last_event_id() == 0


async def test_list_tasks_filters(store: Store, project: Project) -> None:
    await store.upsert_project(Project(name="other", repo_path="/srv/o", default_branch="main"))
    a = await new_task(store, "a")
    b = await new_task(store, "b")
    c, _ = await store.create_task(NewTask(project="other", title="c"), actor="alice")
    b, _ = await store.apply_transition(b.id, S.RECEIVED, move(b, S.SPEC), {})
    await store.update_task(
        c.id, S.RECEIVED, {"archived": True}, TaskUpdated(fields={"archived": True}, actor="bob")
    )

    assert [t.id for t in await store.list_tasks()] == [a.id, b.id]
    assert [t.id for t in await store.list_tasks(include_archived=True)] == [a.id, b.id, c.id]
    assert [t.id for t in await store.list_tasks(states=[S.SPEC])] == [b.id]
    assert [t.id for t in await store.list_tasks(states=[S.SPEC, S.RECEIVED])] == [a.id, b.id]
    assert await store.list_tasks(states=[]) == []
    assert [t.id for t in await store.list_tasks(project="other", include_archived=True)] == [c.id]
    assert await store.list_tasks(project="other") == []


async def test_list_tasks_pages_in_either_order_and_counts_each_state(
    store: Store, project: Project
) -> None:
    tasks = [await new_task(store, f"t{n}") for n in range(5)]
    for task in tasks[1:3]:
        await store.apply_transition(task.id, S.RECEIVED, move(task, S.CANCELLED), {})
    ids = [t.id for t in tasks]

    page = await store.list_tasks(limit=2)
    assert [t.id for t in page] == ids[:2]
    rest = await store.list_tasks(after=page[-1].id, limit=10)
    assert [t.id for t in rest] == ids[2:]
    newest = await store.list_tasks(newest_first=True, limit=2)
    assert [t.id for t in newest] == [ids[4], ids[3]]
    older = await store.list_tasks(newest_first=True, after=ids[3])
    assert [t.id for t in older] == [ids[2], ids[1], ids[0]]
    cancelled = await store.list_tasks(states=[S.CANCELLED], newest_first=True, limit=1)
    assert [t.id for t in cancelled] == [ids[2]]
    assert await store.list_tasks(after=ids[4]) == []

    assert await store.count_tasks() == {S.RECEIVED: 3, S.CANCELLED: 2}
    assert await store.count_tasks(project="nowhere") == {}


async def test_apply_transition_moves_the_task_and_writes_the_event(
    store: Store, project: Project
) -> None:
    task = await new_task(store)
    event = TaskTransitioned(from_state=S.RECEIVED, to_state=S.SPEC, actor="alice", reason="go")

    moved, written = await store.apply_transition(
        task.id, S.RECEIVED, event, {"error": None, "qa_loops": 2}
    )

    assert moved.state == S.SPEC and moved.qa_loops == 2
    assert moved.state_since >= task.state_since
    assert written.id > 0 and written.task_id == task.id and written.reason == "go"
    assert (await store.events_after(0, task_id=task.id))[-1] == written
    assert await store.get_task(task.id) == moved


async def test_apply_transition_from_a_stale_state_changes_nothing(
    store: Store, project: Project
) -> None:
    task = await new_task(store)
    await store.apply_transition(task.id, S.RECEIVED, move(task, S.SPEC), {})
    before = await store.last_event_id()

    with pytest.raises(StaleState, match=r"now in SPEC, not RECEIVED"):
        await store.apply_transition(task.id, S.RECEIVED, move(task, S.CANCELLED), {"error": "x"})

    after = await store.get_task(task.id)
    assert after is not None and after.state == S.SPEC and after.error is None
    assert await store.last_event_id() == before


async def test_two_deciders_racing_from_the_same_state_one_wins(
    store: Store, second_store: Store, project: Project
) -> None:
    task = await new_task(store)

    results = await asyncio.gather(
        store.apply_transition(task.id, S.RECEIVED, move(task, S.SPEC, actor="a"), {}),
        second_store.apply_transition(task.id, S.RECEIVED, move(task, S.CANCELLED, actor="b"), {}),
        return_exceptions=True,
    )

    wins = [r for r in results if isinstance(r, tuple)]
    losses = [r for r in results if isinstance(r, StaleState)]
    assert len(wins) == 1 and len(losses) == 1, results
    (winner, event) = wins[0]
    assert (await store.get_task(task.id)) == winner
    transitions = [
        e for e in await store.events_after(0, task_id=task.id) if isinstance(e, TaskTransitioned)
    ]
    assert transitions == [event]


async def test_unknown_task_is_not_found(store: Store, project: Project) -> None:
    with pytest.raises(NotFound, match="T-42") as e:
        await store.apply_transition(
            "T-42",
            S.RECEIVED,
            TaskTransitioned(from_state=S.RECEIVED, to_state=S.SPEC, actor="a"),
            {},
        )
    assert e.value.hint
    with pytest.raises(NotFound, match="T-42"):
        await store.update_task(
            "T-42", S.RECEIVED, {"archived": True}, TaskUpdated(fields={}, actor="a")
        )
    with pytest.raises(NotFound, match="T-42"):
        await store.enqueue_run(NewRun(task_id="T-42", stage=S.SPEC, role="spec"))
    with pytest.raises(NotFound, match="T-42"):
        await store.cancel_runs("T-42")
    with pytest.raises(NotFound):
        await store.get_task("not-an-id")
    assert await store.last_event_id() == 0


async def test_only_mutable_fields_can_be_set(store: Store, project: Project) -> None:
    task = await new_task(store)
    with pytest.raises(ValueError, match="project"):
        await store.apply_transition(task.id, S.RECEIVED, move(task, S.SPEC), {"project": "sneaky"})
    with pytest.raises(ValueError, match="state"):
        await store.update_task(
            task.id, S.RECEIVED, {"state": "DONE"}, TaskUpdated(fields={}, actor="a")
        )
    with pytest.raises(ValueError):
        await store.update_task(
            task.id, S.RECEIVED, {"qa_loops": "many"}, TaskUpdated(fields={}, actor="a")
        )
    assert await store.get_task(task.id) == task
    assert len(await store.events_after(0)) == 1


async def test_update_task_is_compare_and_set_without_a_state_change(
    store: Store, project: Project
) -> None:
    task = await new_task(store)
    fields = {"archived": True, "resume_state": S.SPEC, "approved_plan_sha": "ab" * 32}

    updated, event = await store.update_task(
        task.id, S.RECEIVED, fields, TaskUpdated(fields={"archived": True}, actor="bob")
    )

    assert updated.state == S.RECEIVED and updated.state_since == task.state_since
    assert (
        updated.archived
        and updated.resume_state == S.SPEC
        and updated.approved_plan_sha == "ab" * 32
    )
    assert isinstance(event, TaskUpdated) and event.id > 0 and event.task_id == task.id
    with pytest.raises(StaleState, match="RECEIVED, not PLAN"):
        await store.update_task(
            task.id, S.PLAN, {"merged": True}, TaskUpdated(fields={}, actor="bob")
        )
    assert await store.get_task(task.id) == updated


async def test_a_task_keeps_its_budgets_by_role(store: Store, project: Project) -> None:
    task = await new_task(store)
    raised = {"reviewer": {"usd": 2.5, "tokens": None}, "dev": {"usd": None, "tokens": 10}}
    updated, _ = await store.update_task(
        task.id, S.RECEIVED, {"role_budgets": raised}, TaskUpdated(fields={}, actor="bob")
    )
    assert updated.role_budgets["reviewer"].usd == 2.5
    assert updated.role_budgets["dev"].tokens == 10
    assert await store.get_task(task.id) == updated
    cleared, _ = await store.update_task(
        task.id, S.RECEIVED, {"role_budgets": {}}, TaskUpdated(fields={}, actor="bob")
    )
    assert cleared.role_budgets == {} and (await store.get_task(task.id)).role_budgets == {}


# -- events -----------------------------------------------------------------------------------


async def test_event_ids_are_monotonic_and_events_after_pages(
    store: Store, second_store: Store, project: Project
) -> None:
    task = await new_task(store)
    written = [
        await s.append_event(DecisionRecorded(task_id=task.id, decision="retry", actor=f"op{i}"))
        for i, s in enumerate([store, second_store] * 5)
    ]

    ids = [e.id for e in written]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert await store.last_event_id() == ids[-1] == await second_store.last_event_id()

    everything = await store.events_after(0)
    assert len(everything) == 11 and isinstance(everything[0], TaskCreated)
    assert everything[1:] == written

    pages, cursor = [], 0
    while page := await second_store.events_after(cursor, limit=3):
        pages.append(page)
        cursor = page[-1].id
    assert [len(p) for p in pages] == [3, 3, 3, 2]
    assert [e for p in pages for e in p] == everything
    assert await store.events_after(ids[-1]) == []


async def test_events_after_of_a_kind_pages_every_tasks_events_of_that_kind_alone(
    store: Store, project: Project
) -> None:
    first, second = await new_task(store), await new_task(store, "second")
    decided = []
    for n in range(5):
        task = (first, second)[n % 2]
        await store.append_event(
            InputRequested(task_id=task.id, stage=S.SPEC, question=f"why {n}?")
        )
        decided.append(
            await store.append_event(
                DecisionRecorded(task_id=task.id, decision="answer", actor="ana", reason=f"{n}")
            )
        )

    pages, cursor = [], 0
    while page := await store.events_after(cursor, limit=2, kind=DecisionRecorded.kind):
        pages.append(page)
        cursor = page[-1].id or cursor
    assert [len(p) for p in pages] == [2, 2, 1]
    assert [e for p in pages for e in p] == decided
    assert await store.events_after(decided[-1].id or 0, kind=DecisionRecorded.kind) == []
    theirs = await store.events_after(0, task_id=second.id, kind=DecisionRecorded.kind)
    assert theirs == decided[1::2]
    asked = await store.events_after(0, kind=InputRequested.kind)
    assert [e.question for e in asked if isinstance(e, InputRequested)] == [
        f"why {n}?" for n in range(5)
    ]


async def test_a_tasks_output_of_one_stream_is_read_without_the_rest(
    store: Store, project: Project
) -> None:
    task, other = await new_task(store), await new_task(store, "other")
    written = []
    for n, stream in enumerate(["stdout", "network", "stderr", "network", "stdout"]):
        written.append(
            await store.append_event(RunOutput(task_id=task.id, stream=stream, text=f"{n}"))
        )
        await store.append_event(RunOutput(task_id=other.id, stream=stream, text=f"{n}"))

    network = await store.events_after(0, task_id=task.id, kind=RunOutput.kind, stream="network")
    assert network == [e for e in written if isinstance(e, RunOutput) and e.stream == "network"]
    every = await store.events_after(0, task_id=task.id, kind=RunOutput.kind)
    assert every == written
    later = await store.events_after(
        network[0].id, task_id=task.id, kind=RunOutput.kind, stream="network", limit=5
    )
    assert later == network[1:]


async def test_an_event_a_worker_sent_twice_is_kept_once(store: Store, project: Project) -> None:
    lease = await leased_run(store)
    ids = {"task_id": lease.task_id, "run_id": lease.run_id}
    first = await store.append_event(RunOutput(**ids, stream="stdout", text="x", sent="1:1"))
    again = await store.append_event(RunOutput(**ids, stream="stdout", text="x", sent="1:1"))
    other = await store.append_event(RunOutput(**ids, stream="stdout", text="x", sent="1:2"))
    plain = [await store.append_event(RunOutput(**ids, stream="stdout", text="x")) for _ in "ab"]
    assert again.id == first.id and len({first.id, other.id, *(e.id for e in plain)}) == 4
    kept = await store.events_after(0, task_id=lease.task_id, kind=RunOutput.kind)
    assert [e.id for e in kept] == [first.id, other.id, *(e.id for e in plain)]


async def test_a_runs_events_are_read_from_its_end_page_by_page(
    store: Store, project: Project
) -> None:
    lease = await leased_run(store)
    ids = {"task_id": lease.task_id, "run_id": lease.run_id}
    other = await store.enqueue_run(NewRun(task_id=lease.task_id, stage=S.PLAN, role="planner"))
    written = []
    for n in range(12):
        written.append(await store.append_event(RunOutput(**ids, stream="stdout", text=f"{n}\n")))
        await store.append_event(
            RunOutput(task_id=lease.task_id, run_id=other[0].id, stream="stdout", text="no\n")
        )

    newest = await store.run_events_before(lease.run_id, limit=5)
    older = await store.run_events_before(lease.run_id, before=newest[0].id, limit=5)
    oldest = await store.run_events_before(lease.run_id, before=older[0].id, limit=50)

    assert newest == written[-5:] and older == written[-10:-5]
    assert [e.kind for e in oldest] == ["run_queued", "run_output", "run_output"]
    assert oldest[1:] == written[:2]
    assert await store.run_events_before(lease.run_id, before=oldest[0].id) == []


async def test_events_after_filters_by_task(store: Store, project: Project) -> None:
    a = await new_task(store, "a")
    b = await new_task(store, "b")
    await store.append_event(DecisionRecorded(task_id=a.id, decision="approve", actor="x"))
    await store.append_event(DecisionRecorded(decision="global", actor="x"))

    assert [e.task_id for e in await store.events_after(0, task_id=a.id)] == [a.id, a.id]
    assert [e.task_id for e in await store.events_after(0, task_id=b.id)] == [b.id]


async def test_appended_event_round_trips(store: Store) -> None:
    event = RunFinished(
        task_id="T-3",
        run_id="R-9",
        status=RunStatus.FAILED,
        exit_code=2,
        usage=Usage(input_tokens=5, model="m"),
        cost_usd=0.25,
    )

    written = await store.append_event(event)

    assert written == event.model_copy(update={"id": written.id}) and written.id > 0
    (read,) = await store.events_after(written.id - 1)
    assert read == written and read.at.tzinfo == UTC


# -- runs and leases --------------------------------------------------------------------------


async def test_enqueue_and_claim(store: Store, project: Project) -> None:
    task = await new_task(store)
    run, queued = await store.enqueue_run(NewRun(task_id=task.id, stage=S.SPEC, role="spec"))

    assert run.id == "R-1" and run.status == RunStatus.QUEUED and run.attempts == 0
    assert isinstance(queued, RunQueued) and queued.run_id == run.id and queued.task_id == task.id

    lease = await store.claim_run("w1", 30)
    assert lease is not None and (lease.run_id, lease.task_id, lease.worker) == (
        run.id,
        task.id,
        "w1",
    )
    assert lease.token == 1
    assert timedelta(seconds=20) < lease.expires_at - run.enqueued_at < timedelta(seconds=40)
    running = await store.get_run(run.id)
    assert running is not None and running.status == RunStatus.RUNNING and running.attempts == 1
    assert running.lease_token == 1 and running.started_at is not None
    assert await store.claim_run("w2", 30) is None
    assert await store.get_run("R-99") is None


async def test_claims_go_oldest_first(store: Store, project: Project) -> None:
    runs = [
        (
            await store.enqueue_run(
                NewRun(task_id=(await new_task(store)).id, stage=S.SPEC, role=f"r{i}")
            )
        )[0]
        for i in range(3)
    ]
    leases = [await store.claim_run("w", 30) for _ in runs]
    assert [lease.run_id for lease in leases if lease] == [r.id for r in runs]


async def test_claims_go_by_priority_then_oldest_first(store: Store, project: Project) -> None:
    filed = [
        (await store.create_task(NewTask(project=project.name, title=t, priority=p), actor="a"))[0]
        for t, p in (("low", -1), ("plain", 0), ("urgent", 5), ("plain too", 0))
    ]
    assert [t.priority for t in filed] == [-1, 0, 5, 0]
    for task in filed:
        await store.enqueue_run(NewRun(task_id=task.id, stage=S.SPEC, role="spec"))
    leases = [await store.claim_run("w", 30) for _ in filed]
    order = [lease.task_id for lease in leases if lease]
    assert order == [filed[2].id, filed[1].id, filed[3].id, filed[0].id]


async def test_a_queued_run_follows_its_tasks_priority_when_an_edit_changes_it(
    store: Store, project: Project
) -> None:
    first, second = [await new_task(store, title) for title in ("first", "second")]
    for task in (first, second):
        await store.enqueue_run(NewRun(task_id=task.id, stage=S.SPEC, role="spec"))

    await store.update_task(
        second.id, S.RECEIVED, {"priority": 9}, TaskUpdated(fields={"priority": 9}, actor="a")
    )

    leases = [await store.claim_run("w", 30) for _ in range(2)]
    assert [lease.task_id for lease in leases if lease] == [second.id, first.id]


async def test_a_task_keeps_the_tasks_it_waits_for(store: Store, project: Project) -> None:
    first = await new_task(store)
    task, _ = await store.create_task(
        NewTask(project=project.name, title="later", after=(first.id,)), actor="a"
    )
    assert task.after == (first.id,)
    again = await store.get_task(task.id)
    assert again is not None and again.after == (first.id,) and again.priority == 0


async def test_each_run_is_claimed_exactly_once(
    store: Store, second_store: Store, project: Project
) -> None:
    for i in range(60):
        task = await new_task(store, f"task {i}")
        await store.enqueue_run(NewRun(task_id=task.id, stage=S.IMPLEMENTING, role="dev"))

    async def claimer(s: Store, name: str) -> list[Lease]:
        got = []
        while (lease := await s.claim_run(name, 30)) is not None:
            got.append(lease)
        return got

    per_worker = await asyncio.gather(
        *(claimer([store, second_store][i % 2], f"w{i}") for i in range(8))
    )

    claimed = [lease.run_id for leases in per_worker for lease in leases]
    assert len(claimed) == 60 and len(set(claimed)) == 60
    runs = await store.list_runs()
    assert all(r.status == RunStatus.RUNNING and r.attempts == 1 for r in runs)
    assert len({r.lease_token for r in runs}) == 60  # a token names one claim in the store


async def test_heartbeat_extends_a_live_lease(store: Store, project: Project) -> None:
    lease = await leased_run(store, ttl_s=5)
    extended = await store.heartbeat(lease, 60)
    assert extended.token == lease.token and extended.run_id == lease.run_id
    assert extended.expires_at - lease.expires_at > timedelta(seconds=50)


async def test_stale_token_loses_heartbeat_and_completion(store: Store, project: Project) -> None:
    lease = await leased_run(store)
    stale = lease.model_copy(update={"token": lease.token - 1})
    before_run, before_events = await store.get_run(lease.run_id), await store.last_event_id()

    with pytest.raises(LeaseLost, match="stale"):
        await store.heartbeat(stale, 60)
    with pytest.raises(LeaseLost, match="stale"):
        await store.complete_run(stale, RunOutcome(status=RunStatus.SUCCEEDED, exit_code=0))
    with pytest.raises(LeaseLost, match="stale"):
        await store.release_run(stale)

    assert await store.get_run(lease.run_id) == before_run
    assert await store.last_event_id() == before_events


async def test_completion_after_expiry_is_rejected(store: Store, project: Project) -> None:
    lease = await expire(store)
    before_run, before_events = await store.get_run(lease.run_id), await store.last_event_id()

    with pytest.raises(LeaseLost, match="expired"):
        await store.complete_run(lease, RunOutcome(status=RunStatus.SUCCEEDED, exit_code=0))
    with pytest.raises(LeaseLost, match="expired"):
        await store.heartbeat(lease, 30)

    assert await store.get_run(lease.run_id) == before_run
    assert await store.last_event_id() == before_events


async def test_complete_run_records_the_outcome_and_run_finished(
    store: Store, project: Project
) -> None:
    lease = await leased_run(store)
    outcome = RunOutcome(
        status=RunStatus.SUCCEEDED,
        exit_code=0,
        adapter="claude",
        adapter_reason="first choice",
        cli_version="1.2.3",
        model="sonnet",
        cost_usd=0.42,
        usage=Usage(
            input_tokens=10,
            output_tokens=20,
            cache_read_tokens=3,
            cache_write_tokens=4,
            model="sonnet",
        ),
    )

    run, event = await store.complete_run(lease, outcome)

    assert run.status == RunStatus.SUCCEEDED and run.exit_code == 0 and run.usage == outcome.usage
    assert (run.adapter, run.adapter_reason, run.cli_version, run.model, run.cost_usd) == (
        "claude",
        "first choice",
        "1.2.3",
        "sonnet",
        0.42,
    )
    assert run.finished_at is not None and run.lease_expires_at is None
    assert (
        isinstance(event, RunFinished) and event.run_id == run.id and event.usage == outcome.usage
    )
    assert (await store.events_after(event.id - 1)) == [event]
    assert await store.get_run(run.id) == run
    with pytest.raises(LeaseLost):  # a lease ends with its run
        await store.complete_run(lease, outcome)
    with pytest.raises(ValueError):
        await store.complete_run(lease, RunOutcome(status=RunStatus.RUNNING))


async def test_a_runs_tokens_per_request_are_kept_in_order(store: Store, project: Project) -> None:
    requests = (
        Usage(input_tokens=1200, output_tokens=1, cache_read_tokens=30_000, model="sonnet"),
        Usage(input_tokens=8, output_tokens=84, cache_write_tokens=900),
        Usage(input_tokens=5, model="odd\x00model"),  # what an agent reported, kept as it can be
    )
    lease = await leased_run(store)
    outcome = RunOutcome(status=RunStatus.SUCCEEDED, requests=requests)

    run, _ = await store.complete_run(lease, outcome)

    assert run.requests == requests
    assert (await store.get_run(run.id)).requests == requests
    assert (await store.list_runs(task_id=lease.task_id))[0].requests == requests
    other = await leased_run(store)
    done, _ = await store.complete_run(other, RunOutcome(status=RunStatus.FAILED))
    assert done.requests == () and (await store.get_run(other.run_id)).requests == ()


async def test_a_run_keeps_its_cli_session_and_the_one_it_continued(
    store: Store, project: Project
) -> None:
    fresh, resumed = await leased_run(store), None
    run, _ = await store.complete_run(
        fresh, RunOutcome(status=RunStatus.SUCCEEDED, session_id="6cbb9fc9-7a5c")
    )
    assert (run.session_id, run.resumed_session) == ("6cbb9fc9-7a5c", None)
    resumed = await leased_run(store)
    outcome = RunOutcome(
        status=RunStatus.SUCCEEDED, session_id="6cbb9fc9-7a5c", resumed_session="6cbb9fc9-7a5c"
    )
    run, _ = await store.complete_run(resumed, outcome)
    assert (run.session_id, run.resumed_session) == ("6cbb9fc9-7a5c", "6cbb9fc9-7a5c")
    assert await store.get_run(run.id) == run
    assert (await store.list_runs(task_id=fresh.task_id))[0].resumed_session is None


async def test_text_an_agent_wrote_may_hold_nul(store: Store, project: Project) -> None:
    # An agent's error, model name or output reaches the store from an in-process worker with
    # nothing in between. Postgres text cannot hold NUL: it is kept as U+FFFD, never an error.
    lease = await leased_run(store)
    outcome = RunOutcome(
        status=RunStatus.FAILED,
        exit_code=1,
        error="died\x00here",
        model="m\x00",
        adapter_reason="chain\x00",
        usage=Usage(model="m\x00"),
    )

    run, _ = await store.complete_run(lease, outcome)

    assert run.error in ("died\x00here", "died\ufffdhere") and run.model in ("m\x00", "m\ufffd")
    task, _ = await store.update_task(
        lease.task_id,
        S.RECEIVED,
        {"error": "x\x00"},
        TaskUpdated(task_id=lease.task_id, fields={"error": "x\x00"}, actor="t25"),
    )
    assert task.error in ("x\x00", "x\ufffd")
    assert (await store.get_task(lease.task_id)) == task


async def test_cost_by_task_sums_each_tasks_runs(store: Store, project: Project) -> None:
    assert await store.cost_by_task() == {}
    for cost in (0.25, 0.5):
        lease = await leased_run(store)
        await store.complete_run(lease, RunOutcome(status=RunStatus.SUCCEEDED, cost_usd=cost))
    task = await new_task(store)
    _run, _ = await store.enqueue_run(NewRun(task_id=task.id, stage=S.SPEC, role="spec"))
    lease = await store.claim_run("w1", 30)
    await store.complete_run(lease, RunOutcome(status=RunStatus.FAILED, cost_usd=0.125))
    await store.enqueue_run(NewRun(task_id=task.id, stage=S.SPEC, role="spec"))  # not run yet
    await new_task(store)  # no runs at all
    assert await store.cost_by_task() == {"T-1": 0.25, "T-2": 0.5, "T-3": 0.125}
    assert await store.cost_by_task(["T-3", "T-1", "T-4"]) == {"T-1": 0.25, "T-3": 0.125}
    assert await store.cost_by_task([]) == {}


async def test_past_costs_sum_a_projects_succeeded_runs_of_each_role_per_task(
    store: Store, project: Project
) -> None:
    await store.upsert_project(Project(name="other", repo_path="/srv/o", default_branch="main"))
    assert await store.past_costs(project="demo", roles={"dev": None}) == {}

    async def ran(task: Task, role: str, status: RunStatus, cost: float, **chose: str) -> None:
        stage = S.IMPLEMENTING if role == "dev" else S.QA
        await store.enqueue_run(NewRun(task_id=task.id, stage=stage, role=role))
        lease = await store.claim_run("w", 30)
        assert lease is not None
        used = Usage(model=chose.pop("used", None))
        outcome = RunOutcome(status=status, cost_usd=cost, usage=used, **chose)
        await store.complete_run(lease, outcome)

    one, two = await new_task(store, "one"), await new_task(store, "two")
    theirs, _ = await store.create_task(NewTask(project="other", title="theirs"), actor="a")
    await ran(one, "dev", RunStatus.SUCCEEDED, 0.5, model="opus")
    await ran(one, "dev", RunStatus.SUCCEEDED, 0.25, used="opus")  # sent back: a second run
    await ran(two, "dev", RunStatus.SUCCEEDED, 0.125, model="sonnet")
    await ran(two, "dev", RunStatus.FAILED, 9.0, model="opus")
    await ran(two, "qa", RunStatus.SUCCEEDED, 7.0, model="opus")
    await ran(theirs, "dev", RunStatus.SUCCEEDED, 5.0, model="opus")

    any_model = await store.past_costs(project="demo", roles={"dev": None, "docs": None})
    assert any_model == {"dev": PastCosts(3, 0.125, 0.75)}
    opus = await store.past_costs(project="demo", roles={"dev": "opus", "qa": "opus"})
    assert opus == {"dev": PastCosts(2, 0.75, 0.75), "qa": PastCosts(1, 7.0, 7.0)}
    assert await store.past_costs(project="demo", roles={"qa": "sonnet"}) == {}
    theirs_too = await store.past_costs(project="other", roles={"dev": "opus"})
    assert theirs_too == {"dev": PastCosts(1, 5.0, 5.0)}


async def test_the_newest_artifact_of_a_kind_is_found_for_a_project(
    store: Store, project: Project
) -> None:
    await store.upsert_project(Project(name="other", repo_path="/srv/o", default_branch="main"))
    mine, _ = await store.create_task(NewTask(project="demo", title="mine"), actor="a")
    theirs, _ = await store.create_task(NewTask(project="other", title="theirs"), actor="a")

    async def kept(task: Task, kind: ArtifactKind, body: bytes) -> str:
        meta = ArtifactMeta(kind=kind, media_type="application/json", task_id=task.id)
        return (await store.put_artifact(body, meta)).id

    assert await store.newest_artifact(ArtifactKind.MERGE_CHECKS, project="demo") is None
    await kept(mine, ArtifactKind.MERGE_CHECKS, b"old")
    newest = await kept(mine, ArtifactKind.MERGE_CHECKS, b"new")
    await kept(mine, ArtifactKind.PLAN, b"a plan, written after")
    await kept(theirs, ArtifactKind.MERGE_CHECKS, b"another project's")
    await store.update_task(
        mine.id, S.RECEIVED, {"archived": True}, TaskUpdated(fields={"archived": True}, actor="b")
    )

    found = await store.newest_artifact(ArtifactKind.MERGE_CHECKS, project="demo")
    assert found is not None and found.id == newest and found.size == 3
    assert await store.newest_artifact(ArtifactKind.REVIEW, project="demo") is None


async def test_reap_returns_lapsed_runs_to_the_queue(store: Store, project: Project) -> None:
    first = await expire(store)

    (reaped,) = await store.reap_expired()

    assert reaped.id == first.run_id and reaped.status == RunStatus.QUEUED and reaped.attempts == 1
    assert await store.reap_expired() == []
    second = await store.claim_run("w2", 30)
    assert second is not None and second.run_id == first.run_id and second.token > first.token
    assert (await store.get_run(first.run_id)).attempts == 2  # type: ignore[union-attr]
    with pytest.raises(LeaseLost):
        await store.heartbeat(first, 30)


async def test_reap_leaves_live_leases_alone(store: Store, project: Project) -> None:
    lease = await leased_run(store, ttl_s=30)
    assert await store.reap_expired() == []
    assert (await store.get_run(lease.run_id)).status == RunStatus.RUNNING  # type: ignore[union-attr]


async def test_reaped_run_waits_for_its_retry_delay(store: Store, project: Project) -> None:
    await expire(store)
    await store.reap_expired(retry_delay_s=60)
    assert await store.claim_run("w2", 30) is None


async def test_run_fails_once_it_used_its_attempts(store: Store, project: Project) -> None:
    lease = await expire(store, max_attempts=2)
    await store.reap_expired()
    again = await store.claim_run("w2", 0.05)
    assert again is not None and again.run_id == lease.run_id
    await agent_started(store, again, 2)
    # not a wait: the 0.05 s lease lapses by the clock (load lapses it further)
    await asyncio.sleep(0.2)

    (failed,) = await store.reap_expired()

    assert failed.status == RunStatus.FAILED and failed.attempts == 2
    assert failed.error == "lease expired on all 2 attempts"
    assert await store.claim_run("w3", 30) is None


async def test_a_run_reaped_before_its_agent_started_keeps_its_attempt(
    store: Store, project: Project
) -> None:
    """Its worker died with another run's agent the last it started: not this run's doing."""
    lease = await expire(store, max_attempts=1, agent=False)

    (reaped,) = await store.reap_expired()

    assert reaped.status == RunStatus.QUEUED and reaped.attempts == 0
    assert reaped.error == "lease expired before its agent started (attempt 1, not counted)"
    again = await store.claim_run("w2", 30)
    assert again is not None and again.run_id == lease.run_id
    assert (await store.get_run(lease.run_id)).attempts == 1  # type: ignore[union-attr]


async def test_a_reap_is_free_only_when_the_one_before_was_not(
    store: Store, project: Project
) -> None:
    """A run that keeps losing its worker before its agent starts still fails in the end;
    an agent started in an earlier attempt does not count for a later one."""
    lease = await expire(store, max_attempts=2)  # attempt 1 started its agent: it counts
    (counted,) = await store.reap_expired()
    assert counted.attempts == 1 and counted.error == "lease expired on attempt 1 of 2"
    for free in (True, False):  # attempt 2, twice, with no agent started
        again = await store.claim_run("w2", 0.05)
        assert again is not None and again.run_id == lease.run_id
        await asyncio.sleep(0.2)
        (reaped,) = await store.reap_expired()
        if free:
            assert reaped.status == RunStatus.QUEUED and reaped.attempts == 1
            assert reaped.error == "lease expired before its agent started (attempt 2, not counted)"

    assert reaped.status == RunStatus.FAILED and reaped.attempts == 2
    assert reaped.error == "lease expired on all 2 attempts"


async def test_release_hands_the_run_back_without_counting_an_attempt(
    store: Store, project: Project
) -> None:
    lease = await leased_run(store)

    released = await store.release_run(lease)

    assert released.status == RunStatus.QUEUED and released.attempts == 0
    with pytest.raises(LeaseLost):
        await store.heartbeat(lease, 30)
    again = await store.claim_run("w2", 30)
    assert again is not None and again.run_id == lease.run_id and again.token > lease.token
    assert (await store.get_run(lease.run_id)).attempts == 1  # type: ignore[union-attr]


async def test_cancel_runs_makes_live_leases_stale(store: Store, project: Project) -> None:
    lease = await leased_run(store)
    await store.enqueue_run(NewRun(task_id=lease.task_id, stage=S.PLAN, role="second"))
    other = await new_task(store, "other")
    untouched, _ = await store.enqueue_run(NewRun(task_id=other.id, stage=S.SPEC, role="spec"))

    cancelled = await store.cancel_runs(lease.task_id)

    assert [r.status for r in cancelled] == [RunStatus.CANCELLED, RunStatus.CANCELLED]
    with pytest.raises(LeaseLost, match="stale"):
        await store.heartbeat(lease, 30)
    with pytest.raises(LeaseLost, match="stale"):
        await store.complete_run(lease, RunOutcome(status=RunStatus.SUCCEEDED))
    assert await store.cancel_runs(lease.task_id) == []
    assert (await store.get_run(untouched.id)).status == RunStatus.QUEUED  # type: ignore[union-attr]
    claimed = await store.claim_run("w", 30)
    assert claimed is not None and claimed.run_id == untouched.id


async def test_list_runs_filters(store: Store, project: Project) -> None:
    a, b = await new_task(store, "a"), await new_task(store, "b")
    ra, _ = await store.enqueue_run(NewRun(task_id=a.id, stage=S.SPEC, role="spec"))
    rb, _ = await store.enqueue_run(NewRun(task_id=b.id, stage=S.SPEC, role="spec"))
    await store.claim_run("w", 30)

    assert [r.id for r in await store.list_runs()] == [ra.id, rb.id]
    assert [r.id for r in await store.list_runs(task_id=b.id)] == [rb.id]
    assert [r.id for r in await store.list_runs(status=RunStatus.RUNNING)] == [ra.id]
    assert await store.list_runs(task_id=b.id, status=RunStatus.RUNNING) == []


async def test_the_sweepers_reads_leave_out_tasks_with_a_run_queued_or_running(
    store: Store, project: Project
) -> None:
    queued, running, finished, idle = [await new_task(store, n) for n in "abcd"]
    assert not await store.has_active_runs()
    for task in (queued, running, finished):
        await store.enqueue_run(NewRun(task_id=task.id, stage=S.SPEC, role="spec"))
    first = await store.claim_run("w", 30)  # the queued run of `queued`
    second = await store.claim_run("w", 30)
    third = await store.claim_run("w", 30)
    assert first and second and third
    await store.release_run(first)
    await store.complete_run(third, RunOutcome(status=RunStatus.SUCCEEDED))

    waiting = await store.list_tasks(without_active_runs=True)
    assert [t.id for t in waiting] == [finished.id, idle.id]
    assert await store.list_tasks(states=[S.SPEC], without_active_runs=True) == []
    first_page = await store.list_tasks(states=[S.RECEIVED], without_active_runs=True, limit=1)
    assert [t.id for t in first_page] == [finished.id]
    assert await store.has_active_runs()

    await store.complete_run(second, RunOutcome(status=RunStatus.FAILED))
    assert await store.has_active_runs()  # `queued` still waits in the queue
    await store.cancel_runs(queued.id)
    assert not await store.has_active_runs()
    assert len(await store.list_tasks(without_active_runs=True)) == 4


# -- artifacts --------------------------------------------------------------------------------


async def test_artifact_content_is_stored_once_with_each_provenance(
    store: Store, project: Project
) -> None:
    lease = await leased_run(store)
    content = b"# Plan\nrisk: low\n"
    meta = ArtifactMeta(
        kind=ArtifactKind.PLAN,
        media_type="text/markdown",
        task_id=lease.task_id,
        run_id=lease.run_id,
        role="planner",
        adapter="claude",
        cli_version="1.0",
        model="m",
    )

    first = await store.put_artifact(content, meta)
    second = await store.put_artifact(content, meta.model_copy(update={"adapter": "codex"}))

    assert first.id != second.id
    assert first.sha256 == second.sha256 == hashlib.sha256(content).hexdigest()
    assert first.size == len(content) and first.meta == meta
    for artifact in (first, second):
        read, body = await store.get_artifact(artifact.id)
        assert read == artifact and body == content
    assert [a.id for a in await store.list_artifacts(task_id=lease.task_id)] == [
        first.id,
        second.id,
    ]
    assert [a.id for a in await store.list_artifacts()] == [first.id, second.id]


async def test_artifact_for_unknown_task_or_id_is_not_found(store: Store, project: Project) -> None:
    with pytest.raises(NotFound, match="T-5"):
        await store.put_artifact(b"x", ArtifactMeta(kind=ArtifactKind.LOG, task_id="T-5"))
    with pytest.raises(NotFound, match="R-8"):
        await store.put_artifact(b"x", ArtifactMeta(kind=ArtifactKind.LOG, run_id="R-8"))
    with pytest.raises(NotFound, match="A-7"):
        await store.get_artifact("A-7")
    assert await store.list_artifacts() == []  # nothing of the refused ones kept


async def test_corrupted_artifact_is_detected(store: Store, project: Project, corrupt_blob) -> None:
    artifact = await store.put_artifact(b"the real plan", ArtifactMeta(kind=ArtifactKind.PLAN))

    await corrupt_blob(artifact.sha256)

    with pytest.raises(ArtifactCorrupted) as e:
        await store.get_artifact(artifact.id)
    message = str(e.value)
    assert artifact.id in message and artifact.sha256 in message
    tampered = hashlib.sha256(b"the real plan\x00").hexdigest()
    assert tampered in message


def big_log(size: int) -> bytes:
    """Content over one chunk: numbered lines, so a misplaced chunk would show."""
    lines = b"".join(b"line %08d of the agent's output\n" % n for n in range(size // 32 + 1))
    return lines[:size] + truncation_marker(size, size).encode()


async def streamed(store: Store, artifact_id: str) -> tuple[Artifact, list[bytes]]:
    artifact, chunks = await store.stream_artifact(artifact_id)
    return artifact, [chunk async for chunk in chunks]


async def test_a_large_artifact_is_stored_from_a_file_and_streamed_back_in_chunks(
    store: Store, project: Project, tmp_path: Path
) -> None:
    lease = await leased_run(store)
    content = big_log(2 * 2**20 + 12345)  # three chunks, the last one short
    path = tmp_path / "run.log"
    path.write_bytes(content)
    meta = ArtifactMeta(kind=ArtifactKind.LOG, task_id=lease.task_id, run_id=lease.run_id)

    first = await store.put_artifact_file(path, meta)
    second = await store.put_artifact_file(path, meta.model_copy(update={"adapter": "codex"}))

    assert first.sha256 == second.sha256 == hashlib.sha256(content).hexdigest()
    assert first.size == len(content) and first.id != second.id
    read, chunks = await streamed(store, first.id)
    assert read == first and b"".join(chunks) == content
    assert [len(c) for c in chunks] == [2**20, 2**20, len(content) - 2 * 2**20]
    assert (await store.get_artifact(second.id))[1] == content  # whole, for a caller that asks


async def test_a_small_artifact_streams_as_one_chunk_and_a_small_file_is_stored_whole(
    store: Store, project: Project, tmp_path: Path
) -> None:
    path = tmp_path / "short.log"
    path.write_bytes(b"said a little\n")
    artifact = await store.put_artifact_file(path, ArtifactMeta(kind=ArtifactKind.LOG))

    assert (await streamed(store, artifact.id))[1] == [b"said a little\n"]
    with pytest.raises(NotFound, match="A-99"):
        await store.stream_artifact("A-99")


async def test_a_streamed_artifact_with_a_tampered_chunk_fails_verification(
    store: Store, project: Project, tmp_path: Path, corrupt_chunk
) -> None:
    content = big_log(3 * 2**20)
    path = tmp_path / "run.log"
    path.write_bytes(content)
    artifact = await store.put_artifact_file(path, ArtifactMeta(kind=ArtifactKind.LOG))

    await corrupt_chunk(artifact.sha256, 1)

    _, chunks = await store.stream_artifact(artifact.id)
    passed: list[bytes] = []

    async def read_all() -> None:
        async for chunk in chunks:
            passed.append(chunk)  # noqa: PERF401 - each as it comes, up to the error

    with pytest.raises(ArtifactCorrupted, match=artifact.id) as e:
        await read_all()
    assert len(passed) == 4 and b"".join(passed) != content  # raised after the last chunk
    assert artifact.sha256 in str(e.value)
    with pytest.raises(ArtifactCorrupted):
        await store.get_artifact(artifact.id)


# -- audit anchor -----------------------------------------------------------------------------


async def test_audit_anchor_is_compare_and_set(store: Store, second_store: Store) -> None:
    assert await store.get_audit_anchor() is None
    one, two, three = (
        AuditAnchor(seq=1, hash="a"),
        AuditAnchor(seq=2, hash="b"),
        AuditAnchor(seq=3, hash="c"),
    )

    await store.set_audit_anchor(one, previous=None)
    with pytest.raises(StaleState):
        await second_store.set_audit_anchor(two, previous=None)
    await second_store.set_audit_anchor(two, previous=one)
    with pytest.raises(StaleState):
        await store.set_audit_anchor(three, previous=one)

    assert await store.get_audit_anchor() == two


async def test_racing_anchor_moves_one_wins(store: Store, second_store: Store) -> None:
    base = AuditAnchor(seq=1, hash="a")
    await store.set_audit_anchor(base, previous=None)

    results = await asyncio.gather(
        store.set_audit_anchor(AuditAnchor(seq=2, hash="x"), previous=base),
        second_store.set_audit_anchor(AuditAnchor(seq=2, hash="y"), previous=base),
        return_exceptions=True,
    )

    assert sorted(type(r).__name__ for r in results) == ["NoneType", "StaleState"]


# -- a decision, in one transaction -------------------------------------------------------------


def _approval(task: Task, *, anchor: AuditAnchor | None, previous: AuditAnchor | None = None):
    return DecisionWrite(
        task_id=task.id,
        expected=task.state,
        change=move(task, S.IMPLEMENTING),
        announce=DecisionRecorded(task_id=task.id, decision="approve", actor="alice"),
        fields={"approved_plan_sha": "ab" * 32},
        anchor=anchor,
        previous=previous,
        enqueue=NewRun(task_id=task.id, stage=S.IMPLEMENTING, role="dev"),
    )


async def _waiting_for_approval(store: Store) -> Task:
    task = await new_task(store)
    for to in (S.SPEC, S.PLAN, S.AWAITING_APPROVAL):
        task, _ = await store.apply_transition(task.id, task.state, move(task, to), {})
    return task


async def test_a_decision_is_one_write_of_its_change_announcement_anchor_and_next_run(
    store: Store, project: Project
) -> None:
    task = await _waiting_for_approval(store)
    before = await store.last_event_id()
    line = AuditAnchor(seq=1, hash="a")

    moved, written = await store.apply_decision(_approval(task, anchor=line))

    assert (moved.state, moved.approved_plan_sha) == (S.IMPLEMENTING, "ab" * 32)
    assert [type(e) for e in written] == [TaskTransitioned, DecisionRecorded, RunQueued]
    assert [e.id for e in written] == sorted(e.id for e in written) and written[0].id > before
    assert written == await store.events_after(before, task_id=task.id)  # all of them, in order
    assert await store.get_audit_anchor() == line
    (run,) = await store.list_runs(task_id=task.id)
    assert (run.stage, run.role, run.status, run.id) == (
        S.IMPLEMENTING,
        "dev",
        RunStatus.QUEUED,
        written[2].run_id,
    )


async def test_a_decision_that_fails_writes_nothing_of_it(
    store: Store, second_store: Store, project: Project
) -> None:
    task = await _waiting_for_approval(store)
    await store.set_audit_anchor(AuditAnchor(seq=1, hash="a"), previous=None)
    before = await store.last_event_id()

    with pytest.raises(StaleState):  # the anchor moved (the line it follows is not the newest)
        await second_store.apply_decision(
            _approval(
                task, anchor=AuditAnchor(seq=2, hash="b"), previous=AuditAnchor(seq=1, hash="z")
            )
        )
    await store.apply_transition(task.id, task.state, move(task, S.PLAN), {})
    after_move = await store.last_event_id()
    with pytest.raises(StaleState):  # the task moved since it was checked
        await store.apply_decision(
            _approval(
                task, anchor=AuditAnchor(seq=2, hash="b"), previous=AuditAnchor(seq=1, hash="a")
            )
        )

    assert [e.id for e in await store.events_after(before)] == [after_move]
    assert await store.get_audit_anchor() == AuditAnchor(seq=1, hash="a")
    assert await store.list_runs(task_id=task.id) == []
    assert (await store.get_task(task.id)).approved_plan_sha is None


async def test_a_cancel_ends_the_tasks_runs_with_it(store: Store, project: Project) -> None:
    lease = await leased_run(store)
    task = await store.get_task(lease.task_id)
    cancel = DecisionWrite(
        task_id=task.id,
        expected=task.state,
        change=TaskUpdated(task_id=task.id, fields={"archived": True}, actor="alice"),
        announce=DecisionRecorded(task_id=task.id, decision="cancel", actor="alice"),
        fields={"archived": True},
        cancel_runs=True,
    )

    changed, written = await store.apply_decision(cancel)

    assert changed.archived and [type(e) for e in written] == [TaskUpdated, DecisionRecorded]
    assert [r.status for r in await store.list_runs(task_id=task.id)] == [RunStatus.CANCELLED]
    with pytest.raises(LeaseLost):
        await store.heartbeat(lease, 30)


# -- robustness -------------------------------------------------------------------------------


@pytest.mark.parametrize("steps", range(8))
async def test_a_cancelled_call_is_all_or_nothing_and_leaves_the_store_usable(
    store: Store, project: Project, steps: int
) -> None:
    task = await new_task(store)
    call = asyncio.create_task(
        store.apply_transition(task.id, S.RECEIVED, move(task, S.SPEC), {"qa_loops": 1})
    )
    # not a wait: cancels at a different point of the transaction each time
    await asyncio.sleep(steps * 0.00005)
    call.cancel()
    await asyncio.gather(call, return_exceptions=True)

    now = await store.get_task(task.id)
    assert now is not None
    moves = [
        e for e in await store.events_after(0, task_id=task.id) if isinstance(e, TaskTransitioned)
    ]
    assert (now.state, now.qa_loops, len(moves)) in {(S.RECEIVED, 0, 0), (S.SPEC, 1, 1)}
    await store.apply_transition(task.id, now.state, move(now, S.CANCELLED), {})


async def test_the_event_of_a_change_is_about_that_task(store: Store, project: Project) -> None:
    a, b = await new_task(store, "a"), await new_task(store, "b")
    with pytest.raises(ValueError, match="T-2"):
        await store.apply_transition(a.id, S.RECEIVED, move(b, S.SPEC), {})
    with pytest.raises(
        ValueError
    ):  # a state change is recorded as a TaskTransitioned from `expected`
        await store.apply_transition(a.id, S.SPEC, move(a, S.PLAN), {})
    assert await store.get_task(a.id) == a


# -- every process sees every event -----------------------------------------------------------


async def test_wait_for_events_wakes_a_reader_in_another_instance(
    store: Store, second_store: Store, project: Project
) -> None:
    cursor = await second_store.last_event_id()
    assert await second_store.wait_for_events(cursor, 0.05) is False  # nothing new: it times out

    waiting = asyncio.create_task(second_store.wait_for_events(cursor, 30))
    # not a wait: no news, the reader waits; negative: load only eases it, never fails it falsely
    await asyncio.sleep(0.05)
    assert not waiting.done()
    written = await store.append_event(DecisionRecorded(decision="approve", actor="alice"))

    assert await asyncio.wait_for(waiting, 10) is True
    assert await second_store.events_after(cursor) == [written]
    assert await second_store.wait_for_events(cursor, 0) is True  # already there: no waiting
    assert await store.wait_for_events(written.id, 0) is False


async def test_wait_for_events_wakes_a_reader_of_the_same_instance(
    store: Store, project: Project
) -> None:
    waiting = asyncio.create_task(store.wait_for_events(await store.last_event_id(), 30))
    # not a wait: the reader starts waiting; one not yet waiting finds it at once
    await asyncio.sleep(0.02)
    task = await new_task(store)
    assert await asyncio.wait_for(waiting, 10) is True
    assert [e.task_id for e in await store.events_after(0)] == [task.id]


# -- crash loops ------------------------------------------------------------------------------


async def until_claimed(
    store: Store, worker: str, ttl_s: float, *, within_s: float = 10.0
) -> Lease:
    for _ in range(int(within_s / 0.02)):
        if (lease := await store.claim_run(worker, ttl_s)) is not None:
            return lease
        await asyncio.sleep(0.02)
    raise AssertionError(f"nothing became claimable within {within_s} s")


async def test_a_crash_looping_run_backs_off_then_stops_and_never_blocks_the_others(
    store: Store, project: Project
) -> None:
    crashing = await expire(store, max_attempts=3)  # attempt 1 lapses: its worker "died"
    healthy, _ = await store.enqueue_run(
        NewRun(task_id=(await new_task(store, "healthy")).id, stage=S.SPEC, role="healthy")
    )

    reaped_at = asyncio.get_running_loop().time()
    (reaped,) = await store.reap_expired(retry_delay_s=2.0)  # back in 2 s
    assert reaped.status == RunStatus.QUEUED and reaped.error == "lease expired on attempt 1 of 3"
    other = await store.claim_run("w2", 30)  # the crashing run is older, but waits out its backoff
    nothing = await store.claim_run("w2", 30)
    # Within the 2 s nothing else is claimable; a machine that held these two claims back
    # past them is not this test's failure, and leaves nothing to check here.
    if asyncio.get_running_loop().time() - reaped_at < 2.0:
        assert other is not None and other.run_id == healthy.id
        assert nothing is None
    else:
        pytest.skip("the machine held two store calls back past a 2 s backoff")

    second = await until_claimed(store, "w3", 0.05)  # attempt 2, which lapses too
    assert second.run_id == crashing.run_id and second.token > crashing.token
    await agent_started(store, second, 2)
    # not a wait: the 0.05 s lease lapses by the clock (load lapses it further)
    await asyncio.sleep(0.2)
    reaped_at = asyncio.get_running_loop().time()
    await store.reap_expired(retry_delay_s=0.5)  # the second wait doubles: 1 s
    await asyncio.sleep(0.55)  # not a wait: past the first wait's 0.5 s, inside the doubled 1 s
    early = await store.claim_run("w4", 0.05)
    # still backing off, unless load held this claim back past the doubled 1 s
    assert early is None or asyncio.get_running_loop().time() - reaped_at >= 1.0
    third = early or await until_claimed(store, "w4", 0.05)
    await agent_started(store, third, 3)
    # not a wait: the 0.05 s lease lapses by the clock (load lapses it further)
    await asyncio.sleep(0.2)

    (failed,) = await store.reap_expired(retry_delay_s=0.5)
    assert failed.id == third.run_id and failed.status == RunStatus.FAILED and failed.attempts == 3
    assert failed.error == "lease expired on all 3 attempts"
    # not a wait: none once failed for good; negative: load only eases it, never fails it falsely
    await asyncio.sleep(0.3)
    assert await store.claim_run("w5", 30) is None  # it stopped for good
    assert (await store.get_run(healthy.id)).status == RunStatus.RUNNING  # type: ignore[union-attr]


async def test_backoff_never_exceeds_its_longest_delay(store: Store, project: Project) -> None:
    lease = await expire(store, max_attempts=5)
    await store.reap_expired(retry_delay_s=0.1, max_retry_delay_s=0.1)
    await until_claimed(store, "w2", 0.05)
    # not a wait: the 0.05 s lease lapses by the clock (load lapses it further)
    await asyncio.sleep(0.2)
    await store.reap_expired(
        retry_delay_s=0.1, max_retry_delay_s=0.1
    )  # would be 0.2 s, capped at 0.1
    # not a wait: past the 0.1 s backoff by the clock (load only goes further past)
    await asyncio.sleep(0.15)
    again = await store.claim_run("w3", 30)
    assert again is not None and again.run_id == lease.run_id


# -- a run's completion and the decision on it, each one transaction ---------------------------


async def test_a_run_completed_keeping_its_artifacts_writes_them_with_it(
    store: Store, project: Project, tmp_path: Path
) -> None:
    lease = await leased_run(store)
    log = tmp_path / "run.log"
    log.write_bytes(big_log(2**20 + 10))  # over one chunk: stored from the file in chunks
    meta = ArtifactMeta(kind=ArtifactKind.PROMPT, task_id=lease.task_id, run_id=lease.run_id)
    kept = [
        NewArtifact(meta=meta, content=b"write the spec"),
        NewArtifact(meta=meta.model_copy(update={"kind": ArtifactKind.LOG}), content=log),
    ]
    before = await store.last_event_id()

    run, events = await store.complete_run_keeping(
        lease, RunOutcome(status=RunStatus.SUCCEEDED), kept
    )

    assert run.status is RunStatus.SUCCEEDED
    artifacts = await store.list_artifacts(task_id=lease.task_id)
    assert [(a.meta.kind, a.meta.run_id) for a in artifacts] == [
        (ArtifactKind.PROMPT, run.id),
        (ArtifactKind.LOG, run.id),
    ]
    assert (await store.get_artifact(artifacts[1].id))[1] == log.read_bytes()
    assert [type(e) for e in events] == [RunFinished, ArtifactStored, ArtifactStored]
    assert [e.artifact_id for e in events if isinstance(e, ArtifactStored)] == [
        a.id for a in artifacts
    ]
    assert await store.events_after(before) == events


async def test_a_run_completed_keeping_under_a_lost_lease_keeps_nothing(
    store: Store, project: Project
) -> None:
    lease = await leased_run(store)
    meta = ArtifactMeta(kind=ArtifactKind.PROMPT, task_id=lease.task_id, run_id=lease.run_id)
    stale = lease.model_copy(update={"token": lease.token + 1000})
    before = await store.last_event_id()

    with pytest.raises(LeaseLost):
        await store.complete_run_keeping(
            stale, RunOutcome(status=RunStatus.SUCCEEDED), [NewArtifact(meta, b"said")]
        )

    assert await store.list_artifacts(task_id=lease.task_id) == []
    assert await store.events_after(before) == []
    assert (await store.get_run(lease.run_id)).status is RunStatus.RUNNING  # type: ignore[union-attr]


async def test_a_task_move_writes_its_artifacts_change_run_and_events_together(
    store: Store, project: Project
) -> None:
    lease = await leased_run(store)
    task = await store.get_task(lease.task_id)
    assert task is not None
    task, _ = await store.apply_transition(task.id, S.RECEIVED, move(task, S.SPEC), {})
    await store.complete_run(lease, RunOutcome(status=RunStatus.SUCCEEDED))
    meta = ArtifactMeta(kind=ArtifactKind.SPEC, task_id=task.id, run_id=lease.run_id)
    asked = InputRequested(task_id=task.id, stage=S.PLAN, question="which login?")
    before = await store.last_event_id()

    moved, events = await store.move_task(
        TaskMove(
            task_id=task.id,
            expected=S.SPEC,
            change=move(task, S.PLAN, actor="t25"),
            fields={"branch_head": "abc123"},
            enqueue=NewRun(task_id=task.id, stage=S.PLAN, role="planner"),
            kept=(NewArtifact(meta, b'{"summary": "greet"}'),),
            then=(asked,),
        )
    )

    assert moved.state is S.PLAN and moved.branch_head == "abc123"
    (spec,) = await store.list_artifacts(task_id=task.id)
    assert spec.meta.kind is ArtifactKind.SPEC
    assert [type(e) for e in events] == [
        ArtifactStored,
        TaskTransitioned,
        RunQueued,
        InputRequested,
    ]
    assert await store.events_after(before) == events
    queued = [r for r in await store.list_runs(task_id=task.id) if r.status is RunStatus.QUEUED]
    assert [(r.stage, r.role) for r in queued] == [(S.PLAN, "planner")]

    updated, (changed,) = await store.move_task(
        TaskMove(
            task_id=task.id,
            expected=S.PLAN,
            change=TaskUpdated(task_id=task.id, fields={"violation": "x"}, actor="t25"),
            fields={"violation": "x"},
        )
    )
    assert updated.state is S.PLAN and updated.violation == "x"
    assert isinstance(changed, TaskUpdated)


async def test_a_task_move_from_a_state_it_left_writes_nothing(
    store: Store, project: Project
) -> None:
    task = await new_task(store)
    meta = ArtifactMeta(kind=ArtifactKind.SPEC, task_id=task.id)
    before = await store.last_event_id()

    with pytest.raises(StaleState):
        await store.move_task(
            TaskMove(
                task_id=task.id,
                expected=S.SPEC,
                change=TaskTransitioned(
                    task_id=task.id, from_state=S.SPEC, to_state=S.PLAN, actor="t25"
                ),
                enqueue=NewRun(task_id=task.id, stage=S.PLAN, role="planner"),
                kept=(NewArtifact(meta, b"{}"),),
            )
        )

    assert await store.list_artifacts(task_id=task.id) == []
    assert await store.events_after(before) == []
    assert await store.list_runs(task_id=task.id) == []
