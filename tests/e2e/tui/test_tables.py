"""The cockpit's tables show each cell whole, however early a frame drew them."""

from __future__ import annotations

from textual.app import App, ComposeResult

from t25_tui.tui.widgets.table import MeasuredTable
from tests.support.cockpit import until
from tests.support.screen_text import screen_text

TITLE = "a title far longer than its heading"


class _OneTable(App[None]):
    CSS = "MeasuredTable { height: 1fr; }"  # as the cockpit's: rows drawn before the table grows

    def compose(self) -> ComposeResult:
        yield MeasuredTable()


async def test_rows_drawn_before_their_columns_were_measured_are_drawn_again_whole():
    app = _OneTable()
    async with app.run_test(size=(100, 8)) as pilot:
        table = app.query_one(MeasuredTable)
        table.add_columns("task", "title")
        await pilot.pause()
        table.add_row("T-1", TITLE)
        # A frame before the table measured its new row, as a loaded machine draws one.
        assert "T-1   a tit" in screen_text(app)
        await until(pilot, lambda: not table._require_update_dimensions)
        await until(pilot, lambda: TITLE in screen_text(app))
        assert table.get_row_at(0) == ["T-1", TITLE]
