"""What runs cost, summed by the store in one read, on every backend: the same figures as
summing each run read whole (`core.control.cost.summarize`), of every run or of those since a
time, the costliest tasks, and the tokens of the tasks named."""

from __future__ import annotations

from core.control.cost import summarize, summarize_groups
from core.domain.cost import TaskCost
from core.domain.models import (
    NewRun,
    NewTask,
    Project,
    RunOutcome,
    RunStatus,
    Task,
    TaskState,
    Usage,
)
from core.ports import Store

S = TaskState


async def ran(store: Store, task: Task, stage: TaskState, role: str, outcome: RunOutcome) -> None:
    await store.enqueue_run(NewRun(task_id=task.id, stage=stage, role=role))
    lease = await store.claim_run("w", 30)
    assert lease is not None and lease.task_id == task.id
    await store.complete_run(lease, outcome)


def spent(usd: float, *, tokens: int = 0, requests: int = 0, **recorded: object) -> RunOutcome:
    usage = Usage(
        input_tokens=tokens,
        output_tokens=2 * tokens,
        cache_read_tokens=3 * tokens,
        cache_write_tokens=5 * tokens,
        model=recorded.pop("used", None),  # type: ignore[arg-type]
    )
    each = Usage(input_tokens=1, output_tokens=1)
    return RunOutcome(
        status=recorded.pop("status", RunStatus.SUCCEEDED),  # type: ignore[arg-type]
        usage=usage,
        requests=(each,) * requests,
        cost_usd=usd,
        **recorded,  # type: ignore[arg-type]
    )


async def test_the_store_sums_what_runs_cost_as_summing_each_run_does(
    store: Store, project: Project
) -> None:
    assert summarize_groups(await store.cost_groups()) == summarize([])
    one = (await store.create_task(NewTask(project="demo", title="one"), actor="a"))[0]
    two = (await store.create_task(NewTask(project="demo", title="two"), actor="a"))[0]
    await ran(store, one, S.SPEC, "spec", spent(0.25, tokens=10, requests=2, adapter="claude"))
    await ran(store, one, S.PLAN, "planner", spent(0.5, tokens=7, adapter="claude", model="opus"))
    await ran(store, two, S.SPEC, "spec", spent(0.125, tokens=3, adapter="codex", used="gpt"))
    await ran(store, two, S.PLAN, "planner", spent(1.0, status=RunStatus.FAILED, adapter=""))
    await ran(store, one, S.SPEC, "spec", spent(2.0, requests=5, model="", used="haiku"))
    await store.enqueue_run(NewRun(task_id=two.id, stage=S.IMPLEMENTING, role="dev"))  # not run

    summed = summarize_groups(await store.cost_groups())

    assert summed == summarize(await store.list_runs())
    assert summed.runs == 6 and summed.total_usd == 3.875
    assert summed.by_adapter == {"unknown": 3.0, "claude": 0.75, "codex": 0.125}
    assert summed.by_model == {"haiku": 2.0, "unknown": 1.25, "opus": 0.5, "gpt": 0.125}
    assert list(summed.by_stage) == ["SPEC", "PLAN", "IMPLEMENTING"]
    assert summed.by_stage["SPEC"].requests == 7 and summed.by_stage["SPEC"].runs == 3


async def test_since_a_time_only_the_runs_finished_or_queued_after_it_count(
    store: Store, project: Project
) -> None:
    task = (await store.create_task(NewTask(project="demo", title="one"), actor="a"))[0]
    await ran(store, task, S.SPEC, "spec", spent(0.25, tokens=10))
    await store.enqueue_run(NewRun(task_id=task.id, stage=S.PLAN, role="planner"))
    midnight = await store.now()
    lease = await store.claim_run("w", 30)  # queued before `midnight`, finished after it
    assert lease is not None
    await store.complete_run(lease, spent(0.5, tokens=1))
    await store.enqueue_run(NewRun(task_id=task.id, stage=S.IMPLEMENTING, role="dev"))

    today = summarize_groups(await store.cost_groups(since=midnight))

    after = [r for r in await store.list_runs() if (r.finished_at or r.enqueued_at) >= midnight]
    assert [r.stage for r in after] == [S.PLAN, S.IMPLEMENTING]
    assert today == summarize(after)
    assert today.runs == 2 and today.total_usd == 0.5 and today.usage.input_tokens == 1
    assert summarize_groups(await store.cost_groups(since=await store.now())).runs == 0


async def test_the_costliest_tasks_come_first_and_of_equal_cost_the_one_that_ran_first(
    store: Store, project: Project
) -> None:
    assert await store.costliest_tasks(5) == []
    tasks = [
        (await store.create_task(NewTask(project="demo", title=t), actor="a"))[0]
        for t in ("cheap", "dear", "also cheap", "never ran")
    ]
    await ran(store, tasks[0], S.SPEC, "spec", spent(0.25, tokens=10))
    await ran(store, tasks[1], S.SPEC, "spec", spent(0.5, tokens=1))
    await ran(store, tasks[2], S.SPEC, "spec", spent(0.125, tokens=2))
    await ran(store, tasks[2], S.PLAN, "planner", spent(0.125, tokens=2))
    await ran(store, tasks[1], S.PLAN, "planner", spent(1.0, tokens=1))

    assert await store.costliest_tasks(5) == [
        TaskCost(task_id="T-2", runs=2, tokens=6, usd=1.5),
        TaskCost(task_id="T-1", runs=1, tokens=30, usd=0.25),
        TaskCost(task_id="T-3", runs=2, tokens=12, usd=0.25),
    ]
    assert [t.task_id for t in await store.costliest_tasks(1)] == ["T-2"]


async def test_each_named_tasks_tokens_are_every_kind_its_runs_reported(
    store: Store, project: Project
) -> None:
    tasks = [
        (await store.create_task(NewTask(project="demo", title=t), actor="a"))[0]
        for t in ("two runs", "one run", "no run")
    ]
    await ran(store, tasks[0], S.SPEC, "spec", spent(0.25, tokens=10))
    await ran(store, tasks[0], S.PLAN, "planner", spent(0.5, tokens=1, status=RunStatus.FAILED))
    await ran(store, tasks[1], S.SPEC, "spec", spent(0.125, tokens=2))

    assert await store.tokens_by_task(["T-1", "T-2", "T-3"]) == {"T-1": 121, "T-2": 22}
    assert await store.tokens_by_task(["T-2"]) == {"T-2": 22}
    assert await store.tokens_by_task([]) == {}
