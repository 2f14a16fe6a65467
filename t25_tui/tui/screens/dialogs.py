"""Typed modal dialogs: each dismisses with what the operator decided, or None.

The caller acts on the result in a callback (never awaiting a dismiss inside a handler)
and calls the ControlPlane method — the same one the command line calls. Every field and
button of a dialog is reached with tab and shift+tab, and a dialog's own letter keys
(`a`, `r`, `y`) work only while no text field has the focus, so typing never decides.
Stored text (titles, plans, questions, reasons) is shown with `literal`: escaped and
never read as markup.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Label, Select, Static

from core.domain.evidence import ApprovalEvidence
from core.domain.models import Task, TaskState
from core.domain.states import WORKING, assert_reset
from core.domain.verbs import Verb
from core.errors import IllegalTransition
from core.ports import Operations
from t25_tui.tui.cards import Clock, literal
from t25_tui.tui.commands import Node, bindings
from t25_tui.tui.screens.base import T25Dialog

RISK_STYLE = {"low": "bold green", "medium": "bold yellow", "high": "bold red"}


@dataclass(frozen=True)
class ApprovalChoice:
    """What the operator chose in the approval dialog: approve (with a comment) or reject
    (with a reason). The cockpit turns it into a `core.domain.decisions.Decision`."""

    verb: Literal[Verb.APPROVE, Verb.REJECT]
    text: str = ""


def plan_text(plan: dict[str, Any] | None, raw: str) -> Text:
    """The plan as the approver reads it: risk, files, steps, rationale."""
    if plan is None:
        return literal(raw or "(no plan stored)", multiline=True)
    out = Text()
    risk = str(plan.get("risk", "?"))
    out.append("risk   ", style="bold")
    out.append(literal(risk.upper(), style=RISK_STYLE.get(risk, "bold")))
    out.append("\nfiles  ", style="bold")
    files = [str(f) for f in plan.get("files") or []]
    out.append(literal("\n       ".join(files) if files else "(none)", multiline=True))
    out.append("\nsteps\n", style="bold")
    for i, step in enumerate(plan.get("steps") or [], 1):
        out.append(f"  {i}. ")
        out.append(literal(str(step)))
        out.append("\n")
    if plan.get("rationale"):
        out.append("why this plan, and this risk\n", style="bold")
        out.append("       ")
        out.append(literal(str(plan["rationale"]), multiline=True))
    return out


def task_text(task: Task) -> Text:
    """The task as it was filed: what the plan answers."""
    out = Text()
    out.append("task   ", style="bold")
    out.append(literal(task.description or "(no description filed)", multiline=True))
    out.append("\n")
    return out


def spec_text(found: ApprovalEvidence) -> Text:
    """The spec the plan serves: its summary and acceptance criteria."""
    out = Text()
    if found.spec is None:
        return out
    out.append("spec   ", style="bold")
    out.append(literal(found.spec.summary, multiline=True))
    for criterion in found.spec.acceptance_criteria:
        out.append("\n  ✓ ")
        out.append(literal(criterion))
    out.append("\n")
    return out


def past_text(found: ApprovalEvidence) -> Text:
    """What is behind and ahead of the plan: its SHA-256 (what an approval binds to), the
    earlier rejections and answers, and the cost of the stages left."""
    out = Text()
    if found.plan_sha256:
        out.append("plan   ", style="bold")
        out.append(found.plan_sha256)
    for rejected in found.rejections:
        out.append("\nrejected ", style="bold")
        out.append(literal(rejected))
    for answer in found.answers:
        out.append("\nanswered ", style="bold")
        out.append(literal(answer))
    out.append("\ncost   ", style="bold")
    out.append(literal(found.estimate_line()))
    out.append("\n")
    return out


def parse_plan(raw: str) -> dict[str, Any] | None:
    try:
        plan = json.loads(raw)
    except ValueError:
        return None
    return plan if isinstance(plan, dict) else None


def failing_text(failing: Sequence[str]) -> Text:
    """The failing checks' lines (`core.domain.check_text.failing_checks`) under a heading."""
    out = Text("\nfailing checks — the last lines of each\n", style="bold red")
    out.append(literal("\n".join(failing), multiline=True))
    return out


def _title(task: Task, before: str, after: str = "") -> Text:
    out = Text(before, style="bold")
    out.append(literal(task.title))
    out.append(after)
    return out


