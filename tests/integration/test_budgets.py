"""Budgets: a task that has spent its `limits.max_cost_usd` or `limits.max_tokens` waits for a
human before its next run, with the spend so far, and an answer naming a new budget lets it
go on. Real repositories, the scripted agent (which reports usage), in-process workers."""

from __future__ import annotations

import pytest

from core.domain.cost import raised_budget
from core.domain.events import InputRequested
from core.domain.models import RunStatus, TaskState
from core.errors import PolicyRefused

S = TaskState


async def test_a_spent_token_budget_waits_before_the_next_run_and_an_answer_raises_it(env):
    control = await env.open(limits={"max_tokens": 1})
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.NEEDS_INPUT and task.resume_state is S.PLAN
    runs = await control.store.list_runs(task_id=task.id)
    assert [(r.stage, r.status) for r in runs] == [(S.SPEC, RunStatus.SUCCEEDED)]  # not killed
    detail = await control.detail(task.id)
    assert detail.spend.reached and detail.spend.budget_tokens == 1
    asked = [
        e
        for e in await control.store.events_after(0, task_id=task.id, limit=1000)
        if isinstance(e, InputRequested)
    ]
    assert asked[-1].stage is S.PLAN
    assert f"{task.id} has spent $" in asked[-1].question
    assert "budget is reached before PLAN (planner)" in asked[-1].question

    with pytest.raises(PolicyRefused, match="must name a budget above that"):
        await control.answer(task.id, "go on", actor="ana")
    with pytest.raises(PolicyRefused, match="must name a budget above that"):
        await control.answer(task.id, "budget 1 tokens", actor="ana")  # not above the spend
    answered = await control.answer(task.id, "fine, budget 10M tokens", actor="ana")
    assert answered.state is S.PLAN and answered.budget_tokens == 10_000_000
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE
    assert (await control.detail(task.id)).spend.line().endswith("of 10,000,000 tokens")


async def test_a_spent_dollar_budget_is_raised_in_dollars(env):
    control = await env.open(limits={"max_cost_usd": 0.000001})
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.NEEDS_INPUT and task.resume_state is S.PLAN
    answered = await control.answer(task.id, "budget $5", actor="ana")
    assert answered.budget_usd == 5.0 and answered.budget_tokens is None
    await env.work()
    assert (await env.task(task.id)).state is S.DONE


async def test_a_roles_budget_waits_before_that_roles_next_run_and_is_raised_for_it(env):
    """`limits.by_role`: the reviewer's runs of a task may spend 1 token. The first review
    runs (nothing spent yet) and sends the change back; before the second, the task waits;
    the answer raises the reviewer's budget for this task, not the task's."""
    control = await env.open(limits={"by_role": {"reviewer": {"max_tokens": 1}}})
    task = await env.new(description="scripted: review=changes-once")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.NEEDS_INPUT and task.resume_state is S.REVIEW
    runs = await control.store.list_runs(task_id=task.id)
    roles = [r.role for r in runs]
    assert roles.count("reviewer") == 1 and roles.count("dev") == 2
    asked = [
        e
        for e in await control.store.events_after(0, task_id=task.id, limit=1000)
        if isinstance(e, InputRequested)
    ]
    assert f"{task.id} has spent reviewer: $" in asked[-1].question
    assert "its reviewer budget (limits.by_role) is reached before REVIEW" in asked[-1].question
    with pytest.raises(PolicyRefused, match="must name a budget above that"):
        await control.answer(task.id, "go on", actor="ana")
    answered = await control.answer(task.id, "budget 10M tokens", actor="ana")
    assert answered.state is S.REVIEW and answered.budget_tokens is None
    assert answered.role_budgets["reviewer"].tokens == 10_000_000
    await env.work()
    assert (await env.task(task.id)).state is S.DONE


def test_an_answer_names_a_budget_in_dollars_or_tokens():
    assert raised_budget("budget $12") == (12.0, None)
    assert raised_budget("ok: $7.50 and 250k tokens") == (7.5, 250_000)
    assert raised_budget("2,000,000 tokens") == (None, 2_000_000)
    assert raised_budget("3M tokens please") == (None, 3_000_000)
    assert raised_budget("go on") == (None, None)


async def test_a_model_with_no_rate_shows_as_not_priced_not_as_free(env):
    control = await env.open(cost={"rates": {}})
    task = await env.new()
    await env.work()
    spend = (await control.detail(task.id)).spend
    assert spend.usd == 0 and spend.tokens > 0
    assert spend.unpriced and "(not priced: " in spend.line()
