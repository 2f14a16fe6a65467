"""The inbox: every task waiting for a human — plans to approve, questions, merges — kept
current while it is open (the app tells it of every change, and of what its store poll sees).

Enter (or decide, `a` unless `keys:` moved it) opens the right dialog for the highlighted task; the app acts on the
result through the ControlPlane, exactly as `t25 approve|reject|answer|merge` do.
"""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from core.control import task_lists
from t25_tui.tui.cards import age, human_needed, literal
from t25_tui.tui.commands import Node, bindings
from t25_tui.tui.screens.base import T25Screen
from t25_tui.tui.widgets.footer import KeysFooter
from t25_tui.tui.widgets.table import MeasuredTable


class Inbox(T25Screen):
    """Tasks that need a person, oldest wait first."""

    BINDINGS = bindings(Node.INBOX)

    def compose(self) -> ComposeResult:
        yield Static("Waiting for you", id="inbox-head", classes="pane-title")
        yield MeasuredTable(id="inbox-table", cursor_type="row", zebra_stripes=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("task", "state", "needs", "waiting", "title")
        table.focus()
        self.reload()

    @work(group="inbox", exclusive=True, exit_on_error=False)
    async def reload(self) -> None:
        tasks = await task_lists.unfinished(self.control)  # not every merged task of history
        waiting = sorted((t for t in tasks if human_needed(t)), key=lambda t: t.state_since)
        table = self.query_one(DataTable)
        keep = self.selected()
        table.clear()
        now = self.clock()
        for t in waiting:
            table.add_row(
                t.id,
                t.state.value,
                human_needed(t),
                age(t.state_since, now),
                literal(t.title),
                key=t.id,
            )
        self.query_one("#inbox-head", Static).update(
            f"Waiting for you: {len(waiting)}" if waiting else "Nothing is waiting for you"
        )
        if keep and keep in [t.id for t in waiting]:
            table.move_cursor(row=table.get_row_index(keep))
        self.ready = True

    def task_ids(self) -> set[str]:
        """The tasks listed now."""
        table = self.query_one(DataTable)
        return {str(row.value) for row in table.rows}

    def selected(self) -> str | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    async def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        await self.run_action("app.decide")

    # -- what the app calls ----------------------------------------------------------------

    @property
    def selected_task(self) -> str | None:
        return self.selected()

    def task_changed(self, task_id: str | None) -> None:
        self.reload()  # any task may have started or stopped waiting
