"""Stored text reaches the screen escaped and literal, wherever the cockpit shows it.

The hostile task is filed through the store directly, as data stored before T25 checked
text at the door would be: terminal escape sequences in its title, description, history,
plan, question, artifact and agent output, and Rich markup that must show as typed.
"""

from __future__ import annotations

import json

import pytest

from core.domain.events import ApprovalRequested, InputRequested
from core.domain.models import ArtifactKind, NewTask, RunStatus, TaskState, TaskType
from core.domain.text import printable
from t25_tui.tui.sample_data import artifact, run_stage, walk
from t25_tui.tui.screens.detail import TaskDetailScreen
from t25_tui.tui.screens.dialogs import AnswerDialog, ApprovalDialog
from t25_tui.tui.screens.inbox import Inbox
from t25_tui.tui.screens.panes import AuditPane, CostPane
from t25_tui.tui.widgets.logpane import LogPane
from tests.support.cockpit import app_for, settle_board, until
from tests.support.screen_text import screen_text

TITLE = "\x1b]0;pwned\x07[red]x[/]\x1b[2J rename the footer"
SHOWN = "\\x1b]0;pwned\\x07[red]x[/]\\x1b[2J rename the footer"  # printable(TITLE)
HOSTILE = "say \x1b[31m[bold]red[/bold]\x1b[0m \x1b]0;pwned\x07 \x9b2J"
RAW = ("\x1b", "\x07", "\x9b")


def clean(text: str) -> bool:
    return not any(c in text for c in RAW)


@pytest.fixture
async def hostile(seeded):
    """T-11 waits for approval of a hostile plan; T-12 asks a hostile question."""
    f = seeded.control
    task, _ = await f.store.create_task(
        NewTask(project="shop", title=TITLE, type=TaskType.FIX, description=HOSTILE),
        actor="old-data",
    )
    task = await walk(f, task, TaskState.PLAN)
    await run_stage(f, task, output=f"planner: {HOSTILE}\n")
    await artifact(
        f,
        task,
        ArtifactKind.PLAN,
        json.dumps(
            {
                "steps": [f"step {HOSTILE}"],
                "files": [f"app/{HOSTILE}.py"],
                "risk": "low",
                "rationale": HOSTILE,
            }
        ),
        "application/json",
    )
    await artifact(
        f,
        task,
        ArtifactKind.DIFF,
        f"--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-removed\n+added {HOSTILE}\n",
        "text/x-diff",
    )
    await f.transition(
        task, TaskState.AWAITING_APPROVAL, actor=f"t25 {HOSTILE}", reason=f"because {HOSTILE}"
    )
    await f.record(
        ApprovalRequested(task_id=task.id, plan_sha256="0" * 64, risk="low", files=[HOSTILE])
    )
    asking, _ = await f.store.create_task(NewTask(project="shop", title=TITLE), actor="old-data")
    asking = await walk(f, asking, TaskState.SPEC)
    await run_stage(f, asking, status=RunStatus.FAILED)
    await f.transition(
        asking, TaskState.NEEDS_INPUT, actor="t25", reason=HOSTILE, error=f"spec failed: {HOSTILE}"
    )
    await f.record(
        InputRequested(task_id=asking.id, stage=TaskState.SPEC, question=f"which one? {HOSTILE}")
    )
    return seeded, task.id, asking.id


