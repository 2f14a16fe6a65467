"""What each operator verb does to its task: `RULES`, one rule per verb.

A rule is handed the task as it is now (read under the audit log's writer) and the decision,
and returns the `Ruling` the control plane records and applies, or refuses (PolicyRefused,
saying what fits instead). The pure checks are core.control.verb_rules'; a rule reads what
it needs (the plan, the spend, the stage's first run) through `RuleReads`, which the control
plane is. A new verb's rule is a function here and its row in `RULES`; its faces come from
its row in core.domain.verbs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from core.control.merge_record import may_merge
from core.control.task_events import events_of_kinds
from core.control.verb_rules import (
    Ruling,
    acknowledgeable,
    archivable,
    cancellable,
    edit_ruling,
    expect_state,
    not_held,
    plan_summary,
    raised_fields,
    recheckable,
    resumed,
    retriable,
    what_fits,
    with_protected,
)
from core.domain.cost import Spend
from core.domain.decisions import Decision
from core.domain.events import DecisionRecorded, RunStarted
from core.domain.models import ArtifactKind, Task, TaskState
from core.domain.states import STAGE_ROLE, TERMINAL, assert_reset
from core.domain.verbs import Verb
from core.errors import IllegalTransition, MergeRefused, PolicyRefused
from core.ports import Store

if TYPE_CHECKING:
    from core.control.keyring import Keyring
    from core.workspace.trial_merge import TrialMerge
    from core.workspace.worktrees import Worktrees


class RuleReads(Protocol):
    """What a rule reads beyond the task: the control plane."""

    @property
    def store(self) -> Store: ...

    @property
    def keys(self) -> Keyring: ...

    def worktrees(self, project: str) -> Worktrees: ...

    async def budget_reached(self, task: Task, role: str | None) -> Spend | None: ...


Rule = Callable[[RuleReads, Task, Decision, "TrialMerge | None"], Awaitable[Ruling]]


async def approve(reads: RuleReads, task: Task, decision: Decision, _: TrialMerge | None) -> Ruling:
    """Bound to the SHA-256 of the newest plan, re-hashed as it is read; one made on a plan
    that has changed since (`decision.bound_to`) is refused."""
    expect_state(task, TaskState.AWAITING_APPROVAL, "approved")
    plans = [
        a
        for a in await reads.store.list_artifacts(task_id=task.id)
        if a.meta.kind is ArtifactKind.PLAN
    ]
    if not plans:
        raise PolicyRefused(f"{task.id} has no plan to approve", hint=f"t25 task show {task.id}")
    artifact, content = await reads.store.get_artifact(plans[-1].id)  # re-hashed on reading
    plan = f"sha256:{artifact.sha256}"
    if decision.bound_to is not None and decision.bound_to != plan:
        raise PolicyRefused(
            f"the plan of {task.id} changed since it was shown ({decision.bound_to}); "
            f"it is now {plan}: {plan_summary(content)}",
            hint=f"read the new plan (t25 task show {task.id}) and decide again",
        )
    why = f"plan {plan} approved" + (f": {decision.text}" if decision.text else "")
    return Ruling(
        bound_to=plan,
        to=TaskState.IMPLEMENTING,
        why=why,
        fields={"approved_plan_sha": artifact.sha256},
        enqueue=True,
    )


async def reject(_: RuleReads, task: Task, decision: Decision, __: TrialMerge | None) -> Ruling:
    expect_state(task, TaskState.AWAITING_APPROVAL, "rejected")
    return Ruling(to=TaskState.PLAN, why=decision.text, enqueue=True)


async def answer(reads: RuleReads, task: Task, decision: Decision, _: TrialMerge | None) -> Ruling:
    """The task resumes where it asked; a budget it had reached is raised as the answer says."""
    expect_state(task, TaskState.NEEDS_INPUT, "answered")
    stage = task.resume_state
    role = STAGE_ROLE.get(stage) if stage else None
    raised = raised_fields(task, decision, await reads.budget_reached(task, role))
    return Ruling(to=resumed(task), why="operator answered", fields=raised, enqueue=True)


async def merge(
    reads: RuleReads, task: Task, decision: Decision, trial: TrialMerge | None
) -> Ruling:
    """Lands `trial`, the merge tried for it, if the branch is still where it was tried."""
    await may_merge(reads.store, reads.keys, task, decision)
    worktrees = reads.worktrees(task.project)
    await worktrees.merges.moved_since_review(task)  # before any line
    if trial is None or await worktrees.tip(task) != trial.tip:
        raise MergeRefused(f"{task.branch} moved while its merge was tried", hint="merge again")
    reviewed = f"commit:{task.reviewed_head}" if task.reviewed_head else None
    return Ruling(
        fields={"merged": True},
        merge=trial,
        cleans=True,
        bound_to=reviewed,
        recorded=with_protected(task, decision.text),
    )


async def cancel(_: RuleReads, task: Task, decision: Decision, __: TrialMerge | None) -> Ruling:
    cancellable(task)
    return Ruling(to=TaskState.CANCELLED, why=decision.text, cancel_runs=True)


async def retry(reads: RuleReads, task: Task, decision: Decision, _: TrialMerge | None) -> Ruling:
    """Back to the stage that failed; an implementation not on the failed change."""
    retriable(task)
    fields: dict[str, Any] = {"error": None}
    if task.resume_state is TaskState.IMPLEMENTING:
        fields["rewind_to"] = await stage_start(reads.store, task, TaskState.IMPLEMENTING)
    return Ruling(to=resumed(task), why=decision.text, fields=fields, enqueue=True)


async def reset(reads: RuleReads, task: Task, decision: Decision, _: TrialMerge | None) -> Ruling:
    """Back to `decision.stage`, its branch moved back (by the worker that takes the stage's
    run) to the commit that stage began from, bound to that commit; the runs going on end,
    and what QA and review decided is forgotten."""
    stage = decision.stage
    assert stage is not None  # checked at the door
    not_held(task, "reset")
    if task.merged or task.archived:
        raise PolicyRefused(
            f"{task.id} is {'merged' if task.merged else 'archived'}; it cannot be reset",
            hint=f"file a new task: t25 task new (see t25 task show {task.id})",
        )
    try:
        assert_reset(task.state, stage, resume_state=task.resume_state)
    except IllegalTransition as exc:
        raise PolicyRefused(
            f"{task.id} cannot be reset to {stage}: {exc.message}", hint=what_fits(task)
        ) from None
    head = await stage_start(reads.store, task, stage)
    if head is None:
        raise PolicyRefused(
            f"{task.id} has no run of {stage} that says where it began",
            hint=f"t25 task show {task.id} lists its runs; reset to a stage that ran",
        )
    fields: dict[str, Any] = {
        "rewind_to": head,
        "error": None,
        "checks_passed": None,
        "review_verdict": None,
        "reviewed_head": None,
    }
    if stage in (TaskState.SPEC, TaskState.PLAN):
        fields["approved_plan_sha"] = None
    return Ruling(
        to=stage,
        why=decision.text or f"reset to {stage}, at {head[:12]}",
        fields=fields,
        enqueue=True,
        cancel_runs=True,
        reset=True,
        bound_to=f"commit:{head}",
    )


async def stage_start(store: Store, task: Task, stage: TaskState) -> str | None:
    """The branch head a stage began from: recorded by the first run of `stage` that started
    since the task was last reset (or ever); for a retried implementation, by the run that
    failed (the latest)."""
    events = await events_of_kinds(store, task.id, DecisionRecorded, RunStarted)
    stages = {r.id: r.stage for r in await store.list_runs(task_id=task.id)}
    resets = [
        i
        for i, e in enumerate(events)
        if isinstance(e, DecisionRecorded) and e.decision == Verb.RESET.value
    ]
    heads = [
        (i, e.head)
        for i, e in enumerate(events)
        if isinstance(e, RunStarted) and e.head and stages.get(e.run_id or "") is stage
    ]
    since = [h for i, h in heads if not resets or i > resets[-1]] or [h for _, h in heads]
    if task.state is TaskState.FAILED and stage is task.resume_state:
        since.reverse()  # a retry: where the failed run began
    return since[0] if since else None


async def edit(_: RuleReads, task: Task, decision: Decision, __: TrialMerge | None) -> Ruling:
    return edit_ruling(task, decision)


async def archive(_: RuleReads, task: Task, decision: Decision, __: TrialMerge | None) -> Ruling:
    archivable(task)
    return Ruling(fields={"archived": True}, cleans=True)


async def acknowledge(
    _: RuleReads, task: Task, decision: Decision, __: TrialMerge | None
) -> Ruling:
    acknowledgeable(task)
    return Ruling(fields={"violation": None})


async def recheck(_: RuleReads, task: Task, decision: Decision, __: TrialMerge | None) -> Ruling:
    """QA and review again, on the branch as it is now: what they decided is forgotten."""
    not_held(task, "rechecked")
    recheckable(task)
    return Ruling(
        to=TaskState.QA,
        why=decision.text or "QA and review again, on the branch as it is now",
        fields={
            "checks_passed": None,
            "review_verdict": None,
            "reviewed_head": None,
            "branch_head": None,  # the branch as it is now is the one to judge
        },
        enqueue=True,
    )


async def note(_: RuleReads, task: Task, decision: Decision, __: TrialMerge | None) -> Ruling:
    """A word for the task's next agent runs (their prompts quote it with the answers); the
    task goes on as it was. Until it is finished: then no agent will read it."""
    if task.state in TERMINAL or task.archived:
        raise PolicyRefused(
            f"{task.id} is {task.state}; no agent of it runs again to read a note",
            hint=f"file a new task (t25 task new), or `t25 recheck {task.id}` first",
        )
    return Ruling()


RULES: dict[Verb, Rule] = {
    Verb.APPROVE: approve,
    Verb.REJECT: reject,
    Verb.ANSWER: answer,
    Verb.MERGE: merge,
    Verb.CANCEL: cancel,
    Verb.RETRY: retry,
    Verb.RESET: reset,
    Verb.EDIT: edit,
    Verb.ARCHIVE: archive,
    Verb.ACKNOWLEDGE: acknowledge,
    Verb.RECHECK: recheck,
    Verb.NOTE: note,
}
