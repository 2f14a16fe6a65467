"""The cockpit's operator decisions: each asks in a dialog (its reason, its second question for
protected paths), then calls the control plane through `act`, which shows a refusal with its
reason and never swallows it. `T25App` takes these as a mixin: the keys and the palette bind
their `action_*` by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual import work

from core.domain import decisions
from core.domain.check_text import failing_checks, failure_lines
from core.domain.models import Task, TaskState
from core.domain.text import printable
from core.domain.verbs import VERBS, Dialog, Verb
from core.errors import T25Error
from core.ports import Operations
from t25_tui.tui.cards import Card, Clock, human_needed
from t25_tui.tui.merge_flow import merge_now, protected_question
from t25_tui.tui.screens.base import Cockpit
from t25_tui.tui.screens.dialogs import (
    AnswerDialog,
    ApprovalChoice,
    ApprovalDialog,
    ConfirmDialog,
    MergeDialog,
    MessageDialog,
    ResetChoice,
    ResetDialog,
    reset_stages,
)
from t25_tui.tui.screens.new_task import NewTaskDialog, NewTaskRequest


class DecisionFlows(Cockpit):
    """The operator's decisions from the cockpit, on the task `_need_task` names."""

    control: Operations
    actor: str
    clock: Clock
    cards: list[Card]
    select_next: str | None

    def _need_task(self) -> str | None:
        raise NotImplementedError  # T25App: the selected task, or a bell and a word why

    def status(self, note: str) -> None:
        raise NotImplementedError  # T25App: the status line

    def schedule_refresh(self) -> None:
        raise NotImplementedError  # T25App: the board read again soon

    @work(group="actions", exit_on_error=False)
    async def act(
        self,
        verb: str,
        call: Callable[[], Any],
        refused: Callable[[str], None] | None = None,
        done: Callable[[Any], None] | None = None,
    ) -> None:
        """Run one ControlPlane call; a refusal is shown with its reason, never swallowed
        (by `refused`, when the caller has a better place for it than a message)."""
        try:
            task = await call()
        except T25Error as exc:
            body = exc.message + (f"\n\nhint: {exc.hint}" if exc.hint else "")
            if refused is not None:
                refused(body)
            else:
                self.push_screen(MessageDialog(f"{verb.capitalize()} refused", body))
            return
        tid = getattr(task, "id", "")
        if done is not None:
            done(task)
        self.status(f"{verb}: {tid} is {getattr(task, 'state', '')}")
        self.schedule_refresh()

    def action_new_task(self, draft: NewTaskRequest | None = None, refusal: str = "") -> None:
        """The New task dialog; a draft the control plane refuses comes back in it, with the reason."""
        projects = [p.name for p in self.control.config.projects]

        def filed(req: NewTaskRequest | None) -> None:
            if req:
                self.act(
                    "new task",
                    lambda: self.control.new_task(
                        req.title,
                        actor=self.actor,
                        type=req.type,
                        description=req.description,
                        project=req.project,
                        priority=req.priority,
                        after=req.after,
                    ),
                    refused=lambda why: self.action_new_task(req, why),
                    done=self._select_filed,
                )

        self.push_screen(NewTaskDialog(projects, draft=draft, refusal=refusal), filed)

    def _select_filed(self, task: Task) -> None:
        """A task just filed is the one selected, once the board shows it."""
        self.select_next = task.id

    @work(group="actions", exit_on_error=False)
    async def _edit_task(
        self, tid: str, draft: NewTaskRequest | None = None, refusal: str = ""
    ) -> None:
        """The task's fields in the New task dialog; what was changed is one edit decision
        (`t25 task edit`), refused by the core with the reason where it may not change."""
        task = await self.control.task(tid)
        shown = draft or NewTaskRequest(
            task.title, task.type, task.description, task.project, task.priority, task.after
        )

        def saved(req: NewTaskRequest | None) -> None:
            if req is None:
                return
            wanted: dict[str, str | int] = {
                "title": req.title,
                "type": req.type.value,
                "description": req.description,
                "priority": req.priority,
            }
            changes = {k: v for k, v in wanted.items() if getattr(task, k) != v}
            if not changes:
                self.status(f"{tid}: nothing changed")
                return
            decision = decisions.Decision(
                verb=Verb.EDIT, task=tid, actor=self.actor, changes=changes
            )
            self.act(
                "edit",
                lambda: self.control.decide(decision),
                refused=lambda why: self._edit_task(tid, req, why),
            )

        projects = [p.name for p in self.control.config.projects]
        dialog = NewTaskDialog(projects, draft=shown, refusal=refusal, editing=tid)
        self.push_screen(dialog, saved)

    def action_verb(self, name: str) -> None:
        """A verb's command (t25_tui.tui.commands.verb_commands): asked as its row says."""
        spec = VERBS[Verb(name)]
        if spec.dialog is Dialog.DECIDE:
            self.action_decide()
        elif tid := self._need_task():
            match spec.dialog:
                case Dialog.CONFIRM:
                    about = self._why_it_failed if spec.shows_failure else None
                    self._confirm_with_reason(spec.verb, spec.question, about)
                case Dialog.MERGE:
                    self._merge(tid)
                case Dialog.RESET:
                    self._reset(tid)
                case Dialog.EDIT:
                    self._edit_task(tid)

    def action_decide(self) -> None:
        if tid := self._need_task():
            self._decide(tid)

    @work(group="actions", exit_on_error=False)
    async def _decide(self, tid: str) -> None:
        """The decide dialog the task's state asks for, read once: a plan's approval from
        its evidence (the plan as the approval binds to it), a question with its checks."""
        f = self.control
        task = await f.task(tid)
        if task.state is TaskState.AWAITING_APPROVAL:
            evidence = await f.approval_evidence(tid)
            # The approval is bound to the plan shown: refused if it changed meanwhile.
            shown = evidence.plan_sha256

            def decided(choice: ApprovalChoice | None) -> None:
                if choice is not None:
                    approving = choice.verb is Verb.APPROVE
                    self.decide(
                        choice.verb, tid, choice.text, bound_to=shown if approving else None
                    )

            self.push_screen(ApprovalDialog(task, evidence.plan_text, evidence), decided)
        elif task.state is TaskState.NEEDS_INPUT:
            detail = await f.detail(tid)

            def answered(text: str | None) -> None:
                if text:
                    self.decide(Verb.ANSWER, tid, text)

            failing = failing_checks(detail.checks) if task.checks_passed is False else []
            question = detail.question or task.error or ""
            self.push_screen(AnswerDialog(detail.task, question, failing), answered)
        else:
            self._decide_without_a_dialog(task)

    def _decide_without_a_dialog(self, task: Task) -> None:
        """A DONE task is merged, a FAILED one retried, or its violation acknowledged first
        (each asks first); otherwise the status line says why there is nothing to decide."""
        if task.state is TaskState.DONE and not task.merged:
            self.action_verb(Verb.MERGE)
        elif task.violation:
            self._confirm_with_reason(
                Verb.ACKNOWLEDGE,
                "{tid}: something changed outside its worktree while a run went on, "
                "unconfined: "
                + (task.violation or "").replace("{", "{{").replace("}", "}}")
                + ". Yours, or seen to? Acknowledge "
                "it (say what you checked); retry and merge wait for this. To drop the "
                "run's work instead, reset the task (t25 reset).",
            )
        elif task.state is TaskState.FAILED:
            self.action_verb(Verb.RETRY)
        else:
            why = human_needed(task) or "working"
            self.status(f"{task.id} is {task.state}: nothing to decide ({why})")

    def decide(
        self,
        verb: Verb,
        tid: str,
        text: str = "",
        *,
        bound_to: str | None = None,
        allow_paths: tuple[str, ...] = (),
        stage: TaskState | None = None,
    ) -> None:
        """Hand one operator decision to the control plane, as the command line does."""
        decision = decisions.Decision(
            verb=verb,
            task=tid,
            actor=self.actor,
            text=text,
            bound_to=bound_to,
            allow_paths=allow_paths,
            stage=stage,
        )
        self.act(verb.value, lambda: self.control.decide(decision))

    @work(group="actions", exit_on_error=False)
    async def _merge(self, tid: str) -> None:
        """Ask, showing what the merge would take (`merge_evidence`: the commits, the diff
        stat, the checks, the review rounds, the reviewed head), then merge."""
        found = await self.control.merge_evidence(tid)
        # The protected paths the change touches: listed in the question, and named by the
        # merge when the operator says yes (T25 refuses, listing them, if the task has
        # touched others since).
        protected = found.protected_paths
        question = (
            f"Merge {tid}? T25 refuses, with the reason, unless its checks passed and review "
            "approved.\n\n" + "\n".join(found.lines())
        )
        if protected:
            listed = "\n".join(f"  {printable(p)}" for p in protected)
            question += (
                f"\n\nIt touches {len(protected)} protected path(s) "
                f"(policies.protected_paths); yes asks once more, naming each of them:\n{listed}"
            )

        def confirmed(reason: str | None) -> None:
            if reason is None:
                return
            if not protected:
                self.merge_now(tid, reason, ())
                return

            def named(yes: str | None) -> None:
                if yes is not None:
                    self.merge_now(tid, reason, protected)

            self.push_screen(ConfirmDialog(protected_question(tid, protected)), named)

        self.push_screen(MergeDialog(self.control, tid, self.clock, question), confirmed)

    def merge_now(self, tid: str, reason: str, protected: tuple[str, ...]) -> None:
        """The merge itself, its progress and its result on the status line."""
        self.run_worker(
            merge_now(self, tid, reason, protected),
            name="merge",
            group="actions",
            exit_on_error=False,
        )

    def _confirm_with_reason(
        self, verb: Verb, question: str, body: Callable[[str], list[str]] | None = None
    ) -> None:
        """Ask `question` ({tid}: the task), with a reason to give; yes decides `verb`."""
        if not (tid := self._need_task()):
            return

        def confirmed(reason: str | None) -> None:
            if reason is not None:
                self.decide(verb, tid, reason)

        about = body(tid) if body else []
        dialog = ConfirmDialog(question.format(tid=tid), reason=True, body=about)
        self.push_screen(dialog, confirmed)

    def _why_it_failed(self, tid: str) -> list[str]:
        """The error of the task as the board last read it: what a retry would go past."""
        task = next((c.task for c in self.cards if c.id == tid), None)
        return failure_lines(task.error if task else None)

    @work(group="actions", exit_on_error=False)
    async def _reset(self, tid: str) -> None:
        """Ask where to (the stages `t25 reset` would take) and why, then reset."""
        task = await self.control.task(tid)
        stages = reset_stages(task)
        if not stages or task.merged or task.archived:
            self.bell()
            self.status(f"{task.id} is {task.state}: no stage to reset it to")
            return

        def chosen(choice: ResetChoice | None) -> None:
            if choice is not None:
                self.decide(Verb.RESET, tid, choice.reason, stage=choice.stage)

        self.push_screen(ResetDialog(task, stages), chosen)
