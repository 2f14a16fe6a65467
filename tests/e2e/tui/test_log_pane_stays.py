"""The log pane says how long ago its run last wrote, the figure moving on as time passes,
and a run the operator opened stays shown when a newer one starts."""

from __future__ import annotations

from datetime import timedelta

from core.domain.events import RunOutput
from core.domain.models import NewRun, RunStatus, TaskState
from t25_tui.tui.screens.detail import TaskDetailScreen
from t25_tui.tui.widgets.logpane import LogPane
from tests.support.cockpit import app_for, settle_board, until


def _status(pane: LogPane) -> str:
    return str(pane.query_one(".log-status").render())


async def test_the_log_says_how_long_ago_its_run_wrote_and_the_age_ticks(seeded):
    f = seeded.control
    running = [r for r in await f.store.list_runs(task_id="T-3") if r.status is RunStatus.RUNNING]
    await f.record(RunOutput(task_id="T-3", run_id=running[-1].id, stream="stdout", text="hi\n"))
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-3")
        await pilot.press("w")  # the log, from the board
        await until(
            pilot,
            lambda: (
                isinstance(app.screen, TaskDetailScreen) and app.screen.query_one(LogPane).replayed
            ),
        )
        pane = app.screen.query_one(LogPane)
        await until(pilot, lambda: "last output 0 s ago" in _status(pane))
        seeded.now += timedelta(seconds=12)
        await until(pilot, lambda: "last output 12 s ago" in _status(pane))


async def test_a_run_opened_from_runs_stays_when_a_newer_run_starts(seeded):
    f = seeded.control
    runs = await f.store.list_runs(task_id="T-3")
    assert len(runs) >= 2
    opened = runs[0].id
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-3")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen) and app.screen.ready)
        detail = app.screen
        detail.action_tab("runs")
        table = detail.query_one("#runs-table")
        await until(pilot, lambda: table.row_count >= 2)
        table.focus()
        table.move_cursor(row=table.get_row_index(opened))
        await pilot.press("enter")
        pane = detail.query_one(LogPane)
        await until(pilot, lambda: pane.run_id == opened and pane.replayed)
        newer, _ = await f.store.enqueue_run(
            NewRun(task_id="T-3", stage=TaskState.DOCS, role="docs")
        )
        detail.reload()
        await until(pilot, lambda: newer.id in _status(pane))
        assert pane.run_id == opened


async def test_the_detail_age_ticks_while_nothing_happens(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-3")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen) and app.screen.ready)
        head = app.screen.query_one("#detail-head")
        assert " for 3d " not in str(head.render())
        seeded.now += timedelta(days=3)
        await until(pilot, lambda: " for 3d " in str(head.render()))
