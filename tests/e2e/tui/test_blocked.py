"""Pilot tests: a task that waits for others (`after`) is marked on the board and in the
narrow list, and its detail names what it waits for; when that task is merged the mark
goes at once. The same on the cockpit's own store and attached to a real `t25 serve`.

In the seeded board T-9 waits for T-1, which is DONE but not merged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from textual.widgets.option_list import OptionDoesNotExist

from t25_tui.api.cockpit_client import attach
from t25_tui.api.server import make_api
from t25_tui.tui.app import T25App, make_app
from t25_tui.tui.sample_data import Seeded
from t25_tui.tui.screens.detail import TaskDetailScreen
from t25_tui.tui.widgets.board import Column
from tests.support.cockpit import app_for, settle_board, until
from tests.support.sealed import passed_review, tip
from tests.support.serving import serving

TOKEN = "operator-secret-9"


@asynccontextmanager
async def cockpit(seeded: Seeded, where: str) -> AsyncIterator[T25App]:
    """The cockpit on the seeded store itself, or attached to a serve of it over HTTP."""
    if where == "local":
        yield app_for(seeded)
        return
    api = make_api(seeded.control, worker_credential=None, operator_token=TOKEN)
    async with serving(api) as url, attach(url, TOKEN) as remote:
        yield make_app(remote, clock=seeded.clock, actor="ana@remote", link=remote.link)


def card_text(app: T25App, task_id: str) -> str:
    """What the board draws for a task: its card, or its line in the narrow list."""
    board = app.board
    lists = [board.state_list] if board.compact else [c.cards for c in board.query(Column)]
    for options in lists:
        try:
            return str(options.get_option(task_id).prompt)
        except OptionDoesNotExist:
            continue
    raise AssertionError(f"{task_id} is not on the board")


def head(app: T25App) -> str:
    return str(app.screen.query_one("#detail-head").render())


async def merge_t1(seeded: Seeded) -> None:
    """T-1's checks pass and review approves; an operator merges it."""
    control = seeded.control
    task = await control.task("T-1")
    await passed_review(control, task, await tip(control, task))
    await control.merge("T-1", actor="ana")


@pytest.mark.parametrize("where", ["local", "attached"])
async def test_a_blocked_task_is_marked_until_what_it_waits_for_is_merged(seeded, where):
    async with cockpit(seeded, where) as app, app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert card_text(app, "T-9").startswith("⧗ T-9 fix")
        assert "waits for T-1 · Fix the flaky checkout test" in card_text(app, "T-9")
        assert "⧗" not in card_text(app, "T-7")  # waits for nothing

        assert app.board.focus_task("T-9")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen) and app.screen.ready)
        assert "waits for T-1: it starts once it is merged" in head(app)

        await merge_t1(seeded)  # T-9 is on screen, T-1 changes: the detail reads again
        await until(pilot, lambda: "waits for" not in head(app))
        await pilot.press("escape")
        await until(pilot, lambda: "⧗" not in card_text(app, "T-9"))
        assert "waits for" not in card_text(app, "T-9")


async def test_the_narrow_list_marks_a_blocked_task(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        assert app.board.compact
        line = card_text(app, "T-9")
        assert line.startswith("⧗ T-9 fix") and "waits for T-1 · Fix" in line
        assert card_text(app, "T-7").startswith("  T-7")
        await merge_t1(seeded)
        await until(pilot, lambda: card_text(app, "T-9").startswith("  T-9 fix"))
