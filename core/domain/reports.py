"""What a worker sends back for one run: the agent's result and what T25 saw around it; and
the QA stage's artifact."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from core.domain.agent import AgentResult
from core.domain.manifests import ManifestChange
from core.domain.models import CheckResult, DiffStat
from core.domain.pull_request_watch import PullRequestWatch


class QAReport(BaseModel):
    """The QA artifact: T25's own check results, with the QA role's reading of them."""

    model_config = ConfigDict(defer_build=True)

    checks: list[CheckResult]
    passed: bool
    summary: str
    concerns: list[str] = []


class RunReport(BaseModel):
    """What a worker sends back for one run."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    result: AgentResult | None = None  # None for a stage T25 does itself (PR_OPEN)
    adapter_reason: str | None = None
    prompt: str | None = None
    error: str | None = None  # the worker could not run it at all
    violation: tuple[str, ...] = ()  # what the run did outside its worktree: it failed
    # What changed in the main checkout while an unconfined run went on: the run's or the
    # operator's, T25 cannot tell. The run stands; the task asks.
    changed_meanwhile: tuple[str, ...] = ()
    undone: str = ""  # what T25 put back after it
    evidence: str = ""  # JSON: the changed copies of what was put back
    diff_stat: DiffStat | None = None
    diff: str | None = None
    # The dependency manifests an implementation touches, on both branches (the budget).
    manifests: tuple[ManifestChange, ...] = ()
    checks: tuple[CheckResult, ...] = ()
    note: str = ""  # what a T25-run stage did
    pull_request: PullRequestWatch | None = None  # PR_OPEN on a forge: what it heard there
    head: str | None = None  # the task branch's head the run judged (QA, REVIEW) or began on
    branch_head: str | None = None  # the task branch's head as the run left it (Task.branch_head)
    commit: str | None = None  # the commit T25 made of what DOCS changed, on `head`
    committed: tuple[str, ...] = ()  # the paths that commit changed
    # A question for the operator instead of a run: no agent of the role's chain may play
    # it (a REVIEW whose every reviewer wrote the change). The task waits in NEEDS_INPUT.
    needs_input: str | None = None

    def outcome(self) -> str:
        """How the run ended, in a few words, for the log."""
        if self.error:
            return f"error ({self.error})"
        if self.violation:
            return "violation"
        if self.needs_input:
            return "needs input"
        if self.result is None:
            return "done"
        if self.result.ok:
            return "succeeded"
        return f"failed ({self.result.failure or self.result.error or self.result.exit_code})"
