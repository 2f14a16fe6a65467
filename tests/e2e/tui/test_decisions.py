"""Pilot tests: every decision from the keyboard calls the ControlPlane and lands in the audit."""

from __future__ import annotations

import pytest
from textual.widgets import Input, Select

from core.domain.models import TaskState
from t25_tui.tui.screens.dialogs import (
    AnswerDialog,
    ApprovalDialog,
    ConfirmDialog,
    MergeDialog,
    MessageDialog,
    RejectDialog,
    ResetDialog,
)
from t25_tui.tui.screens.inbox import Inbox
from t25_tui.tui.screens.new_task import NewTaskDialog
from tests.support.cockpit import app_for, landed, settle_board, until, until_async
from tests.support.sealed import passed_review, tip

SIZES = [(120, 36), (80, 24)]


def decisions(s, task):
    return [(e.decision, e.reason) for e in s.control.audit.entries(task=task)]


async def state_is(s, ref, state):
    return (await s.control.task(ref)).state is state


@pytest.mark.parametrize("size", SIZES)
async def test_approve_from_the_inbox(seeded, size):
    app = app_for(seeded)
    async with app.run_test(size=size) as pilot:
        await settle_board(app, pilot)
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, Inbox) and app.screen.selected())
        table = app.screen.query_one("DataTable")
        table.move_cursor(row=table.get_row_index("T-2"))
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ApprovalDialog))
        plan = str(app.screen.query_one("#plan").render())
        assert "HIGH" in plan and "app/session.py" in plan
        await pilot.press("a")
        await until_async(pilot, lambda: state_is(seeded, "T-2", TaskState.IMPLEMENTING))
    assert decisions(seeded, "T-2")[-1][0] == "approve"


async def test_reject_with_a_reason(seeded):
    """`r` asks for the reason in a dialog of its own: enter there only moves to its
    button, an empty reason is refused, and the Reject button sends it."""
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-2")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ApprovalDialog))
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, RejectDialog))
        await pilot.press("enter", "enter")  # an empty reason is not sent
        assert isinstance(app.screen, RejectDialog)
        assert app.screen.query_one("#refusal").display
        await pilot.press(*"split the key ring change", "enter")
        assert isinstance(app.screen, RejectDialog)  # enter moved to the button
        assert app.focused is not None and app.focused.id == "reject"
        await pilot.press("enter")
        await until_async(pilot, lambda: state_is(seeded, "T-2", TaskState.PLAN))
    assert decisions(seeded, "T-2")[-1] == ("reject", "split the key ring change")


async def test_answer_needs_input(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-4")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AnswerDialog))
        assert "customer's currency" in str(app.screen.query_one("#question").render())
        await pilot.press(*"EUR")
        await pilot.press("enter")
        await until_async(pilot, lambda: state_is(seeded, "T-4", TaskState.SPEC))
    assert decisions(seeded, "T-4")[-1] == ("answer", "EUR")


async def test_merge_is_refused_with_the_reason_then_allowed(seeded):
    f = seeded.control
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-1")
        await pilot.press("m")  # the question comes once its evidence is read
        await until(pilot, lambda: isinstance(app.screen, MergeDialog))
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, MessageDialog))
        body = str(app.screen.query_one("#message-body").render())
        assert "cannot be merged" in body
        await pilot.press("escape")
        task = await f.task("T-1")
        await passed_review(f, task, await tip(f, task))
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, MergeDialog))
        await pilot.press("y")
        await until_async(pilot, lambda: landed(f, "T-1"))
    assert decisions(seeded, "T-1")[-1][0] == "merge"


async def test_the_merge_dialog_lists_the_protected_paths_and_yes_names_them(seeded):
    """A merge touching protected paths asks once more, naming each; only that second yes
    merges, and the status line says what the merge does, then what landed."""
    f = seeded.control
    task = await f.task("T-1")
    task = await passed_review(f, task, await tip(f, task))
    await f.update(task, actor="t25", protected_paths=(".github/workflows/ci.yml", "package.json"))
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-1")
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, MergeDialog))
        question = str(app.screen.query_one(".dialog-title").render())
        assert "2 protected path(s)" in question
        assert ".github/workflows/ci.yml" in question and "package.json" in question
        await pilot.press("y")
        await until(
            pilot,
            lambda: type(app.screen) is ConfirmDialog and "Merge these" in app.screen.question,
        )
        second = app.screen.question
        assert ".github/workflows/ci.yml" in second and "package.json" in second
        assert not (await f.task("T-1")).merged  # the first yes merged nothing
        await pilot.press("y")
        await until_async(pilot, lambda: landed(f, "T-1"))
        await until(pilot, lambda: app.status_note.startswith("merged T-1 into "))
        assert " as " in app.status_note
    assert decisions(seeded, "T-1")[-1] == (
        "merge",
        "protected paths: .github/workflows/ci.yml, package.json",
    )


