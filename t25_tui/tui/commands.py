"""The cockpit's commands, each declared once.

A row says what a command is called (its id, which `t25.yaml`'s `keys:` uses), the keys it
answers to by default, what it does (the footer's tooltip, the help screen's line, the
command palette's help), the action it runs, and where it works. Every screen's key
bindings, the command palette and the help screen are built from this table, and a
`Keymap` says which keys are in effect once `keys:` has moved some; so a key is written
down once, and the three cannot drift apart.

No Textual here: the command line hands `bindable()` to the configuration check, so a
`keys:` entry naming no command is refused before the cockpit starts.
"""

from __future__ import annotations

import string
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from core.config.keys import KEYS_HINT, Bindable, character_key, keymap_problems
from core.domain.verbs import VERBS
from core.errors import ConfigError

if TYPE_CHECKING:
    from textual.binding import BindingType


class Place(Enum):
    """Where a command works; the help screen has a section for each."""

    EVERYWHERE = "Everywhere"
    TASK = "On the selected task"  # the board's card, the detail's task, the inbox's row
    BOARD = "Board"
    INBOX = "Inbox"
    SCREENS = "Above the board"  # the task detail, the inbox, the cost, audit and agents panes
    DETAIL = "Task detail"
    LOG = "Log (in the detail)"
    DIFF = "Diff"
    PANES = "Cost, audit, agents"
    DIALOGS = "Every dialog"
    APPROVAL = "Approval dialog"
    ANSWER = "Answer dialog"
    CONFIRM = "Confirmation"
    MERGE = "Merge question"
    MESSAGE = "Message"
    NEW_TASK = "New task dialog"
    HELP = "This help"


class Node(Enum):
    """What binds keys: the app (on every screen), the board, each screen and dialog.

    Within one, a key runs one command; a screen's own key wins over the app's there
    (`n` is the next log match in the task detail and a new task elsewhere)."""

    APP = "every screen"
    BOARD = "the board"
    DETAIL = "the task detail"
    DIFF = "the diff"
    INBOX = "the inbox"
    PANES = "the cost, audit and agents panes"
    APPROVAL = "the approval dialog"
    ANSWER = "the answer dialog"
    CONFIRM = "the confirmation"
    MERGE = "the merge question"
    MESSAGE = "the message dialog"
    NEW_TASK = "the new task dialog"
    HELP = "the help screen"


# The places each node binds.
BOUND_ON: Mapping[Node, tuple[Place, ...]] = {
    Node.APP: (Place.EVERYWHERE, Place.TASK),
    Node.BOARD: (Place.BOARD,),
    Node.DETAIL: (Place.SCREENS, Place.DETAIL, Place.LOG),
    Node.DIFF: (Place.SCREENS, Place.DIFF),
    Node.INBOX: (Place.SCREENS, Place.INBOX),
    Node.PANES: (Place.SCREENS, Place.PANES),
    Node.APPROVAL: (Place.DIALOGS, Place.APPROVAL),
    Node.ANSWER: (Place.DIALOGS, Place.ANSWER),
    Node.CONFIRM: (Place.DIALOGS, Place.CONFIRM),
    Node.MERGE: (Place.DIALOGS, Place.CONFIRM, Place.MERGE),
    Node.MESSAGE: (Place.DIALOGS, Place.MESSAGE),
    Node.NEW_TASK: (Place.DIALOGS, Place.NEW_TASK),
    Node.HELP: (Place.DIALOGS, Place.HELP),
}


@dataclass(frozen=True)
class Command:
    """One thing the operator can do, and the keys that do it."""

    id: str  # what `keys:` in t25.yaml calls it
    keys: tuple[str, ...]  # its default keys, named as Textual names them
    action: str  # the Textual action its keys run, on the node that binds them
    label: str  # the footer's word for it
    place: Place
    description: str  # the footer's tooltip, the help screen's line, the palette's help
    title: str | None = None  # listed in the command palette as "T25: <title>"
    show: bool = False  # in the footer
    in_dialogs: bool = False  # an app command that still works while a dialog is open
    priority: bool = False  # before the focused field takes the key


def verb_commands() -> tuple[Command, ...]:
    """The operator's verbs that have keys (core.domain.verbs), each a command on the
    selected task; its action asks as its row says (t25_tui.tui.decision_flows)."""
    return tuple(
        Command(
            spec.id,
            spec.keys,
            f"verb('{spec.verb.value}')",
            spec.words[-1],
            Place.TASK,
            spec.line,
            title=spec.title,
        )
        for spec in VERBS.values()
        if spec.keys
    )


