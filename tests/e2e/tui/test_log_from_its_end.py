"""Pilot tests: the log pane opens a long run at its end, and reads older output as the
operator scrolls up, until the run's start, line for line."""

from __future__ import annotations

import asyncio

import pytest

from core.domain.events import RunOutput
from core.domain.models import RunStatus
from t25_tui.tui.screens.detail import TaskDetailScreen
from t25_tui.tui.widgets.logpane import LogPane
from tests.support.cockpit import app_for, settle_board, until
from tests.support.screen_text import screen_text

LINES = 3000  # of 100 characters: 300 KB, several windows of the pane's 64 KB


def _line(n: int) -> str:
    return f"line {n:05d} " + "x" * 89


def last_line(pane: LogPane) -> str:
    lines = [line for line in pane.output.lines if line]
    return lines[-1] if lines else ""


def status(pane: LogPane) -> str:
    return str(pane.query_one(".log-status").render())


async def t3_log(app, pilot) -> LogPane:
    """T-3's log, opened from the board with `w`, once its run is read."""
    await settle_board(app, pilot)
    assert app.board.focus_task("T-3")
    await pilot.press("w")
    await until(
        pilot,
        lambda: isinstance(app.screen, TaskDetailScreen) and app.screen.query_one(LogPane).replayed,
    )
    return app.screen.query_one(LogPane)


async def test_a_long_run_opens_at_its_end_and_scrolling_up_reads_the_rest(seeded):
    f = seeded.control
    running = [r for r in await f.store.list_runs(task_id="T-3") if r.status is RunStatus.RUNNING]
    run = running[-1]
    for start in range(0, LINES, 10):  # ten lines an event, the last cut mid-line
        text = "".join(_line(n) + "\n" for n in range(start, start + 10))
        await f.record(RunOutput(task_id="T-3", run_id=run.id, stream="stdout", text=text[:-40]))
        await f.record(RunOutput(task_id="T-3", run_id=run.id, stream="stdout", text=text[-40:]))
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        pane = await t3_log(app, pilot)
        await until(pilot, lambda: last_line(pane) == _line(LINES - 1))
        opened = len(pane.output.lines)
        assert opened < LINES / 3  # the run's end, not its history
        assert "older output above" in status(pane)

        for _ in range(LINES // 100):  # each scroll to the top reads a window more
            if "older output above" not in status(pane):
                break
            shown = len(pane.output.lines)
            pane.output.scroll_home(animate=False)
            await until(pilot, lambda shown=shown: len(pane.output.lines) > shown)
        ours = [line for line in pane.output.lines if line.startswith("line ")]
        assert ours == [_line(n) for n in range(LINES)]  # every line once, in order
        assert "older output" not in status(pane)

        await f.record(RunOutput(task_id="T-3", run_id=run.id, stream="stdout", text="live\n"))
        await until(pilot, lambda: last_line(pane) == "live")


@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
async def test_the_newest_line_is_on_screen_when_the_log_opens(seeded, size):
    """The pane's last line is drawn, not only held: the detail screen fits the terminal,
    so the line the operator opened the log for is not below the footer."""
    f = seeded.control
    running = [r for r in await f.store.list_runs(task_id="T-3") if r.status is RunStatus.RUNNING]
    text = "".join(_line(n) + "\n" for n in range(200)) + "the newest line\n"
    await f.record(RunOutput(task_id="T-3", run_id=running[-1].id, stream="stdout", text=text))
    app = app_for(seeded)
    async with app.run_test(size=size) as pilot:
        pane = await t3_log(app, pilot)
        await until(pilot, lambda: last_line(pane) == "the newest line")
        await pilot.pause()
        shown = screen_text(app).splitlines()
        assert len(shown) == size[1]
        assert "the newest line" in "\n".join(shown), "\n".join(shown[-6:])
        assert _line(199)[:40] in "\n".join(shown)  # and the lines before it, in order above
        assert "esc" in shown[-1]  # the footer still at the bottom


async def test_the_log_does_not_wait_for_the_rest_of_the_detail(seeded, monkeypatch):
    """The pane finds the task's newest run and reads its tail itself: the newest line is
    shown while the task's detail (head, history, runs, artifacts) is still being read."""
    f = seeded.control
    running = [r for r in await f.store.list_runs(task_id="T-3") if r.status is RunStatus.RUNNING]
    await f.record(
        RunOutput(task_id="T-3", run_id=running[-1].id, stream="stdout", text="the newest line\n")
    )
    read_detail, detail_read = f.detail, asyncio.Event()

    async def slow_detail(ref: str, **kw):
        await detail_read.wait()
        return await read_detail(ref, **kw)

    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        monkeypatch.setattr(f, "detail", slow_detail)
        assert app.board.focus_task("T-3")
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen))
        pane = app.screen.query_one(LogPane)
        await until(pilot, lambda: last_line(pane) == "the newest line")
        assert not app.screen.ready  # the detail is still being read
        assert pane.run_id == running[-1].id
        detail_read.set()
        await until(pilot, lambda: app.screen.ready)
        assert pane.run_id == running[-1].id and last_line(pane) == "the newest line"
