"""The new task dialog: a task filed, or an existing task's fields edited.

Enter in the title, the File button or ctrl+s files it; what the core would refuse is refused
here with the reason, and everything typed stays as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Select, Static, TextArea

import core.domain.text
from core.domain.models import MAX_PRIORITY, MIN_PRIORITY, TaskType
from core.errors import InvalidInput
from t25_tui.tui.cards import literal
from t25_tui.tui.commands import Node, bindings
from t25_tui.tui.screens.base import T25Dialog


def _priority(typed: str) -> int:
    """A priority as typed: a whole number from MIN_PRIORITY to MAX_PRIORITY (empty: 0)."""
    try:
        value = int(typed.strip() or "0")
    except ValueError:
        raise InvalidInput(
            f"a priority is a whole number, not {typed.strip()!r}", hint="0 is the default"
        ) from None
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise InvalidInput(f"a priority is from {MIN_PRIORITY} to {MAX_PRIORITY}, not {value}")
    return value


@dataclass(frozen=True)
class NewTaskRequest:
    title: str
    type: TaskType
    description: str
    project: str | None
    priority: int = 0
    after: tuple[str, ...] = ()  # the tasks it waits for, merged


class NewTaskDialog(T25Dialog[NewTaskRequest | None]):
    """File a task: title, type, description (several lines), project, priority, and the
    tasks it waits for (started once each is merged).

    Enter in the title, the File button or ctrl+s (which no field takes for itself) files
    it. What the core would refuse (`core.domain.text`) is refused here, with the reason, and
    everything typed stays as it was; so does a draft the control plane sent back.
    """

    BINDINGS = bindings(Node.NEW_TASK)

    def __init__(
        self,
        projects: list[str],
        *,
        draft: NewTaskRequest | None = None,
        refusal: str = "",
        editing: str | None = None,
    ) -> None:
        super().__init__(classes="dialog")
        self.projects = projects
        self.draft = draft
        self.refusal = refusal
        self.editing = editing  # a task's id: its fields, to change (project and after stay)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(
                f"Edit {self.editing}" if self.editing else "New task", classes="dialog-title"
            )
            yield from self._fields()
            yield Static(literal(self.refusal, multiline=True), id="refusal")
            with Horizontal(classes="dialog-buttons"):
                yield Button(
                    "Save" if self.editing else "File task",
                    id="file",
                    variant="primary",
                    compact=True,
                )
            keys = self.keymap
            yield Label(
                "tab / shift+tab next / previous field · enter in the title, "
                f"{keys.first('new_task.file')} or {'Save saves' if self.editing else 'File task files'} "
                f"it · {keys.first('close')} close",
                classes="dialog-keys",
            )

    def _fields(self) -> ComposeResult:
        """The task's fields, each a labelled row, filled from the draft."""
        draft = self.draft
        with Horizontal(classes="field"):
            yield Label("title", classes="field-name")
            yield Input(
                draft.title if draft else "",
                placeholder="what should change",
                id="title",
                compact=True,
            )
        with Horizontal(classes="field"):
            yield Label("type", classes="field-name")
            yield Select(
                [(t.value, t) for t in TaskType],
                allow_blank=False,
                compact=True,
                value=draft.type if draft else TaskType.FEAT,
                id="type",
            )
        with Horizontal(classes="field tall"):
            yield Label("description", classes="field-name")
            yield TextArea(
                draft.description if draft else "",
                id="description",
                compact=True,
                soft_wrap=True,
                show_line_numbers=False,
                placeholder="optional; enter starts a new line",
            )
        with Horizontal(classes="field"):
            yield Label("project", classes="field-name")
            yield Select(
                [(p, p) for p in self.projects],
                allow_blank=False,
                compact=True,
                value=(
                    draft.project if draft and draft.project in self.projects else self.projects[0]
                ),
                id="project",
                disabled=bool(self.editing),
            )
        with Horizontal(classes="field"):
            yield Label("priority", classes="field-name")
            yield Input(
                str(draft.priority) if draft else "0",
                placeholder="-100 to 100; higher runs first",
                id="priority",
                compact=True,
            )
        with Horizontal(classes="field"):
            yield Label("after", classes="field-name")
            yield Input(
                " ".join(draft.after) if draft else "",
                placeholder="optional: T-3 T-5 — starts once each is merged",
                id="after",
                compact=True,
                disabled=bool(self.editing),
            )

    def on_mount(self) -> None:
        self.query_one("#refusal").display = bool(self.refusal)
        self.query_one("#title").focus()

    def action_file(self) -> None:
        try:
            title = core.domain.text.title(self.query_one("#title", Input).value)
        except InvalidInput as exc:
            self._refuse(exc, "#title")
            return
        try:
            typed = self.query_one("#description", TextArea).text
            description = core.domain.text.description(typed).strip()
        except InvalidInput as exc:
            self._refuse(exc, "#description")
            return
        try:
            priority = _priority(self.query_one("#priority", Input).value)
        except InvalidInput as exc:
            self._refuse(exc, "#priority")
            return
        after = tuple(self.query_one("#after", Input).value.replace(",", " ").split())
        project = self.query_one("#project", Select).value
        kind = self.query_one("#type", Select).value  # never blank: allow_blank=False
        self.dismiss(
            NewTaskRequest(
                title,
                kind if isinstance(kind, TaskType) else TaskType.FEAT,
                description,
                project if isinstance(project, str) else None,
                priority,
                after,
            )
        )

    def _refuse(self, exc: InvalidInput, field: str) -> None:
        refusal = self.query_one("#refusal", Static)
        refusal.update(literal(exc.message + (f" — {exc.hint}" if exc.hint else "")))
        refusal.display = True
        self.query_one(field).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_file()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_file()
