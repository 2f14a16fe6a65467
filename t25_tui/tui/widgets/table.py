"""The cockpit's tables: Textual's DataTable, drawn again once its columns are measured.

A DataTable measures the columns of rows just added when its message queue runs empty, and
keeps the lines it drew under a count of its updates that measuring does not change (textual
8.2.8). A frame drawn between `add_row` and that moment, as on a loaded machine, stays cut to
the headings' widths until something else changes the table: an inbox of six rows showed
each title as its first five characters for as long as it stayed open. Measuring now drops
the lines drawn before it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.widgets import DataTable
from textual.widgets.data_table import RowKey


class MeasuredTable(DataTable[Any]):
    """A DataTable that never keeps rows drawn with the widths from before they were
    measured."""

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        super()._update_dimensions(new_rows)
        self._clear_caches()
