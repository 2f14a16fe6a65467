"""The board: six lanes side by side, one card per task; on a narrow terminal, one list
grouped by state.

The lanes (`t25_tui.tui.lanes`, which says why six and not one per state) share the
terminal's width, so every lane, and every task that waits for the operator, is on screen
at any width; an empty lane shrinks to its header. Lanes are `OptionList`s (only visible
lines are rendered); a refresh replaces only the lanes whose cards changed, so a store
with thousands of tasks repaints cheaply. Left and right (and h, l) move the selection to
the previous and next lane that has cards; up and down between cards; enter opens a task
(the board's commands, `t25_tui.tui.commands`, so `keys:` can move them).

Below `COMPACT_BELOW` columns of terminal the board is a single list instead: a header
per state that has tasks, then its cards, one line each. Six lanes of 13 columns would cut
every card to its id; a list shows every waiting task on one screen, keeps the pipeline's
order, and — one `OptionList` that scrolls its highlighted line into view — the selected
card is always whole on screen. Left and right jump to the previous and next state there.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.css.styles import RulesMap
from textual.message import Message
from textual.strip import Strip
from textual.style import Style
from textual.visual import RenderOptions, Visual
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from core.domain.models import TaskState
from core.domain.text import printable
from t25_tui.tui.cards import CARDS_PER_COLUMN, COLUMNS, Card
from t25_tui.tui.commands import Node, bindings
from t25_tui.tui.lanes import LANE_OF, LANES, Lane, by_lane, chip_of

Drawn = tuple[tuple[str, Text], ...]  # (task id, card) for each card drawn
# The column titles' colours (t25.tcss), for the narrow board's headers.
HEADER_STYLE = {
    TaskState.AWAITING_APPROVAL: "bold yellow",
    TaskState.NEEDS_INPUT: "bold yellow",
    TaskState.FAILED: "bold red",
    TaskState.CANCELLED: "bold dim",
}
OVER_BUDGET = "$! "  # a card's mark: its spend reached its budget (the detail has the figures)
BLOCKED = "⧗ "  # a card's mark: it waits for tasks not merged yet (its title line names them)
BLOCKED_STYLE = "bold magenta"
COMPACT_BELOW = 100  # terminal columns: narrower, the board is one list grouped by state


def render_card(card: Card, now: datetime, *, chip: bool = False) -> Text:
    """A card on two lines; `chip`: its state first, in a lane that holds several."""
    head, title = card.lines(now)
    text = Text(no_wrap=True, overflow="ellipsis")
    if card.human:
        text.append("⚑ ", style="bold yellow")
    if card.over_budget:
        text.append(OVER_BUDGET, style="bold red")
    if card.blockers:
        text.append(BLOCKED, style=BLOCKED_STYLE)
    if chip:
        text.append(chip_of(card), style="reverse")
        text.append(" ")
    text.append(head, style="bold")
    text.append("\n")
    _append_title(text, card, title)
    return text


def _append_title(text: Text, card: Card, title: str) -> None:
    """The title, after what a blocked card waits for."""
    if card.blockers:
        text.append(f"{card.waits_for} · ", style=BLOCKED_STYLE)
    text.append(printable(title), style="dim" if card.task.archived else "")  # Text: no markup


def render_line(card: Card, now: datetime) -> Text:
    """A card on one line, for the narrow board: its head, then as much title as fits."""
    head, title = card.lines(now)
    text = Text(no_wrap=True, overflow="ellipsis")
    if card.blockers and not card.human:
        text.append(BLOCKED, style=BLOCKED_STYLE)
    else:
        text.append("⚑ " if card.human else "  ", style="bold yellow")
    if card.over_budget:
        text.append(OVER_BUDGET, style="bold red")
    text.append(head, style="bold")
    text.append("  ")
    _append_title(text, card, title)
    return text


class CardPrompt(Visual):
    """A card as its list draws it.

    A card's lines never wrap (`.cards` cuts them with an ellipsis), so it is as tall as
    it has lines at any width. Told so, a list measures a thousand cards without laying out
    their text, which OptionList otherwise does for every option it is given — the most
    of the board's first draw with thousands of tasks."""

    def __init__(self, text: Text) -> None:
        self.text = text  # as composed (the board compares it between refreshes)
        self.height = text.plain.count("\n") + 1

    @functools.cached_property
    def content(self) -> Content:
        """The card as Textual draws it: made when first drawn (most cards never are)."""
        return Content.from_rich_text(self.text)

    def __str__(self) -> str:
        return self.text.plain

    def render_strips(
        self, width: int, height: int | None, style: Style, options: RenderOptions
    ) -> list[Strip]:
        return self.content.render_strips(width, height, style, options)

    def get_optimal_width(self, rules: RulesMap, container_width: int) -> int:
        return self.content.get_optimal_width(rules, container_width)

    def get_height(self, rules: RulesMap, width: int) -> int:
        return self.height


