"""The board: one column per pipeline state, one card per task.

Columns are `OptionList`s (only visible lines are rendered); a refresh replaces only the
columns whose cards changed, so a store with thousands of tasks repaints cheaply. Left
and right move between columns; up and down between cards; enter opens a task (the
board's commands, `t25_tui.tui.commands`, so `keys:` can move them).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import HorizontalScroll, Vertical
from textual.message import Message
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from core.domain.models import TaskState
from core.domain.text import printable
from t25_tui.tui.cards import CARDS_PER_COLUMN, COLUMNS, Card
from t25_tui.tui.commands import Node, bindings

Drawn = tuple[tuple[str, Text], ...]  # (task id, card) for each card drawn


def render_card(card: Card, now: datetime) -> Text:
    head, title = card.lines(now)
    text = Text(no_wrap=True, overflow="ellipsis")
    if card.human:
        text.append("⚑ ", style="bold yellow")
    text.append(head, style="bold")
    text.append("\n")
    text.append(printable(title), style="dim" if card.task.archived else "")  # Text: no markup
    return text


class Cards(OptionList):
    """A column's cards. Enter is not the list's own: it is the board's `open` command."""

    inherit_bindings = False
    BINDINGS: ClassVar[list[BindingType]] = [
        b for b in OptionList.BINDINGS if isinstance(b, Binding) and b.action != "select"
    ]


def card_options(state: TaskState, drawn: Drawn, more: int) -> list[Option | None]:
    """The options of a column: its cards with a gap between, and how many more there are."""
    items: list[Option | None] = []
    for i, (task_id, text) in enumerate(drawn):
        if i:
            items.append(None)
        items.append(Option(text, id=task_id))
    if more:
        items.append(
            Option(
                Text(f"… {more} more (filter with /)", style="dim"),
                id=f"more-{state.value}",
                disabled=True,
            )
        )
    return items


class Column(Vertical):
    """A state's header and its cards."""

    def __init__(self, state: TaskState) -> None:
        super().__init__(id=f"col-{state.value}", classes="column")
        self.state = state
        self.shown: Drawn = ()
        self._key: object = None

    def compose(self) -> ComposeResult:
        yield Label(self.state.value, classes="column-title")
        yield Cards(id=f"list-{self.state.value}", classes="cards")

    @property
    def cards(self) -> OptionList:
        return self.query_one(OptionList)

    def show(self, cards: Sequence[Card], now: datetime) -> None:
        drawn = tuple((c.id, render_card(c, now)) for c in cards[:CARDS_PER_COLUMN])
        more = len(cards) - len(drawn)
        title = f"{self.state.value} {len(cards)}"
        self.query_one(Label).update(title)
        self.set_class(not cards, "empty")
        key = (tuple((i, t.plain, bool(t.spans)) for i, t in drawn), more)
        if key == self._key:
            return
        self._key = key
        self._redraw(drawn, more)

    def _redraw(self, drawn: Drawn, more: int) -> None:
        """Replace the cards, keeping the highlight on the card it was on."""
        options = self.cards
        keep = options.highlighted_option.id if options.highlighted_option else None
        options.clear_options()
        options.add_options(card_options(self.state, drawn, more))
        self.shown = drawn
        if keep and any(i == keep for i, _ in drawn):
            options.highlighted = options.get_option_index(keep)


class Board(HorizontalScroll):
    """Every state's column side by side; scrolls sideways when the terminal is narrow."""

    BINDINGS = bindings(Node.BOARD)

    class Opened(Message):
        """Enter was pressed on a card."""

        def __init__(self, task_id: str) -> None:
            super().__init__()
            self.task_id = task_id

    def compose(self) -> ComposeResult:
        for state in COLUMNS:
            yield Column(state)

    def column(self, state: TaskState) -> Column:
        return self.query_one(f"#col-{state.value}", Column)

    def show(self, cards: Sequence[Card], now: datetime) -> None:
        by_state: dict[TaskState, list[Card]] = {s: [] for s in COLUMNS}
        for card in cards:
            by_state[card.task.state].append(card)
        for state, column_cards in by_state.items():
            # Newest first: the most recent work is what an operator looks for.
            column_cards.sort(key=lambda c: c.task.state_since, reverse=True)
            self.column(state).show(column_cards, now)

    def selected(self) -> str | None:
        focused = self.screen.focused
        if isinstance(focused, Cards) and any(focused.parent is c for c in self.query(Column)):
            option = focused.highlighted_option
            if option is not None and option.id and not option.id.startswith("more-"):
                return option.id
        return None

    def focus_task(self, task_id: str) -> bool:
        for column in self.query(Column):
            options = column.cards
            try:
                index = options.get_option_index(task_id)
            except Exception:  # noqa: BLE001 - OptionDoesNotExist: not in this column
                continue
            options.focus()
            options.highlighted = index
            column.scroll_visible()
            return True
        return False

    def focus_first(self) -> None:
        """Focus the first card on the board (the first column that has one)."""
        for column in self.query(Column):
            if column.cards.option_count:
                column.cards.focus()
                column.cards.highlighted = 0
                return
        self.query(Column).first().cards.focus()

    def action_column(self, step: int) -> None:
        columns = list(self.query(Column))
        focused = self.screen.focused
        current = next((i for i, c in enumerate(columns) if c.cards is focused), 0)
        target = columns[(current + step) % len(columns)]
        target.cards.focus()
        if target.cards.highlighted is None and target.cards.option_count:
            target.cards.highlighted = 0
        self.scroll_to_widget(target, animate=False)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(self.Opened(event.option.id))
