"""`t25 note`: a word for a task's next agent runs, audited, that leaves the task where it is;
refused once the task is finished, when no agent of it runs again to read it."""

from __future__ import annotations

import pytest

from core.domain.decisions import Decision
from core.domain.models import ArtifactKind, TaskState
from core.domain.verbs import Verb
from core.errors import PolicyRefused

S = TaskState


async def test_a_note_leaves_the_task_where_it_is_and_reaches_its_next_agent_run(env):
    control = await env.open()
    task = await env.new(description="scripted: risk=high")  # waits for its plan's approval
    await env.work()
    waiting = await env.task(task.id)
    assert waiting.state is S.AWAITING_APPROVAL

    noted = await control.decide(
        Decision(verb=Verb.NOTE, task=task.id, actor="ana", text="the v2 client is on main")
    )
    assert noted.state is S.AWAITING_APPROVAL and noted.resume_state == waiting.resume_state
    await control.approve(task.id, actor="ana")
    await env.work()

    assert (await env.task(task.id)).state is S.DONE
    dev = [
        a
        for a in await control.store.list_artifacts(task_id=task.id)
        if a.meta.kind is ArtifactKind.PROMPT and a.meta.role == "dev"
    ]
    prompt = (await control.store.get_artifact(dev[0].id))[1].decode()
    assert "## Operator answers\n\n```text\nthe v2 client is on main\n```" in prompt
    lines = [(e.actor, e.decision, e.reason) for e in control.audit.entries()]
    assert lines[0] == ("ana", "note", "the v2 client is on main")
    with pytest.raises(PolicyRefused, match="no agent of it runs again"):
        await control.decide(Decision(verb=Verb.NOTE, task=task.id, actor="ana", text="late"))
    assert [e.decision for e in control.audit.entries()] == ["note", "approve"]
