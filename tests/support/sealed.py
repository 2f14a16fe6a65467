"""A task's checks and review passed as T25's pipeline records them: sealed state changes with
their facts (core.control.history). Tests that need a mergeable task get one this way - a row
set by hand is what the merge gate refuses."""

from __future__ import annotations

from core.control.history import CHECKED_HEAD
from core.domain.models import Task, TaskState

S = TaskState
TO_QA = (S.RECEIVED, S.SPEC, S.PLAN, S.IMPLEMENTING, S.QA)


async def passed_review(control, task: Task, head: str) -> Task:
    """`task` taken to DONE through QA's checks and an approving review, both on `head`
    (a DONE task goes back to QA first, as `t25 recheck` sends it)."""
    if task.state is S.DONE:
        task = await control.transition(
            task, S.QA, actor="t25", checks_passed=None, review_verdict=None, reviewed_head=None
        )
    for state in TO_QA[TO_QA.index(task.state) + 1 :]:
        task = await control.transition(task, state, actor="t25")
    task = await control.transition(
        task, S.REVIEW, actor="t25", facts={CHECKED_HEAD: head}, checks_passed=True
    )
    task = await control.transition(
        task, S.PR_OPEN, actor="t25", review_verdict="approve", reviewed_head=head
    )
    task = await control.transition(task, S.DOCS, actor="t25")
    return await control.transition(task, S.DONE, actor="t25")


async def tip(control, task: Task) -> str:
    """The head of the task's branch, as the merge would take it."""
    return await control.worktrees(task.project).tip(task)
