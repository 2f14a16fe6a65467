"""Pilot tests: the inbox follows the store while it is open — what this cockpit's workers
ask and what another process writes both appear in it without reopening."""

from __future__ import annotations

from core.control.moves import legal_move
from core.domain.events import ApprovalRequested
from core.domain.models import TaskState
from t25_tui.tui.screens.inbox import Inbox
from tests.support.cockpit import app_for, settle_board, until


def inbox_rows(app) -> set[str]:
    screen = app.screen
    assert isinstance(screen, Inbox)
    return screen.task_ids()


async def test_an_approval_requested_while_the_inbox_is_open_appears_in_it(seeded):
    f = seeded.control
    app = app_for(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, Inbox) and app.screen.ready)
        assert "T-7" not in inbox_rows(app)
        task = await f.transition(await f.task("T-7"), TaskState.PLAN, actor="t25")
        await f.transition(task, TaskState.AWAITING_APPROVAL, actor="t25", reason="plan ready")
        await f.record(ApprovalRequested(task_id="T-7", plan_sha256="0" * 64, risk="high"))
        await until(pilot, lambda: "T-7" in inbox_rows(app))


async def test_what_another_process_writes_appears_in_the_open_inbox(seeded):
    """A change made through the store alone (another shell's `t25`), never on this bus."""
    f = seeded.control
    app = app_for(seeded, poll_s=0.1)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, Inbox) and app.screen.ready)
        assert "T-4" in inbox_rows(app)
        task = await f.task("T-4")
        event, fields = legal_move(
            task,
            TaskState.CANCELLED,
            actor="elsewhere",
            reason="",
            fields={},
            keys=f.keys,
            at=seeded.clock(),
        )
        await f.store.apply_transition(task.id, task.state, event, fields)  # no bus
        await until(pilot, lambda: "T-4" not in inbox_rows(app))
