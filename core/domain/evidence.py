"""What an operator is shown before deciding: the evidence of an approval and of a merge.

Values only; `core.control.evidence` gathers them from the store (and from git, where
this process has the checkout). The cockpit's dialogs, `t25 task show` of a task waiting
on a plan and `t25 merge --dry-run` print the same values.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from core.domain.answers import Finding, PlanAnswer, SpecAnswer
from core.domain.figures import Baseline
from core.domain.models import CheckResult, DiffStat
from core.domain.text import printable


class StageEstimate(BaseModel):
    """What one remaining stage has cost in this project's past runs of its role and model:
    a range (the cheapest and the dearest task's, each task's runs of the role summed: its
    QA and review loops included), or unpriced / unknown."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    stage: str
    role: str
    model: str | None
    runs: int = 0  # past runs it is estimated from
    low_usd: float = 0.0
    high_usd: float = 0.0
    priced: bool = True  # False: the model has no rate in cost.rates


@dataclass(frozen=True)
class PastCosts:
    """A project's succeeded runs of one role, summed per task: how many runs, and the
    cheapest and the dearest task's sum (0 when there were none)."""

    runs: int = 0
    low_usd: float = 0.0
    high_usd: float = 0.0


class ApprovalEvidence(BaseModel):
    """A plan waiting for a human: the spec it serves, the plan and its SHA-256 (what an
    approval binds to), the earlier rejections and answers, and what is left to spend."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    spec: SpecAnswer | None = None
    plan: PlanAnswer | None = None
    plan_sha256: str | None = None
    plan_text: str = ""  # the plan as stored (the approval dialog shows it as it is)
    rejections: tuple[str, ...] = ()
    answers: tuple[str, ...] = ()
    estimate: tuple[StageEstimate, ...] = ()

    def estimate_line(self) -> str:
        """`$0.12–$0.40 for IMPLEMENTING, QA, REVIEW, DOCS (from 14 past runs)`, with what
        is not priced or has no past run named."""
        priced = [e for e in self.estimate if e.priced and e.runs]
        low = sum(e.low_usd for e in priced)
        high = sum(e.high_usd for e in priced)
        stages = ", ".join(e.stage for e in self.estimate)
        line = f"${low:.2f}–${high:.2f} for {stages} (from {sum(e.runs for e in priced)} past runs)"
        unpriced = sorted({e.model or "the CLI's default" for e in self.estimate if not e.priced})
        unknown = [e.stage for e in self.estimate if e.priced and not e.runs]
        if unpriced:
            line += f"; not priced: {', '.join(unpriced)}"
        if unknown:
            line += f"; no past run for {', '.join(unknown)}"
        return line

    def lines(self, task_id: str) -> list[str]:
        """What an approval is decided on, as the command line and the cockpit print it."""
        lines = ["approval"]
        if self.spec is not None:
            lines.append(f"  spec       {printable(self.spec.summary)}")
            lines += [f"    - {printable(c)}" for c in self.spec.acceptance_criteria]
        if self.plan is not None:
            plan = self.plan
            lines.append(f"  plan       {plan.risk} risk, {self.plan_sha256}")
            lines += [f"    {i}. {printable(step)}" for i, step in enumerate(plan.steps, 1)]
            lines.append(f"    files: {', '.join(printable(f) for f in plan.files) or '(none)'}")
            lines.append(f"    why: {printable(plan.rationale)}")
        lines += [f"  rejected   {printable(r)}" for r in self.rejections]
        lines += [f"  answered   {printable(a)}" for a in self.answers]
        lines.append(f"  estimate   {self.estimate_line()}")
        if self.plan_sha256:
            lines.append(f"  approve    t25 approve {task_id} --plan {self.plan_sha256}")
        return lines


class ReviewRound(BaseModel):
    """One round of review: its findings, and what became of them."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    round: int
    findings: tuple[Finding, ...] = ()
    outcome: str  # "sent back to the dev agent", "approved"


class MergeEvidence(BaseModel):
    """What a merge would take: the commit REVIEW approved, the commits and the diff stat
    (from git where this process has the checkout, else from the last implementation's
    stored diff), the QA checks, the review rounds and the protected paths touched."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    branch: str
    default_branch: str | None = None
    reviewed_head: str | None = None
    commits: tuple[str, ...] | None = None  # `abc123 subject`; None: no checkout here
    # The head REVIEW approved, and the commits the merge takes after it (DOCS'): no review
    # saw those.
    approved_head: str | None = None
    unreviewed: tuple[str, ...] = ()
    diff_stat: DiffStat | None = None
    checks: tuple[CheckResult, ...] = ()
    # What the checks' runners reported on the default branch (core.domain.figures).
    baseline: Baseline | None = None
    rounds: tuple[ReviewRound, ...] = ()
    protected_paths: tuple[str, ...] = ()
    refusal: str | None = None  # why a merge would be refused now; None: it may go ahead
    # How the merge would be made, as git tried it here ("as a merge commit onto …"), or
    # why it was not tried; None where this process has no checkout.
    made_as: str | None = None

    def lines(self) -> list[str]:
        """The merge's evidence as the command line and the cockpit's dialog print it."""
        into = self.default_branch or "the default branch"
        lines = [f"merge {self.branch} into {into}"]
        lines.append(f"  reviewed head  {self.reviewed_head or '(not recorded)'}")
        if self.commits is not None:
            lines.append(f"  commits        {len(self.commits)}")
            lines += [f"    {printable(c)}" for c in self.commits]
        else:
            lines.append("  commits        (no checkout of the repository here: a worker merges)")
        if self.unreviewed:
            approved = (self.approved_head or "")[:12]
            lines.append(
                f"  not reviewed   {len(self.unreviewed)} commit(s) after the head review "
                f"approved ({approved}): no review saw them"
            )
            lines += [f"    {printable(c)}" for c in self.unreviewed]
        if self.diff_stat is not None:
            lines.append(f"  diff           {self.diff_stat.summary()}")
            lines += [f"    {printable(f)}" for f in self.diff_stat.files]
        for check in self.checks:
            state = check.outcome(self.baseline)
            lines.append(
                f"  check          {printable(check.name)}: {state}"
                + ("" if check.required else " (optional)")
            )
        for review in self.rounds:
            lines.append(
                f"  review {review.round}       {len(review.findings)} finding(s): {review.outcome}"
            )
            lines += [
                f"    [{f.severity}] {printable(f.file or '')}"
                + (f":{f.line}" if f.line is not None else "")
                + f" {printable(f.message)}"
                for f in review.findings
            ]
        if self.protected_paths:
            named = ", ".join(printable(p) for p in self.protected_paths)
            lines.append(f"  protected      {named} (name each: --allow-path)")
        lines.append(
            f"  would be       refused: {printable(self.refusal)}"
            if self.refusal
            else f"  would be       merged {self.made_as + ' ' if self.made_as else ''}"
            "(the checks run again on the merge before it lands)"
        )
        return lines