async def test_board_detail_inbox_and_dialogs_show_stored_text_escaped_and_literal(hostile):
    seeded, tid, asking = hostile
    app = app_for(seeded)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle_board(app, pilot)
        card = dict(app.board.column(TaskState.AWAITING_APPROVAL).shown)[tid]
        assert SHOWN in card.plain and clean(card.plain)
        board = screen_text(app)
        assert "\\x1b]0;pwned\\x07[red]x[/]" in board and clean(board)

        assert app.board.focus_task(tid)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen) and app.screen.ready)
        head = str(app.screen.query_one("#detail-head").render())
        assert SHOWN in head and clean(head)
        # Ready is the screen's data; the history is painted on a later frame.
        await until(pilot, lambda: f"because {printable(HOSTILE)}" in screen_text(app))
        detail = screen_text(app)
        assert f"because {printable(HOSTILE)}" in detail and f"t25 {printable(HOSTILE)}" in detail
        assert "[bold]red[/bold]" in detail and clean(detail)
        await pilot.press("2")  # the newest artifact, a diff as an agent wrote it
        await until(pilot, lambda: "+added" in screen_text(app))
        artifacts = screen_text(app)
        assert f"+added {printable(HOSTILE)}" in artifacts and clean(artifacts)
        await pilot.press("4")  # the agent's log
        pane = app.screen.query_one(LogPane)
        await until(pilot, lambda: any("planner:" in line for line in pane.output.lines))
        line = next(line for line in pane.output.lines if "planner:" in line)
        assert line == f"planner: {printable(HOSTILE)}" and clean(line)

        await pilot.press("escape", "i")
        await until(pilot, lambda: isinstance(app.screen, Inbox) and app.screen.selected())
        await until(pilot, lambda: SHOWN in screen_text(app))
        inbox = screen_text(app)
        assert SHOWN in inbox and clean(inbox)

        table = app.screen.query_one("DataTable")
        table.move_cursor(row=table.get_row_index(tid))
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ApprovalDialog))
        await until(pilot, lambda: f"Approve the plan of {tid}" in screen_text(app))
        dialog = screen_text(app)
        assert f"Approve the plan of {tid}: {SHOWN}" in dialog
        assert f"step {printable(HOSTILE)}" in dialog and clean(dialog)

        await pilot.press("escape")
        table.move_cursor(row=table.get_row_index(asking))
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AnswerDialog))
        await until(pilot, lambda: "which one?" in screen_text(app))
        answer = screen_text(app)
        assert f"which one? {printable(HOSTILE)}" in answer and SHOWN in answer
        assert clean(answer)


async def test_notifications_show_stored_text_escaped_and_literal(seeded):
    f = seeded.control
    app = app_for(seeded)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await settle_board(app, pilot)
        await f.record(
            InputRequested(task_id="T-7", stage=TaskState.SPEC, question=f"which? {HOSTILE}")
        )
        # On the board the status line says it: a toast would cover the cards.
        await until(pilot, lambda: "which?" in app.status_note)
        assert app.status_note == f"⚑ T-7 asks: which? {printable(HOSTILE)}"
        assert not app._notifications
        await until(pilot, lambda: "T-7 asks: which?" in screen_text(app))
        shown = screen_text(app)
        assert clean(shown)
        await pilot.press("i")  # off the board, a toast says the next one
        await until(pilot, lambda: app.screen is not app.screen_stack[0])
        await f.record(
            InputRequested(task_id="T-8", stage=TaskState.SPEC, question=f"what? {HOSTILE}")
        )
        await until(pilot, lambda: any("what?" in n.message for n in app._notifications))
        note = next(n for n in app._notifications if "what?" in n.message)
        assert note.message == f"T-8 asks: what? {printable(HOSTILE)}"
        assert note.markup is False
        await until(pilot, lambda: "[bold]red[/bold]" in screen_text(app))  # the toast, drawn
        assert clean(screen_text(app))


async def test_cost_and_audit_panes_show_stored_text_escaped_and_literal(seeded):
    f = seeded.control
    model = "scripted-1\x1b[2J[red]x[/red]"  # as an agent CLI reported it
    await run_stage(f, await f.task("T-7"), model=model)
    await f.audit.append(
        actor="[red]ana[/red]", task="T-7", decision="cancel", reason="keep [b]both[/b] keys"
    )
    app = app_for(seeded)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle_board(app, pilot)
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, CostPane) and app.screen.ready)
        await until(pilot, lambda: "scripted-1\\x1b[2J" in screen_text(app))
        cost = screen_text(app)
        assert "scripted-1\\x1b[2J[red]x[/red]" in cost and clean(cost)
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, AuditPane) and app.screen.ready)
        await until(pilot, lambda: "[red]ana[/red]" in screen_text(app))
        audit = screen_text(app)
        assert "[red]ana[/red]" in audit and "keep [b]both[/b] keys" in audit
