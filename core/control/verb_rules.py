"""The rules of the operator's verbs: whether a decision fits its task as it is now
(PolicyRefused, saying what fits instead), and what it then does to it (`Ruling`).

Pure functions of the task and the decision; the control plane (core.control.service)
reads what they need (the plan, the spend) and hands it in.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.control.policies import merge_refusal, unnamed_protected
from core.domain.cost import Spend, raised_budget
from core.domain.decisions import Decision
from core.domain.models import Budget, Task, TaskState, TaskType
from core.domain.states import TERMINAL, assert_transition
from core.domain.text import printable
from core.errors import PolicyRefused

if TYPE_CHECKING:
    from core.workspace.trial_merge import TrialMerge

# Where a task outside a working stage picks up again after NEEDS_INPUT or FAILED.
RESUME_FROM = {TaskState.RECEIVED: TaskState.SPEC, TaskState.AWAITING_APPROVAL: TaskState.PLAN}
ARCHIVABLE = frozenset({TaskState.DONE, TaskState.CANCELLED, TaskState.FAILED})


@dataclass(frozen=True)
class Ruling:
    """What a decision that passed its check does to its task."""

    bound_to: str | None = None  # what it was made on (an approval: the plan's `sha256:…`)
    to: TaskState | None = None  # the state it moves the task to; None: fields only
    why: str = ""  # the state change's reason
    fields: dict[str, Any] = field(default_factory=dict)
    enqueue: bool = False  # queue the run of the stage it moves the task into
    cancel_runs: bool = False  # end the task's runs
    merge: TrialMerge | None = None  # land this tried merge first (git: outside the store)
    cleans: bool = False  # remove the task's worktree after
    reset: bool = False  # `to` is a stage the task goes back to (assert_reset)
    # The words the audit line and the announcement record, when more than the decision's
    # own (a merge adds the protected paths it named).
    recorded: str | None = None

    def reason(self, decision: Decision) -> str:
        return decision.text if self.recorded is None else self.recorded


# Where a task has not started implementing: its title and description may still change.
_BEFORE_IMPLEMENTING = frozenset(
    {TaskState.RECEIVED, TaskState.SPEC, TaskState.PLAN, TaskState.AWAITING_APPROVAL}
)


def edit_ruling(task: Task, decision: Decision) -> Ruling:
    """An operator's edit: the priority while the task is not finished; the title and the
    description until it starts implementing; the type (its branch's name) before its first
    run. Recorded as what changed, from what to what."""
    if task.state in TERMINAL or task.archived:
        raise PolicyRefused(
            f"{task.id} is {task.state}{' and archived' if task.archived else ''}; "
            "a finished task is not edited",
            hint="file a new task: t25 task new",
        )
    where = (
        task.resume_state if task.state in (TaskState.NEEDS_INPUT, TaskState.FAILED) else task.state
    )
    changes = {k: v for k, v in decision.changes.items() if getattr(task, k) != v}
    words = [k for k in ("title", "description") if k in changes]
    if words and where not in _BEFORE_IMPLEMENTING:
        raise PolicyRefused(
            f"{task.id} has started implementing ({task.state}); its {' and '.join(words)} "
            "no longer change",
            hint=f"t25 reset {task.id} --to PLAN, then edit it; or file a new task",
        )
    if "type" in changes and task.state is not TaskState.RECEIVED:
        raise PolicyRefused(
            f"{task.id} is {task.state}: its branch {task.branch} exists, and its type names it",
            hint="file a new task of the type you want",
        )
    said = (
        "; ".join(f"{k}: {shown(getattr(task, k))} → {shown(v)}" for k, v in changes.items())
        or "nothing changed"
    )
    return Ruling(fields=changes, recorded=f"{said}: {decision.text}" if decision.text else said)


def shown(value: object) -> str:
    """A field's value in an edit's audit line: short, one line."""
    if isinstance(value, int):
        return str(value)
    if isinstance(value, TaskType):
        value = value.value
    shown = printable(str(value)).replace("\n", " ")
    return repr(shown if len(shown) <= 60 else shown[:59] + "…")


def plan_summary(content: bytes) -> str:
    """What a stored plan says it does, in one line: its steps, its risk."""
    try:
        plan = json.loads(content)
        steps = "; ".join(str(step) for step in plan.get("steps", []))
    except (ValueError, AttributeError):
        return "unreadable"
    line = printable(" ".join(f"{plan.get('risk', '?')} risk: {steps}".split()))
    return line if len(line) <= 200 else line[:199] + "…"


def raised_fields(task: Task, decision: Decision, spend: Spend | None) -> dict[str, Any]:
    """The budget an answer raises (fields of the task): an answer to a task whose budget,
    or whose next role's, is spent must name a new one above the spend, or it is refused."""
    if spend is None:
        return {}
    usd, tokens = raised_budget(decision.text)
    after = spend.model_copy(
        update={
            "budget_usd": spend.budget_usd if usd is None else usd,
            "budget_tokens": spend.budget_tokens if tokens is None else tokens,
        }
    )
    if after.reached:
        raise PolicyRefused(
            f"{task.id} has spent {spend.line()}; an answer must name a budget above that "
            "to let it go on",
            hint=f't25 answer {task.id} "budget ${suggest(spend.usd, spend.budget_usd)}" '
            f'(or "budget {suggest_tokens(spend)} tokens"), or t25 cancel {task.id}',
        )
    named = {k: v for k, v in (("usd", usd), ("tokens", tokens)) if v is not None}
    if spend.role:  # that role's budget for this task, not the task's
        own = task.role_budgets.get(spend.role) or Budget()
        return {"role_budgets": {**task.role_budgets, spend.role: own.model_copy(update=named)}}
    return {f"budget_{k}": v for k, v in named.items()}


def suggest(spent: float, budget: float | None) -> str:
    """A round budget above `spent`: double the old one, or twice the spend."""
    return f"{max(2 * (budget or 0), 2 * spent, 1.0):.0f}"


def suggest_tokens(spend: Spend) -> str:
    return f"{max(2 * (spend.budget_tokens or 0), 2 * spend.tokens, 1_000_000):,}"


def expect_state(task: Task, state: TaskState, done: str) -> None:
    """Refuse a decision on a task that is not in `state`, saying what would fit."""
    if task.state is not state:
        raise PolicyRefused(
            f"{task.id} is {task.state}; only a task in {state} can be {done}",
            hint=what_fits(task),
        )


def resumed(task: Task) -> TaskState:
    """The stage a NEEDS_INPUT or FAILED task goes back to (IllegalTransition if none)."""
    stage = task.resume_state or TaskState.SPEC
    assert_transition(task.state, stage, resume_state=task.resume_state)
    return stage


def not_held(task: Task, done: str) -> None:
    """Refuse while what a run changed outside its worktree - or what changed while it
    ran - waits for a human to acknowledge it."""
    if task.violation is not None:
        raise PolicyRefused(
            f"{task.id} cannot be {done} until what changed outside its worktree is "
            f"acknowledged: {task.violation}",
            hint=f't25 acknowledge {task.id} --reason "what you checked"',
        )


def protected_named(task: Task, decision: Decision) -> None:
    """Refuse a merge that does not name each protected path the task touches."""
    unnamed = unnamed_protected(task, decision.allow_paths)
    if unnamed:
        shown = ", ".join(printable(p) for p in unnamed)
        named = " ".join(f"--allow-path {shlex.quote(printable(p))}" for p in task.protected_paths)
        raise PolicyRefused(
            f"{task.id} touches protected paths (policies.protected_paths) that the merge "
            f"does not name: {shown}",
            hint=f"read the change (t25 task show {task.id}), then: t25 merge {task.id} {named}",
        )


def with_protected(task: Task, text: str) -> str | None:
    """A merge's words as recorded: the operator's, and the protected paths it named."""
    if not task.protected_paths:
        return None
    named = "protected paths: " + ", ".join(printable(p) for p in task.protected_paths)
    return f"{text}; {named}" if text else named


def mergeable(task: Task) -> None:
    review = task.review_verdict == "approve" if task.review_verdict else None
    refusal = merge_refusal(task, checks_passed=task.checks_passed, review_approved=review)
    if refusal:
        raise PolicyRefused(
            f"{task.id} cannot be merged: {refusal}",
            hint=f"t25 archive {task.id}"
            if task.merged and not task.archived
            else f"t25 task show {task.id}",
        )


def retriable(task: Task) -> None:
    not_held(task, "retried")
    if task.state is not TaskState.FAILED:
        raise PolicyRefused(
            f"{task.id} is {task.state}; only a FAILED task can be retried", hint=what_fits(task)
        )


def recheckable(task: Task) -> None:
    if task.state is not TaskState.DONE or task.merged or task.archived:
        raise PolicyRefused(
            f"{task.id} is {task.state}{' and merged' if task.merged else ''}"
            f"{' and archived' if task.archived else ''}; only a DONE task that is not merged "
            "can be sent back through QA and review",
            hint=what_fits(task),
        )


def acknowledgeable(task: Task) -> None:
    if task.violation is None:
        raise PolicyRefused(f"{task.id} has no violation to acknowledge", hint=what_fits(task))


def cancellable(task: Task) -> None:
    if task.state in TERMINAL:
        raise PolicyRefused(
            f"{task.id} is already {task.state}; there is nothing to cancel",
            hint=f"t25 archive {task.id} takes it off the board"
            if not task.archived
            else f"t25 task show {task.id}",
        )


def archivable(task: Task) -> None:
    if task.archived:
        raise PolicyRefused(
            f"{task.id} is already archived", hint="t25 task list --all shows archived tasks"
        )
    if task.state not in ARCHIVABLE:
        raise PolicyRefused(
            f"{task.id} is {task.state}; only DONE, FAILED or CANCELLED tasks can be archived",
            hint=f"cancel it first: t25 cancel {task.id}",
        )


def what_fits(task: Task) -> str:
    """For a refusal: the command that fits the task as it is now."""
    if task.state is TaskState.AWAITING_APPROVAL:
        return f't25 approve {task.id}, or t25 reject {task.id} --reason "…"'
    if task.state is TaskState.NEEDS_INPUT:
        return f't25 answer {task.id} "…" answers its question'
    if task.violation is not None:
        return f't25 acknowledge {task.id} --reason "…" first: a run broke the invariant'
    if task.state is TaskState.FAILED:
        return f"t25 retry {task.id} runs its stage again"
    return f"t25 task show {task.id} shows where it is"
