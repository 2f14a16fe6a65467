"""The pipeline decides on what T25 recorded — transitions, decisions, runs started — and
finds each by its kind, never by reading a task's every event: an agent that prints without
end makes no decision slower."""

from __future__ import annotations

from core.domain.models import TaskState


async def test_a_task_sent_back_and_merged_is_decided_without_reading_its_agents_output(env):
    control = await env.open()
    task = await env.new(description="scripted: review=changes-once")
    read: list[dict] = []
    events_after = control.store.events_after

    async def counted(after_id, **kw):
        read.append(kw)
        return await events_after(after_id, **kw)

    control.store.events_after = counted  # type: ignore[method-assign]
    try:
        await env.work()
        task = await env.task(task.id)
        assert task.state is TaskState.DONE and task.review_loops == 1, task.error
        await control.merge(task.id, actor="ana")
    finally:
        control.store.events_after = events_after  # type: ignore[method-assign]
    of_the_task = [r for r in read if r.get("task_id")]
    assert of_the_task, read  # the pipeline did read the task's history
    assert all(r.get("kind") for r in of_the_task), [r for r in of_the_task if not r.get("kind")]
