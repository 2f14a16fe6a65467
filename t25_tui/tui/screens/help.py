"""The help screen: every command of the cockpit, by where it works, with the keys in effect.

It is written from the command table (`t25_tui.tui.commands`) and the keymap the app runs
with, so it lists a key `t25.yaml`'s `keys:` moved where it now is, and each command's id
(what `keys:` calls it).
"""

from __future__ import annotations

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


class HelpScreen(T25Dialog[None]):
    """Lists the commands; escape, q, or the help key again closes it."""

    BINDINGS = bindings(Node.HELP)

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog-box help"):
            yield Static(
                "Keys by where they work. On the right, each command's id: "
                "what `keys:` in t25.yaml calls it",
                classes="dialog-title",
            )
            yield Static(help_table(self.keymap))
