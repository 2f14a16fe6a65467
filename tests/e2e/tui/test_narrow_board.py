"""Pilot tests: below 100 columns the board is one list grouped by state; the arrows move
through it, left and right jump between states, and the selection survives a resize."""

from __future__ import annotations

from t25_tui.tui.screens.detail import TaskDetailScreen
from tests.support.cockpit import app_for, settle_board, until


async def test_the_narrow_board_moves_by_card_and_by_state_and_keeps_its_selection(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        assert app.board.compact and app.board.selected() == "T-9"  # RECEIVED's
        await pilot.press("down")
        assert app.board.selected() == "T-7"  # SPEC's (PLAN is empty: no header)
        await pilot.press("right", "right")
        assert app.board.selected() == "T-8"  # AWAITING_APPROVAL's, then IMPLEMENTING's
        await pilot.press("left")
        assert app.board.selected() == "T-2"
        await pilot.resize_terminal(120, 36)
        # The selection follows once the board is laid out anew, a tick after it switched.
        await until(pilot, lambda: not app.board.compact and app.board.selected() == "T-2")
        assert app.board.focus_task("T-6")
        await pilot.resize_terminal(80, 10)  # the last card of a list taller than the screen
        await until(pilot, lambda: app.board.compact and app.board.selected() == "T-6")
        listed = app.board.state_list
        row = listed.get_option_index("T-6")
        # scrolled to it once the list is laid out at its new height
        await until(
            pilot,
            lambda: listed.scroll_offset.y <= row < listed.scroll_offset.y + listed.size.height,
        )
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen))
        assert app.screen.task_id == "T-6"