_E, _T, _B = Place.EVERYWHERE, Place.TASK, Place.BOARD
# fmt: off
COMMANDS: tuple[Command, ...] = (
    # -- the app's: on every screen, held while a dialog is open (but quit); in the order
    # the footer shows them, the help screen groups them by place --
    Command("help", ("question_mark", "f1"), "help", "help", _E,
            "every key, where it works, and its id", title="Help", show=True),
    Command("board", ("b", "f2"), "board", "board", _E,
            "the board: six lanes that fit the terminal (narrower than 100, a list by state)",
            title="Board"),
    Command("inbox", ("i", "f3"), "inbox", "inbox", _E,
            "the inbox: everything waiting for a human", title="Inbox", show=True),
    Command("cost", ("c", "f5"), "cost", "cost", _E,
            "spend per task, role, adapter and model, today and in total", title="Cost"),
    Command("audit", ("u", "f6"), "audit", "audit", _E,
            "operator decisions, and whether the audit chain verifies", title="Audit"),
    Command("profiles", ("p", "f7"), "profiles", "agents", _E,
            "each role's agent CLIs (binary, version) and the policies in force",
            title="Agent profiles and policies"),
    Command("new_task", ("n",), "new_task", "new", _E,
            "file a new task", title="New task", show=True),
    Command("decide", ("a",), "decide", "decide", _T,
            "approve or reject its plan, answer its question, or merge it",
            title="Decide", show=True),
    *verb_commands(),
    Command("log", ("l", "w"), "log", "log", _T,
            "its live log (on the board, where l moves between lanes: w)", title="Log"),
    Command("shell", ("s",), "shell", "shell", _T,
            "a shell ($SHELL) in its worktree; exit the shell to come back",
            title="Shell in the worktree"),
    Command("editor", ("e",), "editor", "editor", _T,
            "your editor ($VISUAL or $EDITOR) on its worktree", title="Editor on the worktree"),
    Command("intake", ("j",), "intake", "intake", _E,
            "take the tracker's issues in now (projects[].intake): a task each, once",
            title="Take issues in from the tracker"),
    Command("filter", ("slash",), "filter", "filter", _E,
            "filter the board: project:NAME type:TYPE words",
            title="Filter the board", show=True),
    Command("quit", ("q",), "quit", "quit", _E,
            "stop the agents (their runs go back to the queue) and leave",
            title="Quit", show=True, in_dialogs=True),
    # -- the board --
    Command("open", ("enter",), "app.open", "open", _B,
            "the selected task's detail", title="Open task"),
    Command("previous_column", ("left", "h"), "column(-1)", "prev lane", _B,
            "a card in the previous lane that has one (narrower than 100, the previous state)"),
    Command("next_column", ("right", "l"), "column(1)", "next lane", _B,
            "a card in the next lane that has one (narrower than 100, the next state)"),
    # -- every screen above the board --
    Command("back", ("escape",), "app.pop_screen", "back", Place.SCREENS,
            "back to where it was opened", show=True),
    # -- the task detail and its log --
    Command("detail.history", ("1",), "tab('history')", "history", Place.DETAIL,
            "its history: each change with its time, actor and reason", show=True),
    Command("detail.artifacts", ("2",), "tab('artifacts')", "artifacts", Place.DETAIL,
            "its artifacts: spec, plan, diff, QA report, review, docs", show=True),
    Command("detail.runs", ("3",), "tab('runs')", "runs", Place.DETAIL,
            "its runs: adapter, CLI version, model, time, tokens, cost", show=True),
    Command("detail.log", ("4", "l"), "tab('log')", "log", Place.DETAIL,
            "the log of the run chosen under runs, else the newest", show=True),
    Command("detail.diff", ("d",), "diff", "diff", Place.DETAIL,
            "its diff, file by file: the whole change, or one implementing attempt's",
            show=True),
    Command("log.follow", ("f",), "follow_log", "follow/pause", Place.LOG,
            "pause or resume following the output", show=True),
    Command("log.search", ("slash",), "search_log", "search log", Place.LOG,
            "search the log", show=True),
    Command("log.next_match", ("n",), "next_match", "next match", Place.LOG,
            "the next match"),
    # -- the diff --
    Command("diff.view", ("v",), "toggle_view", "whole/attempt", Place.DIFF,
            "switch between the whole change and one implementing attempt's", show=True),
    Command("diff.previous_attempt", ("left_square_bracket",), "attempt(-1)", "prev attempt",
            Place.DIFF, "the previous implementing attempt", show=True),
    Command("diff.next_attempt", ("right_square_bracket",), "attempt(1)", "next attempt",
            Place.DIFF, "the next implementing attempt", show=True),
    # -- the cost, audit and agents panes --
    Command("reload", ("r",), "reload", "reload", Place.PANES,
            "read it again", show=True),
    # -- dialogs --
    Command("close", ("escape",), "dismiss(None)", "close", Place.DIALOGS,
            "close it, deciding nothing"),
    Command("approval.approve", ("a",), "approve", "approve", Place.APPROVAL,
            "approve the plan, with the comment typed, if any"),
    Command("approval.reject", ("r",), "reject", "reject…", Place.APPROVAL,
            "reject it: asks for the reason (the planner reads it) in a dialog of its own"),
    Command("confirm.yes", ("y",), "yes", "yes", Place.CONFIRM,
            "yes, do it"),
    Command("confirm.no", ("n",), "dismiss(None)", "no", Place.CONFIRM,
            "no, leave it as it is"),
    Command("merge.diff", ("d",), "diff", "diff", Place.MERGE,
            "the diff it would merge, file by file (escape comes back to the question)"),
    Command("message.close", ("enter", "q"), "dismiss(None)", "close", Place.MESSAGE,
            "close the message"),
    Command("new_task.file", ("ctrl+s",), "file", "file it", Place.NEW_TASK,
            "file the task, from any field", priority=True),
    Command("help.close", ("q", "question_mark", "f1"), "dismiss(None)", "close", Place.HELP,
            "close this help"),
)
# fmt: on
BY_ID: Mapping[str, Command] = {c.id: c for c in COMMANDS}