async def test_no_to_the_protected_paths_merges_nothing(seeded):
    f = seeded.control
    task = await f.task("T-1")
    task = await passed_review(f, task, await tip(f, task))
    await f.update(task, actor="t25", protected_paths=("package.json",))
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-1")
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, MergeDialog))
        await pilot.press("y")
        await until(pilot, lambda: type(app.screen) is ConfirmDialog)
        await pilot.press("n")
        await until(pilot, lambda: app.screen is app.screen_stack[0])
        await pilot.pause()
    assert not (await f.task("T-1")).merged
    assert "merge" not in [d for d, _ in decisions(seeded, "T-1")]


async def test_new_cancel_retry_archive_from_the_keyboard(seeded):
    f = seeded.control
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        await pilot.press("n")
        await pilot.pause()
        await pilot.press(*"Log slow queries", "enter")
        await until_async(pilot, lambda: _titled(f, "Log slow queries"))
        assert app.board.focus_task("T-7")
        await pilot.press("x", *"not now", "enter", "enter")
        await until_async(pilot, lambda: state_is(seeded, "T-7", TaskState.CANCELLED))
        await until(pilot, lambda: app.board.focus_task("T-5"))
        await pilot.press("r", "enter", "enter")
        await until_async(pilot, lambda: state_is(seeded, "T-5", TaskState.IMPLEMENTING))
        await until(pilot, lambda: app.board.focus_task("T-6"))
        await pilot.press("z", "enter", "enter")
        await until_async(pilot, lambda: _archived(f, "T-6"))
    assert [d for d, _ in decisions(seeded, None)][-3:] == ["cancel", "retry", "archive"]


async def _titled(f, title):
    return any(t.title == title for t in await f.store.list_tasks())


async def _archived(f, ref):
    return (await f.task(ref)).archived


async def test_reset_offers_the_stages_passed_and_hands_the_chosen_one_to_the_control_plane(
    seeded,
):
    """T-8 stands at IMPLEMENTING (QA sent it back): the dialog offers SPEC, PLAN and
    IMPLEMENTING, nothing ahead. Its seeded runs say nowhere where a stage began, so the
    control plane refuses, naming the stage chosen, and nothing changes."""
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-8")
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, ResetDialog))
        offered = app.screen.query_one("#stage", Select)
        assert [str(stage) for stage in app.screen.stages] == ["SPEC", "PLAN", "IMPLEMENTING"]
        assert offered.value is TaskState.IMPLEMENTING  # the nearest, first
        offered.value = TaskState.PLAN
        await pilot.press("tab", *"the plan missed the cache key", "enter", "enter")
        await until(pilot, lambda: isinstance(app.screen, MessageDialog))
        said = app.screen.body
        assert "T-8 has no run of PLAN that says where it began" in said
        await pilot.press("escape")
        assert app.board.focus_task("T-6")  # CANCELLED: nothing to reset to
        await pilot.press("o")
        await pilot.pause()
        assert not isinstance(app.screen, ResetDialog)
    assert (await seeded.control.task("T-8")).state is TaskState.IMPLEMENTING
    assert "reset" not in [d for d, _ in decisions(seeded, "T-8")]


async def test_edit_changes_what_was_changed_and_a_refusal_keeps_what_was_typed(seeded):
    """T-9 has not started: its title and priority change, as one audited edit. T-8 is
    implementing: a new title is refused with the reason, and the dialog comes back with
    what was typed."""
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-9")
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, NewTaskDialog))
        assert app.screen.query_one("#project", Select).disabled
        title = app.screen.query_one("#title", Input)
        assert title.value == "Fix the flaky checkout test"
        title.value = "Fix the flaky checkout test for good"
        app.screen.query_one("#priority", Input).value = "7"
        await pilot.press("ctrl+s")
        await until_async(pilot, lambda: _priority_is(seeded, "T-9", 7))
        task = await seeded.control.task("T-9")
        assert task.title == "Fix the flaky checkout test for good"
        decision, said = decisions(seeded, "T-9")[-1]
        assert decision == "edit" and "priority: 0 → 7" in said and "title: " in said

        assert app.board.focus_task("T-8")
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, NewTaskDialog))
        app.screen.query_one("#title", Input).value = "Cache every listing"
        await pilot.press("ctrl+s")
        await until(
            pilot,
            lambda: isinstance(app.screen, NewTaskDialog) and app.screen.refusal != "",
        )
        assert "has started implementing" in app.screen.refusal
        assert app.screen.query_one("#title", Input).value == "Cache every listing"
    assert (await seeded.control.task("T-8")).title == "Cache product listings"


async def _priority_is(s, ref, priority):
    return (await s.control.task(ref)).priority == priority
