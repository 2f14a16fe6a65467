"""What the pipeline decides when PR_OPEN's worker says what the forge said of the pull request
(core.worker.pull_request_stage).

- CI green and no changes requested (or the pull request not watched): on to DOCS, with the
  pull request's number, address and head in the move's facts — what a merge through the
  forge binds to (core.control.forge_merge).
- A failing check: back to IMPLEMENTING with the failed checks and their logs kept as the
  run's `pr_feedback` artifact, which the next dev run's prompt quotes; counted against
  `limits.max_ci_loops`, past which the task asks the operator.
- Changes requested on its head: the same with the reviews and their comments on lines,
  counted with REVIEW's own send-backs against `limits.max_review_loops`.
- CI still running when the wait ran out: the operator is asked (an answer watches again).

The comments addressed to T25 are recorded by the control plane before this (see
`mentioned`): each one a `note` decision in the audit log, under the commenter's login.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from core.control.deciding import Deciding
from core.domain.decisions import Decision
from core.domain.events import DecisionRecorded, TaskTransitioned
from core.domain.models import ArtifactKind, Task, TaskState
from core.domain.pull_request_watch import PullRequestWatch
from core.domain.verbs import Verb
from core.ports.task_book import TaskBook

Ask = Callable[..., Awaitable[Task]]  # Pipeline._ask: (deciding, task, question, **fields)
FED_BACK = "fed_back"  # the fact naming what a send-back from PR_OPEN fed back: ci, review


def pull_request_facts(watch: PullRequestWatch) -> dict[str, Any]:
    """What a move out of PR_OPEN records of the pull request."""
    return {
        "pull_request": watch.number,
        "pull_request_url": watch.url,
        "pull_request_head": watch.head,
    }


async def on_pull_request(
    book: TaskBook, d: Deciding, task: Task, watch: PullRequestWatch, ask: Ask
) -> Task:
    """The task's next state after its pull request was watched."""
    await mentioned(book, task, watch)
    facts = pull_request_facts(watch)
    why = watch.summary()
    if watch.outcome in ("opened", "green"):
        return await d.move(task, TaskState.DOCS, reason=why, facts=facts)
    if watch.outcome == "timed_out":
        return await ask(
            d,
            task,
            f"{why}: answer to watch it again, or `t25 cancel {task.id}`",
        )
    limits = book.config.for_project(task.project).limits
    if watch.outcome == "failing":
        done, bound, loop = await ci_loops(book, task), limits.max_ci_loops, "ci"
        fields: dict[str, Any] = {}
    else:
        done, bound, loop = task.review_loops, limits.max_review_loops, "review"
        fields = {"review_loops": task.review_loops + 1}
    d.keep(ArtifactKind.PR_FEEDBACK, watch.model_dump_json().encode(), "application/json")
    if done < bound:
        return await d.move(
            task,
            TaskState.IMPLEMENTING,
            reason=why,
            facts={**facts, FED_BACK: loop},
            checks_passed=None,
            review_verdict=None,
            reviewed_head=None,
            **fields,
        )
    limit = "limits.max_ci_loops" if loop == "ci" else "limits.max_review_loops"
    return await ask(
        d,
        task,
        f"{why}, after {done} round(s) fed back ({limit} {bound}). Answer with guidance: "
        "the dev agent gets one more round with your answer and the pull request's words",
        resume_state=TaskState.IMPLEMENTING,
        checks_passed=None,
        review_verdict=None,
        reviewed_head=None,
    )


async def ci_loops(book: TaskBook, task: Task) -> int:
    """How many times the task's pull request's CI sent it back."""
    moves = await book.task_events_of(task.id, TaskTransitioned)
    return sum(
        1
        for m in moves
        if m.from_state is TaskState.PR_OPEN
        and m.to_state is TaskState.IMPLEMENTING
        and (m.facts or {}).get(FED_BACK) == "ci"
    )


async def pending_feedback(book: TaskBook, task: Task) -> PullRequestWatch | None:
    """What the pull request's CI and reviewers said that the task has not answered yet: the
    feedback its newest PR_OPEN run kept, if it kept any (a later PR_OPEN run heard the
    forge again, and its own word replaces it)."""
    runs = [r for r in await book.task_runs(task.id) if r.stage is TaskState.PR_OPEN]
    if not runs:
        return None
    newest = runs[-1].id
    kept = [
        a
        for a in await book.task_artifacts(task.id)
        if a.meta.kind is ArtifactKind.PR_FEEDBACK and a.meta.run_id == newest
    ]
    if not kept:
        return None
    return PullRequestWatch.model_validate_json((await book.artifact(kept[-1].id))[1])


async def mentioned(book: TaskBook, task: Task, watch: PullRequestWatch) -> None:
    """Each comment on the pull request addressed to T25, recorded once as a `note` of the
    commenter's (`github:<login>`): in the audit log, and in the next dev run's prompt with
    the operator's answers. A comment recorded before (a report told again) is not again."""
    if not watch.mentions:
        return
    said = {(e.actor, e.reason) for e in await book.task_events_of(task.id, DecisionRecorded)}
    for mention in watch.mentions:
        actor = f"github:{mention.author}"
        text = f"on pull request #{watch.number} (comment {mention.comment_id}): {mention.body}"
        if (actor, text) not in said:
            await book.decide(Decision(verb=Verb.NOTE, task=task.id, actor=actor, text=text))