class ApprovalDialog(T25Dialog[ApprovalChoice | None]):
    """A plan waiting for a human: the task as filed, the plan and why its risk is what it
    is. `a` (or Approve) approves, with the comment typed; `r` (or Reject…) asks for the
    reason in a dialog of its own, since a rejection discards the plan. Enter in the comment
    only moves to Approve: no key typed into a field decides."""

    BINDINGS = bindings(Node.APPROVAL)

    def __init__(self, task: Task, plan_raw: str, evidence: ApprovalEvidence | None = None) -> None:
        super().__init__(classes="dialog")
        self.task_ = task
        self.plan_raw = plan_raw
        self.evidence = evidence

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(
                _title(self.task_, f"Approve the plan of {self.task_.id}: "), classes="dialog-title"
            )
            with VerticalScroll(classes="dialog-body"):
                yield Static(task_text(self.task_), id="task")
                if self.evidence is not None:
                    yield Static(spec_text(self.evidence), id="spec")
                    yield Static(past_text(self.evidence), id="past")
                yield Static(plan_text(parse_plan(self.plan_raw), self.plan_raw), id="plan")
            yield Input(
                placeholder="a comment to approve with (optional) — enter moves to Approve",
                id="comment",
                compact=True,
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Approve", id="approve", variant="success", compact=True)
                yield Button("Reject…", id="reject", variant="error", compact=True)
            keys = self.keymap
            yield Label(
                f"{keys.first('approval.approve')} approve · {keys.first('approval.reject')} "
                f"reject (asks why) · tab moves · {keys.first('close')} close",
                classes="dialog-keys",
            )

    def _comment(self) -> str:
        return self.query_one("#comment", Input).value.strip()

    def action_approve(self) -> None:
        self.dismiss(ApprovalChoice(Verb.APPROVE, self._comment()))

    def action_reject(self) -> None:
        """The reason, asked in its own dialog (the comment typed, if any, starts it)."""

        def given(reason: str | None) -> None:
            if reason:
                self.dismiss(ApprovalChoice(Verb.REJECT, reason))

        self.app.push_screen(RejectDialog(self.task_, self._comment()), given)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#approve").focus()  # a comment typed decides nothing by itself

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "approve":
            self.action_approve()
        else:
            self.action_reject()


class RejectDialog(T25Dialog[str | None]):
    """Why a plan is rejected: the planner reads it and draws a new plan, and the plan
    shown is discarded. Only the Reject button sends it; enter in the reason moves there."""

    BINDINGS = bindings(Node.ANSWER)

    def __init__(self, task: Task, draft: str = "") -> None:
        super().__init__(classes="dialog")
        self.task_ = task
        self.draft = draft

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box small"):
            yield Label(
                _title(self.task_, f"Reject the plan of {self.task_.id}: "),
                classes="dialog-title",
            )
            yield Static(
                "The plan is discarded and the planner draws a new one from your reason. "
                "There is no undo.",
                classes="dialog-body",
            )
            yield Input(
                self.draft,
                placeholder="why reject? (the planner reads it) — enter moves to Reject",
                id="reason",
                compact=True,
            )
            yield Static("", id="refusal")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Reject the plan", id="reject", variant="error", compact=True)
                yield Button("Back", id="back", compact=True)
            yield Label(
                f"tab to Reject the plan, enter presses it · {self.keymap.first('close')} back",
                classes="dialog-keys",
            )

    def on_mount(self) -> None:
        self.query_one("#refusal").display = False
        self.query_one("#reason").focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#reject").focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "back":
            self.dismiss(None)
            return
        reason = self.query_one("#reason", Input).value.strip()
        if reason:
            self.dismiss(reason)
            return
        refusal = self.query_one("#refusal", Static)
        refusal.update("a rejection needs a reason: the planner reads it")
        refusal.display = True
        self.query_one("#reason").focus()


class AnswerDialog(T25Dialog[str | None]):
    """A NEEDS_INPUT task's question and a line to answer it."""

    BINDINGS = bindings(Node.ANSWER)

    def __init__(self, task: Task, question: str, failing: Sequence[str] = ()) -> None:
        super().__init__(classes="dialog")
        self.task_ = task
        self.question = question
        self.failing = tuple(failing)  # the failing checks' last lines, when checks failed

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(
                _title(
                    self.task_,
                    f"{self.task_.id} asks: ",
                    f" ({self.task_.resume_state or 'its stage'} is waiting)",
                ),
                classes="dialog-title",
            )
            with VerticalScroll(classes="dialog-body"):
                yield Static(
                    literal(self.question or "(no question recorded)", multiline=True),
                    id="question",
                )
                if self.failing:
                    yield Static(failing_text(self.failing), id="failing")
            yield Input(placeholder="your answer — enter sends it", id="answer", compact=True)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Send", id="send", variant="primary", compact=True)
            yield Label(
                f"enter send · tab to the button · {self.keymap.first('close')} close",
                classes="dialog-keys",
            )

    def on_mount(self) -> None:
        self.query_one("#answer").focus()

    def _send(self) -> None:
        answer = self.query_one("#answer", Input).value.strip()
        if answer:
            self.dismiss(answer)
        else:
            self.query_one("#answer").focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._send()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self._send()


class ConfirmDialog(T25Dialog[str | None]):
    """Yes or no, with an optional reason for the audit log; dismisses with the reason."""

    BINDINGS = bindings(Node.CONFIRM)

    def __init__(self, question: str, *, reason: bool = False, body: Sequence[str] = ()) -> None:
        super().__init__(classes="dialog")
        self.question = question
        self.with_reason = reason
        self.body = tuple(body)  # what the question is about (a retry: the error), if anything

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box small"):
            yield Static(Text(self.question), classes="dialog-title")
            if self.body:
                with VerticalScroll(classes="dialog-body"):
                    yield Static(literal("\n".join(self.body), multiline=True), id="about")
            if self.with_reason:
                yield Input(
                    placeholder="reason (kept in the audit log) — enter moves to Yes",
                    id="reason",
                    compact=True,
                )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Yes", id="yes", variant="primary", compact=True)
                yield Button("No", id="no", compact=True)
            yield Label(self.keys_line(), classes="dialog-keys")

    def keys_line(self) -> str:
        """The reminder of the dialog's keys, as they are in effect."""
        keys = self.keymap
        if self.with_reason:
            return (
                f"enter in the reason moves to Yes, enter there says yes · {keys.first('close')} no"
            )
        return f"{keys.first('confirm.yes')} yes · {keys.first('confirm.no')} no"

    def on_mount(self) -> None:
        if self.with_reason:
            self.query_one("#reason").focus()

    def action_yes(self) -> None:
        self.dismiss(self.query_one("#reason", Input).value.strip() if self.with_reason else "")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#yes").focus()  # a reason typed decides nothing by itself

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "yes":
            self.action_yes()
        else:
            self.dismiss(None)


class MergeDialog(ConfirmDialog):
    """The merge question: what the merge would take (`MergeEvidence`), yes or no, and a
    key for the diff it would merge. The diff screen opens above the question; leaving it
    comes back here, still asking."""

    BINDINGS = bindings(Node.MERGE)

    def __init__(self, control: Operations, task_id: str, clock: Clock, question: str) -> None:
        super().__init__(question)
        self.control = control
        self.task_id = task_id
        self.clock = clock

    def keys_line(self) -> str:
        return f"{super().keys_line()} · {self.keymap.first('merge.diff')} the diff"

    @work(group="diff", exclusive=True, exit_on_error=False)
    async def action_diff(self) -> None:
        """The task's diff on its own screen, pushed once it is read (as from the detail)."""
        from t25_tui.tui.screens.diff import diff_screen

        self.app.push_screen(await diff_screen(self.control, self.task_id, self.clock))


class MessageDialog(T25Dialog[None]):
    """Says why something was refused, and waits to be read."""

    BINDINGS = bindings(Node.MESSAGE)

    def __init__(self, title: str, body: str) -> None:
        super().__init__(classes="dialog")
        self.title_ = title
        self.body = body

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box small"):
            yield Label(literal(self.title_), classes="dialog-title")
            yield Static(literal(self.body, multiline=True), id="message-body")
            yield Label(f"{self.keymap.first('message.close')} close", classes="dialog-keys")


def reset_stages(task: Task) -> list[TaskState]:
    """The stages a reset may take `task` back to: working stages at or before where it
    stands, that ran an agent (PR_OPEN is T25's own)."""
    fits: list[TaskState] = []
    for stage in WORKING:
        try:
            assert_reset(task.state, stage, resume_state=task.resume_state)
        except IllegalTransition:
            continue
        if stage is not TaskState.PR_OPEN:
            fits.append(stage)
    return fits


@dataclass(frozen=True)
class ResetChoice:
    """Where the operator sends a task back (`t25 reset ID --to STAGE`), and why."""

    stage: TaskState
    reason: str


class ResetDialog(T25Dialog[ResetChoice | None]):
    """Back to a stage the task passed: its branch goes back to where that stage began (the
    old head kept under refs/t25/archive/), and the reason reaches the agent."""

    BINDINGS = bindings(Node.ANSWER)

    def __init__(self, task: Task, stages: list[TaskState]) -> None:
        super().__init__(classes="dialog")
        self.task_ = task
        self.stages = stages

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box small"):
            yield Label(
                _title(self.task_, f"Reset {self.task_.id} to an earlier stage: ", ""),
                classes="dialog-title",
            )
            yield Static(
                "Its runs going on stop, what QA and review decided is forgotten, and the "
                "branch goes back to where the stage began (the old head is kept under "
                f"refs/t25/archive/{self.task_.id}/).",
                classes="dialog-body",
            )
            yield Select(
                [(stage.value, stage) for stage in self.stages],
                allow_blank=False,
                compact=True,
                value=self.stages[-1],
                id="stage",
            )
            yield Input(
                placeholder="reason (the agent reads it; kept in the audit log) — enter moves to Reset",
                id="reason",
                compact=True,
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Reset", id="reset", variant="warning", compact=True)
            yield Label(
                f"tab between fields · enter on Reset resets · {self.keymap.first('close')} close",
                classes="dialog-keys",
            )

    def on_mount(self) -> None:
        self.query_one("#stage").focus()

    def _reset(self) -> None:
        stage = self.query_one("#stage", Select).value
        reason = self.query_one("#reason", Input).value.strip()
        if isinstance(stage, TaskState):
            self.dismiss(ResetChoice(stage, reason))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#reset").focus()  # a reason typed decides nothing by itself

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self._reset()