# Keys Textual and the widgets handle themselves: the help screen lists them beside the commands.
WIDGET_KEYS: Mapping[Place, tuple[tuple[str, str], ...]] = {
    Place.EVERYWHERE: (
        ("ctrl+p", "the command palette: every command by name"),
        ("ctrl+q", "quit, whatever has the focus"),
    ),
    Place.BOARD: (("↑ ↓", "previous / next card"), ("esc", "clear the filter")),
    Place.INBOX: (("enter", "decide on the highlighted task"),),
    Place.DIFF: (
        ("↑ ↓", "in the file list: a file, or all files"),
        ("tab", "to the diff, to scroll it"),
    ),
    Place.DIALOGS: (("tab / shift+tab", "next / previous field or button"),),
    Place.APPROVAL: (("enter", "in the comment: to the Approve button (never decides)"),),
    Place.ANSWER: (("enter", "send the answer"),),
    Place.NEW_TASK: (("enter", "in the title: file it; in the description: a new line"),),
}


def commands_on(node: Node) -> Iterator[Command]:
    """The commands `node` binds, in the table's order."""
    places = BOUND_ON[node]
    return (c for c in COMMANDS if c.place in places)


def nodes_of(command: Command) -> tuple[Node, ...]:
    return tuple(node for node, places in BOUND_ON.items() if command.place in places)


def bindings(node: Node) -> list[BindingType]:
    """The key bindings of `node` (its class's BINDINGS): the description is the footer's
    tooltip, the id the command's, so Textual's keymap moves them (`T25App.set_keymap`)."""
    from textual.binding import Binding  # the cockpit binds; the command line only checks

    return [
        Binding(
            ",".join(c.keys),
            c.action,
            c.label,
            show=c.show,
            tooltip=c.description,
            id=c.id,
            priority=c.priority,
        )
        for c in commands_on(node)
    ]


def held_in_dialogs() -> frozenset[str]:
    """The app's actions that wait while a dialog is open: those of its own commands and
    each one the palette can run (quitting does not wait)."""
    on_app = set(commands_on(Node.APP))
    return frozenset(
        c.action.removeprefix("app.").partition("(")[0]
        for c in COMMANDS
        if (c in on_app or c.title is not None) and not c.in_dialogs
    )


def bindable() -> dict[str, Bindable]:
    """Every command as the configuration check sees it: its keys and where they work."""
    return {c.id: Bindable(c.keys, tuple(node.value for node in nodes_of(c))) for c in COMMANDS}


# -- the keys in effect ------------------------------------------------------------------------

_KEY_SHOWN = {
    "up": "↑",
    "down": "↓",
    "left": "←",
    "right": "→",
    "escape": "esc",
    **{character_key(char): char for char in string.punctuation},
}


def shown(key: str) -> str:
    """A key as the help screen and the dialogs write it: `?`, `F1`, `ctrl+q`, `esc`."""
    if key in _KEY_SHOWN:
        return _KEY_SHOWN[key]
    if key[0] == "f" and key[1:].isdigit():
        return key.upper()
    return key


class Keymap:
    """The keys in effect: each command's defaults, with those `keys:` moved replaced."""

    def __init__(self, moved: Mapping[str, Sequence[str]] | None = None) -> None:
        self.moved = {command: tuple(keys) for command, keys in (moved or {}).items()}
        # A t25.yaml the command line loaded was checked with its lines already; one that
        # reached the cockpit another way (a test, a remote serve's /config) is checked here.
        if wrong := next(keymap_problems(self.moved, bindable()), None):
            raise ConfigError(f"keys.{wrong[0]}: {wrong[1]}", hint=KEYS_HINT)
        self._keys = {c.id: self.moved.get(c.id, c.keys) for c in COMMANDS}

    def keys(self, command: str) -> tuple[str, ...]:
        return self._keys[command]

    def shown(self, command: str) -> str:
        """Every key of `command`, as written for a person: `? / F1`."""
        return " / ".join(shown(key) for key in self._keys[command])

    def first(self, command: str) -> str:
        """The first key of `command`, for a dialog's one-line reminder."""
        return shown(self._keys[command][0])

    def textual(self) -> dict[str, str]:
        """The moved commands as Textual's keymap takes them: binding id -> keys."""
        return {command: ",".join(keys) for command, keys in self.moved.items()}
