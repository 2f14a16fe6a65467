"""Every action is in the command palette; the help screen lists the bindings."""

from __future__ import annotations

from t25_tui.tui.app import COMMANDS
from t25_tui.tui.screens.help import HelpScreen
from t25_tui.tui.screens.panes import AuditPane, CostPane, ProfilesPane
from tests.tui.conftest import app_for, settle_board, until


async def test_palette_lists_every_action_and_help_lists_the_keys(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {f"T25: {title}" for _, title, _ in COMMANDS} <= titles
        for action, _, _ in COMMANDS:
            assert hasattr(app, f"action_{action}")
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        for key, pane in (
            ("c", CostPane),
            ("u", AuditPane),
            ("p", ProfilesPane),
            ("f5", CostPane),
            ("f6", AuditPane),
            ("f7", ProfilesPane),
        ):
            await pilot.press(key)
            await until(pilot, lambda: isinstance(app.screen, pane) and app.screen.ready)
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, AuditPane) and app.screen.ready)
        assert "chain verified" in str(app.screen.query_one("#audit-status").render())
