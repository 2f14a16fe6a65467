"""The dialogs from the keyboard: tab and shift+tab reach every field and button, the
New task dialog sets every field of a task, and text the core refuses is refused in the
dialog with nothing typed lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual import events
from textual.widgets import Button, Input, Select, TextArea

from core.config.schema import load_config
from core.control.service import ControlPlane
from core.domain.models import TaskState, TaskType
from store import open_store
from t25_tui.api.cockpit_client import attach
from t25_tui.api.server import make_api
from t25_tui.tui.app import make_app
from t25_tui.tui.sample_data import CONFIG, make_sample_repo
from t25_tui.tui.screens.dialogs import AnswerDialog, ApprovalDialog, ConfirmDialog, RejectDialog
from t25_tui.tui.screens.new_task import NewTaskDialog
from tests.support.cockpit import app_for, settle_board, until, until_async
from tests.support.serving import serving
from tests.support.waiting import free_port

TOKEN = "operator-secret-15"


@pytest.fixture
async def two_projects(tmp_path: Path):
    """A factory whose configuration names two projects, each a real repository."""
    shop, billing = tmp_path / "shop", tmp_path / "billing"
    for repo in (shop, billing):
        repo.mkdir()
        make_sample_repo(repo)
        (repo / ".git" / "info" / "exclude").write_text("/.factory/\n/t25.yaml\n")
    (shop / ".factory").mkdir()
    (shop / "t25.yaml").write_text(
        CONFIG.replace("    repo: .\n", f"    repo: .\n  - name: billing\n    repo: {billing}\n", 1)
    )
    config = load_config(shop / "t25.yaml")
    control = ControlPlane(config, await open_store(config.store_url))
    await control.sync_projects()
    yield control
    await control.store.close()


def focused(app) -> str | None:
    return app.focused.id if app.focused else None


async def only_task(control: ControlPlane):
    tasks = await control.store.list_tasks()
    return tasks[0] if len(tasks) == 1 else None


async def fill_new_task(pilot) -> None:
    """Every field of the New task dialog, reached with tab only."""
    app = pilot.app
    assert focused(app) == "title"
    await pilot.press(*"Refund a cancelled order")
    await pilot.press("tab")
    assert focused(app) == "type"
    await pilot.press("enter", "down", "enter")  # the list of types: feat, then fix
    await until(pilot, lambda: app.screen.query_one("#type", Select).value is TaskType.FIX)
    await pilot.press("tab")
    assert focused(app) == "description"
    await pilot.press(*"Money goes back", "enter", *"to the card it came from.")
    await pilot.press("tab")
    assert focused(app) == "project"
    await pilot.press("enter", "down", "enter")  # shop, then billing
    await until(pilot, lambda: app.screen.query_one("#project", Select).value == "billing")
    await pilot.press("tab")
    assert focused(app) == "priority"
    await pilot.press("backspace", *"3")
    await pilot.press("tab")
    assert focused(app) == "after"  # left empty: it waits for nothing


async def test_tab_reaches_every_field_and_files_a_task_with_all_of_them(two_projects):
    app = make_app(two_projects, actor="ana@ops")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, NewTaskDialog))
        await fill_new_task(pilot)
        await pilot.press("tab")
        assert focused(app) == "file"
        await pilot.press(*["shift+tab"] * 6)
        assert focused(app) == "title"  # and back, field by field
        await pilot.press(*["tab"] * 6, "enter")  # the File task button
        await until_async(pilot, lambda: only_task(two_projects))
    task = await only_task(two_projects)
    assert (task.title, task.type, task.description, task.project, task.priority) == (
        "Refund a cancelled order",
        TaskType.FIX,
        "Money goes back\nto the card it came from.",
        "billing",
        3,
    )


async def test_ctrl_s_files_the_task_from_inside_the_description(two_projects):
    app = make_app(two_projects, actor="ana@ops")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, NewTaskDialog))
        await fill_new_task(pilot)
        await pilot.press("shift+tab", "shift+tab", "shift+tab")
        assert focused(app) == "description"
        await pilot.press("enter", *"Keep the receipt.", "ctrl+s")
        await until_async(pilot, lambda: only_task(two_projects))
    task = await only_task(two_projects)
    assert task.description == "Money goes back\nto the card it came from.\nKeep the receipt."
    assert (task.type, task.project) == (TaskType.FIX, "billing")


async def test_text_the_core_refuses_is_refused_in_the_dialog_with_nothing_lost(seeded):
    f = seeded.control
    before = len(await f.store.list_tasks())
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, NewTaskDialog))
        dialog = app.screen
        # A pasted title that carries a terminal escape sequence.
        dialog.query_one("#title", Input).post_message(events.Paste("Fix \x1b[2Jthe footer"))
        await pilot.press("tab", "tab")
        await pilot.press(*"Two lines", "enter", *"of description")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: dialog.query_one("#refusal").display)
        refusal = str(dialog.query_one("#refusal").render())
        assert "title holds a control character (U+001B at position 5)" in refusal
        assert "\x1b" not in refusal
        assert isinstance(app.screen, NewTaskDialog) and focused(app) == "title"
        assert dialog.query_one("#title", Input).value == "Fix \x1b[2Jthe footer"
        assert dialog.query_one("#description", TextArea).text == "Two lines\nof description"

        title = dialog.query_one("#title", Input)
        title.value = "x" * 201
        await pilot.press("ctrl+s")
        await until(pilot, lambda: "201 characters" in str(dialog.query_one("#refusal").render()))
        title.value = "Fix the footer"
        dialog.query_one("#description", TextArea).post_message(events.Paste("\u202eevil"))
        await pilot.press("ctrl+s")
        await until(
            pilot,
            lambda: (
                "description holds a control character (U+202E"
                in str(dialog.query_one("#refusal").render())
            ),
        )
        assert focused(app) == "description"
        assert len(await f.store.list_tasks()) == before  # nothing was filed

        dialog.query_one("#description", TextArea).text = "Two lines\nof description"
        await pilot.press("ctrl+s")
        await until_async(pilot, lambda: _titled(f, "Fix the footer"))


async def test_a_draft_the_control_plane_could_not_take_comes_back_whole(seeded):
    """Attached, the serve goes away while a task is being filed: the dialog comes back
    with the reason and everything typed; once the serve is back, ctrl+s files it."""
    local, port = seeded.control, free_port()
    first = serving(make_api(local, worker_credential=None, operator_token=TOKEN), port)
    url = await first.__aenter__()
    async with attach(url, TOKEN) as remote:
        app = make_app(remote, clock=seeded.clock, actor="ana@remote", link=remote.link)
        async with app.run_test(size=(120, 36)) as pilot:
            await settle_board(app, pilot)
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, NewTaskDialog))
            await pilot.press(
                *"Send invoices by mail", "tab", "enter", "down", "enter", "tab", *"Every Monday."
            )
            await first.__aexit__(None, None, None)
            await pilot.press("ctrl+s")
            await until(
                pilot,
                lambda: (
                    isinstance(app.screen, NewTaskDialog)
                    and app.screen.query_one("#refusal").display
                ),
            )
            dialog = app.screen
            assert "is `t25 serve` running there" in str(dialog.query_one("#refusal").render())
            assert dialog.query_one("#title", Input).value == "Send invoices by mail"
            assert dialog.query_one("#type", Select).value is TaskType.FIX
            assert dialog.query_one("#description", TextArea).text == "Every Monday."
            async with serving(make_api(local, worker_credential=None, operator_token=TOKEN), port):
                await pilot.press("ctrl+s")
                await until_async(
                    pilot, lambda: _titled(local, "Send invoices by mail"), within_s=30
                )
    made = next(t for t in await local.store.list_tasks() if t.title == "Send invoices by mail")
    assert (made.type, made.description) == (TaskType.FIX, "Every Monday.")


async def test_the_approval_dialog_reaches_its_comment_and_buttons_by_tab(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-2")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ApprovalDialog))
        order = []
        for _ in range(4):
            await pilot.press("tab")
            order.append(focused(app))
        assert order[:3] == ["comment", "approve", "reject"]
        await pilot.press("shift+tab", "shift+tab", "shift+tab")
        assert focused(app) == "comment"
        await pilot.press(*"split the key ring change", "tab", "tab")
        assert focused(app) == "reject"
        await pilot.press("enter")  # Reject… asks why, starting from the comment typed
        await until(pilot, lambda: isinstance(app.screen, RejectDialog))
        assert app.screen.query_one("#reason", Input).value == "split the key ring change"
        await pilot.press("tab", "enter")
        await until_async(pilot, lambda: _state_is(seeded, "T-2", TaskState.PLAN))
    last = seeded.control.audit.entries(task="T-2")[-1]
    assert (last.decision, last.reason) == ("reject", "split the key ring change")


async def test_enter_in_the_approval_comment_decides_nothing(seeded):
    """The comment an approver types, ended with enter, neither rejects nor approves: enter
    moves to Approve, and only pressing it approves, with the comment."""
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-2")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ApprovalDialog))
        before = len(seeded.control.audit.entries(task="T-2"))
        await pilot.press("tab", *"checked with the payments team", "enter")
        await pilot.pause()
        assert isinstance(app.screen, ApprovalDialog)
        assert focused(app) == "approve"
        assert (await seeded.control.task("T-2")).state is TaskState.AWAITING_APPROVAL
        assert len(seeded.control.audit.entries(task="T-2")) == before  # nothing decided
        await pilot.press("enter")
        await until_async(pilot, lambda: _state_is(seeded, "T-2", TaskState.IMPLEMENTING))
    last = seeded.control.audit.entries(task="T-2")[-1]
    assert last.decision == "approve" and "checked with the payments team" in last.reason


async def test_the_approval_dialog_shows_the_task_and_why_the_risk(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-2")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ApprovalDialog))
        task = await seeded.control.task("T-2")
        shown = str(app.screen.query_one("#task").render())
        assert (task.description or "(no description filed)").splitlines()[0][:30] in shown
        assert "why this plan, and this risk" in str(app.screen.query_one("#plan").render())


async def test_approving_by_the_button_keeps_the_comment(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-2")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ApprovalDialog))
        await pilot.press("tab", *"rotate on Tuesday", "tab", "enter")
        await until_async(pilot, lambda: _state_is(seeded, "T-2", TaskState.IMPLEMENTING))
    last = seeded.control.audit.entries(task="T-2")[-1]
    assert last.decision == "approve" and "rotate on Tuesday" in last.reason


async def test_the_answer_and_confirm_dialogs_reach_their_buttons_by_tab(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-4")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AnswerDialog))
        assert focused(app) == "answer"
        await pilot.press(*"EUR", "tab")
        assert focused(app) == "send"
        await pilot.press("shift+tab")
        assert focused(app) == "answer"
        await pilot.press("tab", "enter")
        await until_async(pilot, lambda: _state_is(seeded, "T-4", TaskState.SPEC))

        await until(pilot, lambda: app.board.focus_task("T-7"))
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        assert focused(app) == "reason"
        await pilot.press(*"not this quarter", "tab")
        assert focused(app) == "yes"
        await pilot.press("tab")
        assert isinstance(app.focused, Button) and focused(app) == "no"
        await pilot.press("shift+tab", "enter")
        await until_async(pilot, lambda: _state_is(seeded, "T-7", TaskState.CANCELLED))
    entries = seeded.control.audit.entries()
    assert [(e.task, e.decision, e.reason) for e in entries[-2:]] == [
        ("T-4", "answer", "EUR"),
        ("T-7", "cancel", "not this quarter"),
    ]


async def _titled(f, title):
    return any(t.title == title for t in await f.store.list_tasks())


async def _state_is(s, ref, state):
    return (await s.control.task(ref)).state is state
