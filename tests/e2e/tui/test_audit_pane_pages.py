"""The audit pane reads the newest lines first and older ones as the cursor goes down, so
opening it costs a page whatever the log's length."""

from __future__ import annotations

from textual.widgets import DataTable

from t25_tui.tui.screens.panes import AuditPane
from tests.support.cockpit import app_for, settle_board, until


def _seqs(table: DataTable) -> list[int]:
    return [int(table.get_row_at(i)[0]) for i in range(table.row_count)]


async def test_the_audit_pane_shows_the_newest_page_and_reads_older_lines_on_the_way_down(
    seeded, monkeypatch
):
    f = seeded.control
    for n in range(12):
        await f.audit.append(actor="ana@ops", task="T-7", decision="cancel", reason=f"no {n}")
    newest = (await f.audit_trail(limit=0)).verdict.lines
    assert newest >= 12
    monkeypatch.setattr(AuditPane, "page", 5)
    app = app_for(seeded)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle_board(app, pilot)
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, AuditPane) and app.screen.ready)
        table = app.screen.query_one(DataTable)
        assert _seqs(table) == list(range(newest, newest - 5, -1))
        status = str(app.screen.query_one("#audit-status").render())
        assert f"lines {newest - 4}–{newest} shown" in status

        table.move_cursor(row=table.row_count - 1)  # the oldest shown: the page before it
        await until(pilot, lambda: table.row_count == 10)
        assert _seqs(table) == list(range(newest, newest - 10, -1))
        for _ in range(newest // 5):  # a page of 5 at a time, down to the first line
            if (shown := table.row_count) == newest:
                break
            table.move_cursor(row=shown - 1)
            await until(pilot, lambda: table.row_count > shown)
        assert _seqs(table) == list(range(newest, 0, -1))
        assert "shown" not in str(app.screen.query_one("#audit-status").render())
