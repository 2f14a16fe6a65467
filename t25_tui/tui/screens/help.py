"""The help screen: every command of the cockpit, by where it works, with the keys in effect.

It is written from the command table (`t25_tui.tui.commands`) and the keymap the app runs
with, so it lists a key `t25.yaml`'s `keys:` moved where it now is, and each command's id
(what `keys:` calls it).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator

from rich.console import Console, ConsoleOptions, RenderableType
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from t25_tui.tui.commands import COMMANDS, WIDGET_KEYS, Keymap, Node, Place, bindings
from t25_tui.tui.screens.base import T25Dialog


def help_table(keymap: Keymap) -> Table:
    """Each place's commands (keys, what they do, id), and the keys its widgets handle."""
    table = Table(show_header=False, box=None, padding=(0, 2))
    for place in Place:
        table.add_row(Text(place.value, style="bold"), "", "")
        for command in COMMANDS:
            if command.place is place:
                table.add_row(
                    Text(f"  {keymap.shown(command.id)}", style="bold cyan"),
                    command.description,
                    Text(command.id, style="dim"),
                )
        for keys, what in WIDGET_KEYS.get(place, ()):
            table.add_row(Text(f"  {keys}", style="bold cyan"), what, "")
    return table


class DrawnOnce:
    """A Rich renderable drawn once for each width it is asked at, then replayed.

    Textual draws a Rich renderable again whenever its widget is refreshed, measured or
    laid out — several times for each time the help opens — and the help's table of some
    seventy rows took most of the time `?` took to answer. Its lines depend only on the
    width, so they are kept."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable
        self._lines: dict[int, list[list[Segment]]] = {}
        self._measured: dict[int, Measurement] = {}

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        width = options.max_width
        lines = self._lines.get(width)
        if lines is None:
            lines = console.render_lines(self.renderable, options, pad=False)
            self._lines[width] = lines
        newline = Segment.line()
        for line in lines:
            yield from line
            yield newline

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        width = options.max_width
        if width not in self._measured:
            self._measured[width] = Measurement.get(console, options, self.renderable)
        return self._measured[width]


# The help as drawn for each keymap in use (one per cockpit: `keys:` is read at start).
_DRAWN: weakref.WeakKeyDictionary[Keymap, DrawnOnce] = weakref.WeakKeyDictionary()


def drawn_help(keymap: Keymap) -> DrawnOnce:
    if keymap not in _DRAWN:
        _DRAWN[keymap] = DrawnOnce(help_table(keymap))
    return _DRAWN[keymap]


class HelpScreen(T25Dialog[None]):
    """Lists the commands; escape, q, or the help key again closes it.

    Unlike the other dialogs it covers the cockpit with a solid background rather than
    dimming it: a see-through one has the whole board drawn again, blended, under the
    help on every frame, which is most of the work of opening it while agents stream."""

    BINDINGS = bindings(Node.HELP)
    DEFAULT_CSS = "HelpScreen { background: $background; }"

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog-box help"):
            yield Static(
                "Keys by where they work. On the right, each command's id: "
                "what `keys:` in t25.yaml calls it",
                classes="dialog-title",
            )
            yield Static(drawn_help(self.keymap))
