"""The help screen: every binding of the cockpit, by where it works."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

SECTIONS: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "Everywhere",
        [
            ("? / F1", "this help"),
            ("ctrl+p", "command palette (every action)"),
            ("b / F2", "board"),
            ("i / F3", "inbox: what waits for you"),
            ("c / F5", "cost"),
            ("u / F6", "audit"),
            ("p / F7", "agent profiles and policies"),
            ("q / ctrl+q", "quit (agents stop, their runs go back to the queue)"),
        ],
    ),
    (
        "Board",
        [
            ("← →", "previous / next column"),
            ("↑ ↓", "previous / next card"),
            ("enter", "task detail"),
            ("l", "the task's live log"),
            ("/", "filter: project:P type:T words"),
            ("escape", "clear the filter"),
        ],
    ),
    (
        "On the selected task",
        [
            ("a", "decide: approve/reject a plan, answer a question, or merge"),
            ("m", "merge (refused with the reason until checks pass and review approves)"),
            ("n", "new task"),
            ("x", "cancel"),
            ("r", "retry a FAILED task"),
            ("z", "archive"),
        ],
    ),
    ("Task detail", [("1 2 3 4", "history · artifacts · runs · log"), ("escape", "back")]),
    ("Log", [("f", "pause / resume following"), ("/", "search"), ("n", "next match")]),
    ("Dialogs", [("tab / shift+tab", "next / previous field or button"), ("escape", "close")]),
    (
        "Approval dialog",
        [
            ("a", "approve (with the comment typed, if any)"),
            ("r", "reject: type the reason, enter sends it"),
        ],
    ),
    (
        "New task dialog",
        [
            ("ctrl+s", "file it, from any field"),
            ("enter", "in the title: file it; in the description: a new line"),
        ],
    ),
]


class HelpScreen(ModalScreen[None]):
    """Lists the bindings; any of escape, q, ? or F1 closes it."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss(None)", "close", id="help.close")]

    def compose(self) -> ComposeResult:
        table = Table(show_header=False, box=None, padding=(0, 2))
        for section, keys in SECTIONS:
            table.add_row(f"[b]{section}[/b]", "")
            for key, what in keys:
                table.add_row(f"  [b cyan]{key}[/]", what)
        with VerticalScroll(classes="dialog-box help"):
            yield Static(table)