class Cards(OptionList):
    """A column's cards. Enter is not the list's own: it is the board's `open` command."""

    inherit_bindings = False
    BINDINGS: ClassVar[list[BindingType]] = [
        b for b in OptionList.BINDINGS if isinstance(b, Binding) and b.action != "select"
    ]

    def on_resize(self) -> None:
        """The highlighted card stays whole on screen when the list grows shorter (a
        smaller terminal): OptionList scrolls to it only when the highlight moves."""
        self.call_after_refresh(self.scroll_to_highlight)


def card_options(lane: str, drawn: Drawn, more: int) -> list[Option | None]:
    """The options of a column: its cards with a gap between, and how many more there are."""
    items: list[Option | None] = []
    for i, (task_id, text) in enumerate(drawn):
        if i:
            items.append(None)
        items.append(Option(CardPrompt(text), id=task_id))
    if more:
        items.append(
            Option(
                Text(f"… {more} more (filter with /)", style="dim"),
                id=f"more-{lane}",
                disabled=True,
            )
        )
    return items


class Column(Vertical):
    """A lane's header and its cards."""

    def __init__(self, lane: Lane) -> None:
        super().__init__(id=f"col-{lane.key}", classes="column")
        self.lane = lane
        self.shown: Drawn = ()
        self._key: object = None

    def compose(self) -> ComposeResult:
        yield Label(self.lane.title, classes="column-title")
        yield Cards(id=f"list-{self.lane.key}", classes="cards")

    @property
    def cards(self) -> Cards:
        return self.query_one(Cards)

    def show(self, cards: Sequence[Card], now: datetime, unread: int = 0) -> None:
        """Draw `cards`, and count beside them `unread` older ones the board did not read."""
        chip = self.lane.chips
        drawn = tuple((c.id, render_card(c, now, chip=chip)) for c in cards[:CARDS_PER_COLUMN])
        more = len(cards) - len(drawn) + unread
        self.query_one(Label).update(f"{self.lane.title} {len(cards) + unread}")
        self.set_class(not cards and not unread, "empty")
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
        options.add_options(card_options(self.lane.key, drawn, more))
        self.shown = drawn
        if keep and any(i == keep for i, _ in drawn):
            options.highlighted = options.get_option_index(keep)


class StateList(Cards):
    """The narrow board: a header per state that has tasks, then its cards, one line each."""

    def __init__(self) -> None:
        super().__init__(id="state-list", classes="cards")
        self._key: object = None

    def show(
        self,
        by_state: dict[TaskState, list[Card]],
        now: datetime,
        unread: Mapping[TaskState, int] | None = None,
    ) -> None:
        """Redraw when a line changed, keeping the highlight on the card it was on; `unread`
        counts the older tasks of a state the board did not read."""
        items: list[Option] = []
        for state, cards in by_state.items():
            older = (unread or {}).get(state, 0)
            if not cards and not older:
                continue  # an empty state takes no room
            total = len(cards) + older
            header = Text(f"{state.value} {total}", style=HEADER_STYLE.get(state, "bold"))
            items.append(Option(header, disabled=True))
            items += (
                Option(CardPrompt(render_line(c, now)), id=c.id) for c in cards[:CARDS_PER_COLUMN]
            )
            if (more := total - min(len(cards), CARDS_PER_COLUMN)) > 0:
                note = Text(f"  … {more} more (filter with /)", style="dim")
                items.append(Option(note, disabled=True))
        key = tuple((o.id, str(o.prompt)) for o in items)
        if key == self._key:
            return
        self._key = key
        keep = self.highlighted_option.id if self.highlighted_option else None
        self.clear_options()
        self.add_options(items)
        if keep and keep in self.task_ids():
            self.highlighted = self.get_option_index(keep)

    def task_ids(self) -> list[str]:
        """The tasks listed, top to bottom."""
        return [o.id for o in self.options if o.id and not o.disabled]

    def jump(self, step: int) -> None:
        """Highlight the first card of the next (`step` 1) or previous (-1) state."""
        firsts = [i for i, o in enumerate(self.options) if o.id and self.options[i - 1].disabled]
        if not firsts:
            return
        here = self.highlighted
        if here is None:  # nothing highlighted yet: the first state, or the last
            self.highlighted = firsts[0 if step > 0 else -1]
            return
        group = sum(1 for i in firsts if i <= here) - 1  # the state `here` is in
        self.highlighted = firsts[(group + step) % len(firsts)]


