"""Without bubblewrap, a cockpit whose own workers run agents says so in its top line."""

from __future__ import annotations

import pytest

from adapters import sandbox
from t25_tui.runtime import local_sweeper
from tests.support.cockpit import app_for, settle_board


@pytest.mark.parametrize("bwrap", [None, "bubblewrap is not installed"])
async def test_the_header_says_unconfined_when_agents_would_run_as_you(seeded, monkeypatch, bwrap):
    monkeypatch.setattr(sandbox, "bwrap_problem", lambda: bwrap)
    app = app_for(seeded, sweeper=local_sweeper(seeded.control, workers=0))
    async with app.run_test(size=(160, 30)) as pilot:
        await settle_board(app, pilot)
        status = str(app.query_one("#status").render())
        assert ("unconfined: agents run as you" in status) is (bwrap is not None), status
        await app.stop_sweeper()
