"""Pilot tests: a footer is made again for the keys in effect, not while a screen hides it
and not when its keys are the ones it shows — and a dialog does not hide it: below a dialog
it shows the keys that work while it is open."""

from __future__ import annotations

from textual.screen import ModalScreen

from t25_tui.tui.screens.detail import TaskDetailScreen
from t25_tui.tui.widgets.footer import KeysFooter
from tests.support.cockpit import app_for, settle_board, until
from tests.support.screen_text import screen_text

BOARD_KEYS = "? help  i inbox  n new  a decide"


def footer_line(app) -> str:
    return screen_text(app).splitlines()[-1]


async def test_the_boards_footer_is_not_made_again_behind_the_detail_and_is_right_back(
    seeded,
):
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        board = app.screen
        await until(pilot, lambda: BOARD_KEYS in footer_line(app))
        footer = board.query_one(KeysFooter)
        made: list[str] = []
        remake = footer.recompose

        async def counted() -> None:
            made.append(type(app.screen).__name__)
            await remake()

        footer.recompose = counted  # type: ignore[method-assign]
        app.board.focus_task("T-3")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen) and app.screen.ready)
        detail = app.screen
        await until(pilot, lambda: "history" in footer_line(app))  # the detail's own footer
        # Made again for the card's focus, maybe, while the board was in front; never while
        # the detail hid it.
        assert "TaskDetailScreen" not in made, made
        before = len(made)
        detail.dismiss()
        await until(pilot, lambda: BOARD_KEYS in footer_line(app))  # right on its return
        await pilot.pause()
        assert made[before:] in ([], ["Screen"]), made  # made once at most: the same keys


async def test_a_footer_is_made_once_for_a_log_opened_from_the_board(seeded):
    """Opening a task's log moves the focus and then the keys' checks (the task read): the
    keys change once, and the footer is made once, not for each refresh of them."""
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        made: list[str] = []
        remake = KeysFooter.recompose

        async def counted(footer: KeysFooter) -> None:
            made.append(type(footer.screen).__name__)
            await remake(footer)

        KeysFooter.recompose = counted  # type: ignore[method-assign]
        try:
            app.board.focus_task("T-3")
            await pilot.press("w")
            await until(
                pilot, lambda: isinstance(app.screen, TaskDetailScreen) and app.screen.ready
            )
            await until(pilot, lambda: "history" in footer_line(app))
            await pilot.pause()
        finally:
            KeysFooter.recompose = remake  # type: ignore[method-assign]
        assert made.count("TaskDetailScreen") == 1, made
        assert app.screen.focused is app.screen.query_one("#log-pane Log")  # its keys at once


async def test_below_a_dialog_the_footer_shows_only_the_keys_that_work(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle_board(app, pilot)
        app.board.focus_task("T-2")
        await until(pilot, lambda: BOARD_KEYS in footer_line(app))
        await pilot.press("a")  # the plan's approval
        await until(pilot, lambda: isinstance(app.screen, ModalScreen))
        await until(
            pilot, lambda: "q quit" in footer_line(app) and "i inbox" not in footer_line(app)
        )
        app.screen.dismiss(None)
        await until(pilot, lambda: BOARD_KEYS in footer_line(app))