class Board(Vertical):
    """The lanes side by side, fitting the terminal's width; below `COMPACT_BELOW`
    terminal columns, one list grouped by state instead."""

    BINDINGS = bindings(Node.BOARD)

    class Opened(Message):
        """Enter was pressed on a card."""

        def __init__(self, task_id: str) -> None:
            super().__init__()
            self.task_id = task_id

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._cards: Sequence[Card] = ()
        self._unread: Mapping[TaskState, int] = {}
        self._now: datetime | None = None

    def compose(self) -> ComposeResult:
        # Not a scroll container: the lanes fit, and one would take left and right.
        with Horizontal(id="columns"):
            for lane in LANES:
                yield Column(lane)
        yield StateList()

    @property
    def compact(self) -> bool:
        return self.has_class("compact")

    @property
    def state_list(self) -> StateList:
        return self.query_one(StateList)

    def on_resize(self, event: events.Resize) -> None:
        compact = event.size.width < COMPACT_BELOW
        if compact == self.compact:
            return
        selected = self.selected()
        self.set_class(compact, "compact")
        self._draw()
        if selected:
            self.focus_task(selected)
        elif self.screen.focused is None or not self.screen.focused.display:
            self.focus_first()

    def column(self, state: TaskState) -> Column:
        """The lane that holds `state`."""
        return self.query_one(f"#col-{LANE_OF[state].key}", Column)

    def show(
        self, cards: Sequence[Card], now: datetime, unread: Mapping[TaskState, int] | None = None
    ) -> None:
        """Draw `cards`; `unread` counts, by state, the older tasks the board did not read
        (the finished beyond the newest: core.control.task_lists)."""
        self._cards, self._now, self._unread = cards, now, unread or {}
        self._draw()

    def _draw(self) -> None:
        """Draw the cards in the shape on screen (only that one: thousands of tasks)."""
        if self._now is None:
            return
        if self.compact:
            by_state: dict[TaskState, list[Card]] = {s: [] for s in COLUMNS}
            for card in self._cards:
                by_state[card.task.state].append(card)
            for state_cards in by_state.values():
                # Newest first: the most recent work is what an operator looks for.
                state_cards.sort(key=lambda c: c.task.state_since, reverse=True)
            self.state_list.show(by_state, self._now, self._unread)
        else:
            for lane, lane_cards in by_lane(self._cards).items():
                unread = sum(self._unread.get(state, 0) for state in lane.states)
                self.query_one(f"#col-{lane.key}", Column).show(lane_cards, self._now, unread)

    def shown_ids(self) -> set[str]:
        """Every task with a card on the board as it is drawn now."""
        if self.compact:
            return set(self.state_list.task_ids())
        return {i for column in self.query(Column) for i, _ in column.shown}

    def selected(self) -> str | None:
        focused = self.screen.focused
        if isinstance(focused, Cards) and focused in self._lists():
            option = focused.highlighted_option
            if option is not None and option.id and not option.disabled:
                return option.id
        return None

    def _lists(self) -> list[Cards]:
        if self.compact:
            return [self.state_list]
        return [column.cards for column in self.query(Column)]

    def focus_task(self, task_id: str) -> bool:
        for options in self._lists():
            try:
                index = options.get_option_index(task_id)
            except Exception:  # noqa: BLE001 - OptionDoesNotExist: not in this list
                continue
            options.focus()
            options.highlighted = index
            return True
        return False

    def focus_first(self) -> None:
        """Focus the first card on the board (the first lane that has one)."""
        for options in self._lists():
            if options.option_count:
                options.focus()
                options.action_first()
                return
        self._lists()[0].focus()

    def action_column(self, step: int) -> None:
        """Select a card in the next lane (`step` 1) or the previous (-1) that has cards."""
        if self.compact:
            self.state_list.focus()
            self.state_list.jump(step)
            return
        lists = self._lists()
        focused = self.screen.focused
        here = next((i for i, cards in enumerate(lists) if cards is focused), -1 if step > 0 else 0)
        for n in range(1, len(lists) + 1):
            target = lists[(here + n * step) % len(lists)]
            if any(o.id and not o.disabled for o in target.options):
                break
        else:
            return  # no lane has a card
        target.focus()
        if target.highlighted is None:
            target.action_first()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id and not event.option.disabled:
            self.post_message(self.Opened(event.option.id))
