"""Tasks an operator steers: edited before they implement, ordered by priority, started only
once the tasks they wait for are merged. Real repositories, the scripted agent, in-process
workers, the real `t25` command line and REST."""

from __future__ import annotations

import pytest

from core.domain.models import TaskState
from core.errors import InvalidInput, NotFound, PolicyRefused
from t25_tui.api.credentials import local_token
from tests.support.operators import operator_headers

S = TaskState


async def test_a_task_waits_for_the_tasks_it_names_to_be_merged(env):
    control = await env.open()
    first = await env.new("First")
    later = await control.new_task("Later", actor="ana", after=["1"], priority=3)
    assert later.after == (first.id,) and later.priority == 3
    with pytest.raises(NotFound):
        await control.new_task("Orphan", actor="ana", after=["T-99"])
    await env.work()
    assert (await env.task(first.id)).state is S.DONE
    assert (await env.task(later.id)).state is S.RECEIVED  # DONE is not merged
    assert await control.blockers(await env.task(later.id)) == (first.id,)
    await control.merge(first.id, actor="ana")
    await env.work()
    assert (await env.task(later.id)).state is S.DONE


async def test_an_edit_changes_what_may_still_change_and_is_audited(env):
    control = await env.open()
    task = await env.new("Add a greting")
    edited = await control.edit(
        task.id, {"title": "Add a greeting", "type": "fix", "priority": 2}, actor="ana"
    )
    assert (edited.title, edited.type.value, edited.priority) == ("Add a greeting", "fix", 2)
    line = control.audit.entries()[-1]
    assert line.decision == "edit"
    assert (
        line.reason
        == "title: 'Add a greting' → 'Add a greeting'; type: 'feat' → 'fix'; priority: 0 → 2"
    )
    with pytest.raises(InvalidInput, match="not colour"):
        await control.edit(task.id, {"colour": "red"}, actor="ana")
    with pytest.raises(InvalidInput, match="a priority is from -100 to 100"):
        await control.edit(task.id, {"priority": 101}, actor="ana")
    await env.work()
    with pytest.raises(PolicyRefused, match="finished task is not edited"):
        await control.edit(task.id, {"priority": 1}, actor="ana")


async def test_after_implementing_only_the_priority_changes(env):
    control = await env.open(limits={"max_diff_lines": 1})
    task = await env.new(description="scripted: review=changes-once")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.FAILED and task.resume_state is S.IMPLEMENTING
    with pytest.raises(PolicyRefused, match="has started implementing"):
        await control.edit(task.id, {"description": "smaller"}, actor="ana")
    with pytest.raises(PolicyRefused, match="its branch feat/T-1 exists"):
        await control.edit(task.id, {"type": "fix"}, actor="ana")
    assert (await control.edit(task.id, {"priority": -5}, actor="ana")).priority == -5


async def test_the_command_line_files_edits_and_lists_steered_tasks(env, t25):
    await env.open()
    await env.close()
    filed = t25("task", "new", "First", cwd=env.repo)
    assert filed.code == 0, filed.err
    later = t25("task", "new", "Later", "--after", "T-1", "--priority", "4", cwd=env.repo)
    assert later.code == 0 and "starts once T-1 is merged" in later.out
    edited = t25("task", "edit", "T-2", "--title", "Later, better", cwd=env.repo)
    assert edited.code == 0 and edited.out.startswith("T-2  RECEIVED  priority 4  Later, better")
    listed = t25("task", "list", cwd=env.repo).out
    assert "Later, better [priority 4] (after T-1)" in listed
    none = t25("task", "edit", "T-2", cwd=env.repo)
    assert none.code != 0 and "name at least one" in none.err


async def test_filing_and_editing_over_rest_and_the_remote_cockpit(env):
    import httpx

    from core.domain.decisions import Decision
    from core.domain.verbs import Verb
    from t25_tui.api.cockpit_client import attach
    from t25_tui.api.server import make_api
    from tests.support.serving import CREDENTIAL, serving

    control = await env.open()
    app = make_api(control, worker_credential=CREDENTIAL, operator_token=None)
    async with (
        serving(app) as url,
        httpx.AsyncClient(
            base_url=url, timeout=30, headers=operator_headers(control.config.root)
        ) as client,
    ):
        first = await client.post("/tasks", json={"title": "First", "priority": 7})
        assert first.status_code == 201 and first.json()["priority"] == 7
        bad = await client.post("/tasks", json={"title": "x", "priority": 500})
        assert bad.status_code == 422
        edited = await client.post("/tasks/T-1/edit", json={"actor": "ana", "priority": 1})
        assert edited.status_code == 200 and edited.json()["priority"] == 1
        empty = await client.post("/tasks/T-1/edit", json={"actor": "ana"})
        assert empty.status_code == 422 and "name at least one" in empty.text
        async with attach(url, local_token(control.config.root)) as remote:
            later = await remote.new_task("Later", actor="bo", after=["T-1"])
            assert later.after == ("T-1",)
            decision = Decision(
                verb=Verb.EDIT, task=later.id, actor="bo", changes={"description": "more"}
            )
            assert (await remote.decide(decision)).description == "more"
