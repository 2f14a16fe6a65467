"""Typed modal dialogs: each dismisses with what the operator decided, or None.

The caller acts on the result in a callback (never awaiting a dismiss inside a handler)
and calls the Factory method — the same one the command line calls.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Select, Static

from core.models import Task, TaskType

RISK_STYLE = {"low": "bold green", "medium": "bold yellow", "high": "bold red"}


@dataclass(frozen=True)
class Decision:
    """What the approval dialog decided: approve (with a comment) or reject (with a reason)."""

    verb: str  # "approve" | "reject"
    text: str = ""


def plan_text(plan: dict | None, raw: str) -> Text:
    """The plan as the approver reads it: risk, files, steps, rationale."""
    if plan is None:
        return Text(raw or "(no plan stored)")
    out = Text()
    risk = str(plan.get("risk", "?"))
    out.append("risk   ", style="bold")
    out.append(risk.upper(), style=RISK_STYLE.get(risk, "bold"))
    out.append("\nfiles  ", style="bold")
    files = plan.get("files") or []
    out.append("\n       ".join(files) if files else "(none)")
    out.append("\nsteps\n", style="bold")
    for i, step in enumerate(plan.get("steps") or [], 1):
        out.append(f"  {i}. {step}\n")
    if plan.get("rationale"):
        out.append("why    ", style="bold")
        out.append(str(plan["rationale"]))
    return out


def parse_plan(raw: str) -> dict | None:
    try:
        plan = json.loads(raw)
    except ValueError:
        return None
    return plan if isinstance(plan, dict) else None


class ApprovalDialog(ModalScreen[Decision | None]):
    """A plan waiting for a human: `a` approves, `r` asks for a reason and rejects."""

    BINDINGS = [
        Binding("a", "approve", "approve", id="approval.approve"),
        Binding("r", "reject", "reject…", id="approval.reject"),
        Binding("escape", "dismiss(None)", "close", id="approval.close"),
    ]

    def __init__(self, task: Task, plan_raw: str) -> None:
        super().__init__(classes="dialog")
        self.task_ = task
        self.plan_raw = plan_raw
        self.rejecting = False

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(f"Approve the plan of {self.task_.id}: {self.task_.title}",
                        classes="dialog-title")
            with VerticalScroll(classes="dialog-body"):
                yield Static(plan_text(parse_plan(self.plan_raw), self.plan_raw), id="plan")
            yield Input(placeholder="why is this plan rejected? (the planner reads it) — enter",
                        id="reason")
            yield Label("a approve · r reject with a reason · esc close", classes="dialog-keys")

    def on_mount(self) -> None:
        self.query_one("#reason").display = False

    def action_approve(self) -> None:
        if not self.rejecting:
            self.dismiss(Decision("approve"))

    def action_reject(self) -> None:
        self.rejecting = True
        reason = self.query_one("#reason", Input)
        reason.display = True
        reason.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss(Decision("reject", event.value.strip()))
        else:
            self.notify("a rejection needs a reason: the planner reads it", severity="warning")


class AnswerDialog(ModalScreen[str | None]):
    """A NEEDS_INPUT task's question and a line to answer it."""

    BINDINGS = [Binding("escape", "dismiss(None)", "close", id="answer.close")]

    def __init__(self, task: Task, question: str) -> None:
        super().__init__(classes="dialog")
        self.task_ = task
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(f"{self.task_.id} asks ({self.task_.resume_state or 'its stage'} is waiting)",
                        classes="dialog-title")
            yield Static(self.question or "(no question recorded)", classes="dialog-body")
            yield Input(placeholder="your answer — enter sends it", id="answer")
            yield Label("enter send · esc close", classes="dialog-keys")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss(event.value.strip())


class ConfirmDialog(ModalScreen[str | None]):
    """Yes or no, with an optional reason for the audit log; dismisses with the reason."""

    BINDINGS = [
        Binding("y", "yes", "yes", id="confirm.yes"),
        Binding("n,escape", "dismiss(None)", "no", id="confirm.no"),
    ]

    def __init__(self, question: str, *, reason: bool = False) -> None:
        super().__init__(classes="dialog")
        self.question = question
        self.with_reason = reason

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box small"):
            yield Static(self.question, classes="dialog-title")
            if self.with_reason:
                yield Input(placeholder="reason (kept in the audit log) — enter confirms",
                            id="reason")
            yield Label("y yes · n no" if not self.with_reason else "enter yes · esc no",
                        classes="dialog-keys")

    def action_yes(self) -> None:
        self.dismiss(self.query_one("#reason", Input).value if self.with_reason else "")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())


class MessageDialog(ModalScreen[None]):
    """Says why something was refused, and waits to be read."""

    BINDINGS = [Binding("escape,enter,q", "dismiss(None)", "close", id="message.close")]

    def __init__(self, title: str, body: str) -> None:
        super().__init__(classes="dialog")
        self.title_ = title
        self.body = body

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box small"):
            yield Label(self.title_, classes="dialog-title")
            yield Static(self.body, id="message-body")
            yield Label("enter close", classes="dialog-keys")


@dataclass(frozen=True)
class NewTaskRequest:
    title: str
    type: TaskType
    description: str
    project: str | None


class NewTaskDialog(ModalScreen[NewTaskRequest | None]):
    """File a task: title, type, description, project. Enter in any line files it."""

    BINDINGS = [Binding("escape", "dismiss(None)", "close", id="new.close")]

    def __init__(self, projects: list[str]) -> None:
        super().__init__(classes="dialog")
        self.projects = projects

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label("New task", classes="dialog-title")
            yield Input(placeholder="title: what should change", id="title")
            yield Select([(t.value, t) for t in TaskType], value=TaskType.FEAT,
                         allow_blank=False, id="type")
            yield Input(placeholder="description (optional)", id="description")
            if len(self.projects) > 1:
                yield Select([(p, p) for p in self.projects], value=self.projects[0],
                             allow_blank=False, id="project")
            yield Label("tab next field · enter file it · esc close", classes="dialog-keys")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        title = self.query_one("#title", Input).value.strip()
        if not title:
            self.query_one("#title").focus()
            return
        project = (self.query_one("#project", Select).value
                   if len(self.projects) > 1 else None)
        self.dismiss(NewTaskRequest(title, self.query_one("#type", Select).value,
                                    self.query_one("#description", Input).value.strip(),
                                    project))
