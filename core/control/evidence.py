"""Gathering what an operator sees before deciding (core.domain.evidence), from the store.

`approval` reads the spec, the newest plan (re-hashed: the SHA-256 an approval binds to),
the task's earlier rejections and answers, and estimates the stages left from this
project's past runs of each role's first profile. `merge` reads the reviewed head, the
last implementation's diff stat, the QA report (beside the default branch's test figures),
the review rounds and the protected paths; the control plane adds the commits from git
where it has the checkout.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from core.control.baselines import latest as latest_figures
from core.control.policies import evaluate_review, merge_refusal
from core.domain.answers import PlanAnswer, ReviewAnswer, SpecAnswer
from core.domain.diffs import files_of
from core.domain.events import DecisionRecorded
from core.domain.evidence import (
    ApprovalEvidence,
    MergeEvidence,
    PastCosts,
    ReviewRound,
    StageEstimate,
)
from core.domain.figures import Baseline
from core.domain.models import (
    Artifact,
    ArtifactKind,
    CheckResult,
    DiffStat,
    Task,
    TaskState,
)
from core.domain.verbs import Verb

if TYPE_CHECKING:
    from core.config.schema import Config
    from core.ports import Store


class Reads(Protocol):
    """What evidence is read from: the installation's reads (core.control.queries.Queries)."""

    config: Config
    store: Store

    async def decisions(self, ref: str) -> list[DecisionRecorded]: ...


# The stages an approved plan has ahead of it, and the role working each.
AFTER_APPROVAL = (
    (TaskState.IMPLEMENTING, "dev"),
    (TaskState.QA, "qa"),
    (TaskState.REVIEW, "reviewer"),
    (TaskState.DOCS, "docs"),
)


async def approval(queries: Reads, task: Task) -> ApprovalEvidence:
    listed = await queries.store.list_artifacts(task_id=task.id)  # once, for both
    spec = await _newest(queries, task, ArtifactKind.SPEC, listed)
    plan = await _newest(queries, task, ArtifactKind.PLAN, listed)
    decisions = await queries.decisions(task.id)
    return ApprovalEvidence(
        spec=SpecAnswer.model_validate_json(spec[1]) if spec else None,
        plan=PlanAnswer.model_validate_json(plan[1]) if plan else None,
        plan_sha256=f"sha256:{plan[0]}" if plan else None,
        plan_text=plan[1].decode(errors="replace") if plan else "",
        rejections=_said(decisions, Verb.REJECT),
        answers=_said(decisions, Verb.ANSWER),
        estimate=await _estimate(queries, task),
    )


async def merge(queries: Reads, task: Task) -> MergeEvidence:
    diff = await _newest(queries, task, ArtifactKind.DIFF)
    checks, baseline = await checks_of(queries, task)
    review = task.review_verdict == "approve" if task.review_verdict else None
    return MergeEvidence(
        branch=task.branch,
        reviewed_head=task.reviewed_head,
        diff_stat=_stat(diff[1].decode(errors="replace")) if diff else None,
        checks=checks,
        baseline=baseline,
        rounds=await _rounds(queries, task),
        protected_paths=task.protected_paths,
        refusal=merge_refusal(task, checks_passed=task.checks_passed, review_approved=review),
    )


async def checks_of(queries: Reads, task: Task) -> tuple[tuple[CheckResult, ...], Baseline | None]:
    """The checks of the task's last QA, and (when a runner reported figures) the default
    branch's figures to show them beside."""
    qa = await _newest(queries, task, ArtifactKind.QA_REPORT)
    checks = tuple(
        CheckResult.model_validate(c) for c in (json.loads(qa[1]).get("checks", []) if qa else [])
    )
    counted = any(c.figures is not None for c in checks)
    return checks, await latest_figures(queries.store, task.project) if counted else None


async def _newest(
    queries: Reads, task: Task, kind: ArtifactKind, listed: Sequence[Artifact] | None = None
) -> tuple[str, bytes] | None:
    """The newest artifact of `kind` (among `listed`, when the caller has listed the task's
    artifacts already): its SHA-256 (re-hashed as read) and content."""
    if listed is None:
        listed = await queries.store.list_artifacts(task_id=task.id)
    found = [a for a in listed if a.meta.kind is kind]
    if not found:
        return None
    artifact, content = await queries.store.get_artifact(found[-1].id)
    return artifact.sha256, content


def _said(decisions: list[DecisionRecorded], verb: Verb) -> tuple[str, ...]:
    return tuple(d.reason for d in decisions if d.decision == verb.value and d.reason)


async def _estimate(queries: Reads, task: Task) -> tuple[StageEstimate, ...]:
    """Each stage left, from the project's past succeeded runs of its role (and of the
    model its first profile names, when it names one), summed per task: a task whose QA or
    review sent it back ran a role more than once, and the range says so."""
    policy = queries.config.for_project(task.project)
    models: dict[str, str | None] = {}
    for _, role in AFTER_APPROVAL:
        chain = policy.roles.chain(role) or []
        models[role] = chain[0].model if chain else None
    found = await queries.store.past_costs(project=task.project, roles=models)
    out = []
    for stage, role in AFTER_APPROVAL:
        model, past = models[role], found.get(role, PastCosts())
        priced = past.high_usd > 0 or queries.config.rate_for(model) is not None
        out.append(
            StageEstimate(
                stage=stage.value,
                role=role,
                model=model,
                runs=past.runs,
                low_usd=past.low_usd,
                high_usd=past.high_usd,
                priced=priced,
            )
        )
    return tuple(out)


async def _rounds(queries: Reads, task: Task) -> tuple[ReviewRound, ...]:
    """Every review run's findings, oldest first, each round with what became of it: the
    blocking ones sent the change back to the dev agent; a round without them approved it."""
    runs = {r.id for r in await queries.store.list_runs(task_id=task.id) if r.role == "reviewer"}
    rounds: list[ReviewRound] = []
    for artifact in await queries.store.list_artifacts(task_id=task.id):
        if artifact.meta.kind is ArtifactKind.REVIEW and artifact.meta.run_id in runs:
            _, content = await queries.store.get_artifact(artifact.id)
            findings = ReviewAnswer.model_validate_json(content).findings
            verdict = evaluate_review(findings)
            outcome = "approved" if verdict.approve else "sent back to the dev agent"
            rounds.append(
                ReviewRound(round=len(rounds) + 1, findings=tuple(findings), outcome=outcome)
            )
    return tuple(rounds)


def _stat(diff: str) -> DiffStat:
    """A unified diff's stat: the files it touches, lines added and removed."""
    files = files_of(diff)
    return DiffStat(
        files=tuple(f.path for f in files),
        renamed_from=tuple(f.old_path for f in files if f.old_path),
        added=sum(f.insertions for f in files),
        deleted=sum(f.deletions for f in files),
    )
