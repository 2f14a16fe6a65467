"""What the app asks of its screens, and what the screens ask of the app.

The app treats its full screens alike — the task detail, the inbox, the cost, audit and
agents panes: it tells the one on top that a task changed, hands agent output to each of
them, and asks the one on top which task a decision is about. `T25Screen` declares those
hooks with their types, so the app knows a screen by its class, never by whether it
happens to have an attribute of some name. Dialogs share `T25Dialog`, which knows the keys
in effect (`t25.yaml`'s `keys:` may have moved them) for its one-line reminder.
"""

from __future__ import annotations

from typing import TypeVar

from textual.app import App
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen

from core.domain.events import RunOutput
from core.ports import Operations
from t25_tui.tui.cards import Clock
from t25_tui.tui.commands import Keymap

ResultT = TypeVar("ResultT")


class Cockpit(App[None]):
    """What the cockpit's screens and dialogs may ask of the app they run in (`T25App`)."""

    keymap: Keymap


def cockpit(node: DOMNode) -> Cockpit:
    app = node.app
    if not isinstance(app, Cockpit):
        raise TypeError(f"{type(node).__name__} runs only inside the T25 cockpit")
    return app


class T25Screen(Screen[None]):
    """A full screen above the board; the app calls these hooks on it."""

    def __init__(self, control: Operations, clock: Clock) -> None:
        super().__init__()
        self.control = control
        self.clock = clock
        self.ready = False  # set once the first read of the store is on screen

    @property
    def selected_task(self) -> str | None:
        """The task a decision taken here is about: none, unless the screen shows one."""
        return None

    def task_changed(self, task_id: str | None) -> None:
        """The bridge says `task_id` changed (None: something did, re-read). Nothing here
        shows a task unless the screen says so."""

    def run_output(self, event: RunOutput) -> None:
        """A batch of an agent's output arrived. Only a screen with a log shows it."""


class T25Dialog(ModalScreen[ResultT]):
    """A dialog of the cockpit: it dismisses with what the operator decided, or None."""

    @property
    def keymap(self) -> Keymap:
        """The keys in effect, for the dialog's reminder line."""
        return cockpit(self).keymap
