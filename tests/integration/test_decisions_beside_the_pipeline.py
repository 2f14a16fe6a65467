"""An operator decides while the pipeline works: a step the pipeline takes between a
decision's reading of the task and its writing does not refuse the operator — the decision is
ruled again on the task as it is now, and the audit log says what happened."""

from __future__ import annotations

from core.domain.models import TaskState
from core.ports.task_book import T25


async def test_a_cancel_the_pipeline_overtook_is_ruled_again_and_takes_effect(env):
    control = await env.open()
    task = await env.new(title="Filed, then not wanted")
    apply_decision = control.store.apply_decision
    overtaken: list[str] = []

    async def pipeline_steps_first(write):
        if not overtaken:  # the pipeline picks the task up as the cancel is written
            fresh = await control.store.get_task(write.task_id)
            await control.transition(fresh, TaskState.SPEC, actor=T25, reason="picked up")
            overtaken.append(write.task_id)
        return await apply_decision(write)

    control.store.apply_decision = pipeline_steps_first  # type: ignore[method-assign]
    try:
        cancelled = await control.cancel(task.id, actor="ana", reason="not now")
    finally:
        control.store.apply_decision = apply_decision  # type: ignore[method-assign]

    assert overtaken == [task.id]
    assert cancelled.state is TaskState.CANCELLED
    lines = control.audit.entries()
    assert [line.decision for line in lines] == ["cancel", "void", "cancel"]
    assert "now in SPEC, not RECEIVED" in lines[1].reason
    assert (await control.audit.verify()).ok


async def test_an_edit_the_pipeline_overtook_is_ruled_again_on_the_task_as_it_is(env):
    control = await env.open()
    task = await env.new(title="Moved on")
    apply_decision = control.store.apply_decision

    async def pipeline_steps_first(write):
        fresh = await control.store.get_task(write.task_id)
        if fresh.state is TaskState.RECEIVED:
            await control.transition(fresh, TaskState.SPEC, actor=T25, reason="picked up")
        return await apply_decision(write)

    control.store.apply_decision = pipeline_steps_first  # type: ignore[method-assign]
    try:
        edited = await control.edit(task.id, {"title": "A better title"}, actor="ana")
    finally:
        control.store.apply_decision = apply_decision  # type: ignore[method-assign]
    assert edited.state is TaskState.SPEC and edited.title == "A better title"
    assert [line.decision for line in control.audit.entries()] == ["edit", "void", "edit"]
