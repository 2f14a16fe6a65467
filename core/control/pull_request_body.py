"""The body of a task's pull request: the evidence a reviewer on the forge needs, from T25's
own record — the spec, the plan with the SHA-256 its approval bound to, the checks QA ran,
the review rounds and the protected paths the change touches.

Given to PR_OPEN's worker as its run's prompt (core.ports.runs.RunQueue.prompt), so a remote
worker reads it as it reads an agent's prompt. What agents wrote (the spec, the plan, a
finding) is fenced, so the forge shows it as text and pings no one.
"""

from __future__ import annotations

import hashlib

from core.control.prompts import quoted
from core.domain.answers import PlanAnswer, ReviewAnswer, SpecAnswer
from core.domain.models import ArtifactKind, Task
from core.domain.reports import QAReport
from core.domain.text import printable
from core.ports.task_book import TaskBook

MAX_BODY = 60_000  # GitHub takes 65,536 characters
MARKER = "<!-- t25:{task} -->"  # T25's pull request of the task


async def pull_request_body(book: TaskBook, task: Task) -> str:
    """The pull request's body, in Markdown."""
    artifacts = await book.task_artifacts(task.id)

    async def newest(kind: ArtifactKind) -> bytes | None:
        found = [a for a in artifacts if a.meta.kind is kind]
        return (await book.artifact(found[-1].id))[1] if found else None

    spec, plan, qa = [
        await newest(k) for k in (ArtifactKind.SPEC, ArtifactKind.PLAN, ArtifactKind.QA_REPORT)
    ]
    reviews = [a for a in artifacts if a.meta.kind is ArtifactKind.REVIEW]
    last_review = await newest(ArtifactKind.REVIEW)
    parts = [
        f"Task **{task.id}** of T25 ({task.type}), {printable(task.title)}.{_closes(book, task)}",
        _spec(spec),
        _plan(plan),
        _checks(qa),
        _reviews(len(reviews), last_review, task),
        _protected(task),
        MARKER.format(task=task.id),
    ]
    body = "\n\n".join(p for p in parts if p)
    return body if len(body) <= MAX_BODY else body[: MAX_BODY - 40] + "\n\n… (cut)"


def _closes(book: TaskBook, task: Task) -> str:
    """For a task filed from an issue of the same repository: the words that close it when
    the pull request merges."""
    forge = book.config.project(task.project).pull_request
    key = task.request_key or ""
    if forge is None or not key.startswith(f"{forge.forge}:{forge.repo}#"):
        return ""
    return f" Closes #{key.rsplit('#', 1)[1]}."


def _spec(raw: bytes | None) -> str:
    if raw is None:
        return ""
    spec = SpecAnswer.model_validate_json(raw)
    criteria = "\n".join(f"- {c}" for c in spec.acceptance_criteria)
    said = quoted(spec.summary + "\n\n" + criteria)
    return f"### Spec\n\n{said}"


def _plan(raw: bytes | None) -> str:
    if raw is None:
        return ""
    plan = PlanAnswer.model_validate_json(raw)
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(plan.steps, 1))
    sha = hashlib.sha256(raw).hexdigest()
    return f"### Plan (risk {plan.risk}, `sha256:{sha}`)\n\n{quoted(steps)}"


def _checks(raw: bytes | None) -> str:
    if raw is None:
        return ""
    checks = QAReport.model_validate_json(raw).checks
    if not checks:
        return "### Checks\n\nno QA check is configured"
    rows = "\n".join(
        f"| {printable(c.name)} | {'passed' if c.passed else 'failed'} | "
        f"{'' if c.exit_code is None else c.exit_code} | {c.duration_s:.1f} s |"
        for c in checks
    )
    return f"### Checks run by T25\n\n| check | result | exit | took |\n|---|---|---|---|\n{rows}"


def _reviews(rounds: int, last: bytes | None, task: Task) -> str:
    if last is None:
        return ""
    review = ReviewAnswer.model_validate_json(last)
    found = ", ".join(f"{f.severity}: {f.message}" for f in review.findings) or "no finding"
    head = f" of `{task.reviewed_head[:12]}`" if task.reviewed_head else ""
    return (
        f"### Review\n\n{rounds} review run(s); the last{head} approved it "
        f"with {len(review.findings)} finding(s):\n\n{quoted(found)}"
    )


def _protected(task: Task) -> str:
    if not task.protected_paths:
        return "### Protected paths\n\nthe change touches none"
    listed = "\n".join(f"- `{printable(p)}`" for p in task.protected_paths)
    return f"### Protected paths the change touches\n\n{listed}"
