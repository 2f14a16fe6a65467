"""What a finished run means for its task: parse, apply policy, move the state machine.

A worker executes a run and sends back a `RunReport`. `Pipeline.complete` accepts it
only under a live lease, keeps the log and the stage's artifact, and then code decides
the next state: a failure or an unparseable answer fails the task (never retried
silently), a question waits for a human, and otherwise each stage's policy picks the
next stage and queues its run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from core.config.config_section import ROLES
from core.control import cost, policies
from core.control.deciding import Deciding, run_artifact
from core.control.history import CHECKED_HEAD
from core.control.prompts import PromptContext, build_prompt
from core.control.pull_request_body import pull_request_body
from core.control.pull_request_decisions import on_pull_request, pending_feedback
from core.domain.agent import AgentResult
from core.domain.answers import (
    DevAnswer,
    DocsAnswer,
    Finding,
    PlanAnswer,
    QAAnswer,
    ReviewAnswer,
    SpecAnswer,
    StageAnswer,
    parse_answer,
)
from core.domain.check_start import WHERE_CHECKS_RUN
from core.domain.events import (
    ApprovalRequested,
    DecisionRecorded,
    Event,
    InputRequested,
    RunStarted,
    TaskTransitioned,
)
from core.domain.manifests import added_dependencies
from core.domain.models import (
    MERGE_ROLE,
    Artifact,
    ArtifactKind,
    Author,
    CheckResult,
    DiffStat,
    Lease,
    ResumableSession,
    Run,
    RunOutcome,
    RunStatus,
    Task,
    TaskState,
)
from core.domain.reports import QAReport, RunReport
from core.errors import AnswerInvalid, LeaseLost, PolicyRefused
from core.ports.store import NewArtifact
from core.ports.task_book import T25, TaskBook

if TYPE_CHECKING:
    from core.config.schema import Config

S = TaskState
# How many changes a "changed while it ran" question lists before "and N more".
SHOWN_CHANGES = 10
A = TypeVar("A", bound=StageAnswer)
Listed = Sequence[Artifact]  # a task's artifacts, listed once for all that a prompt reads


class Pipeline:
    """What code decides between stages: the prompt of a run, and the next state after it."""

    def __init__(self, book: TaskBook) -> None:
        self.book = book

    # -- prompts ---------------------------------------------------------------------------

    async def prompt_for(
        self,
        run: Run,
        task: Task,
        *,
        checks: Sequence[CheckResult] = (),
        continuing: bool = False,
    ) -> str:
        """The run's prompt; `continuing`: for a run that continues the session of the task's
        last dev run (`resumable`), what is new only. PR_OPEN's, on a forge, is the body of
        the task's pull request (core.control.pull_request_body)."""
        if run.stage is S.PR_OPEN:
            return await pull_request_body(self.book, task)
        ctx = await self._context(run, task, tuple(checks))
        if continuing:
            ctx = ctx.model_copy(update={"continuing": True})
        return build_prompt(ctx, overrides=self.book.config.project(task.project).prompts)

    async def resumable(self, run: Run, task: Task) -> ResumableSession | None:
        """The CLI session an IMPLEMENTING run may continue: the task's last dev run's, when
        QA or REVIEW sent the task back to it (not an operator's retry, reset or answer, after
        which the conversation no longer matches the branch) and that run reported one."""
        if run.stage is not S.IMPLEMENTING or task.rewind_to is not None:
            return None
        if not task.qa_loops + task.review_loops or run.attempts > 1:
            # Never sent back; or an attempt of this run was lost midway, and what it said
            # in the session went with the work T25 set aside.
            return None
        moves = await self.book.task_events_of(task.id, TaskTransitioned)
        last = moves[-1] if moves else None
        if last is None or last.actor != T25 or last.from_state not in (S.QA, S.REVIEW):
            return None
        dev = [
            r
            for r in await self.book.task_runs(task.id)
            if r.stage is S.IMPLEMENTING and r.id != run.id and r.status is RunStatus.SUCCEEDED
        ]
        if not dev or not dev[-1].session_id or not dev[-1].adapter:
            return None
        return ResumableSession(
            run_id=dev[-1].id, adapter=dev[-1].adapter, session_id=dev[-1].session_id
        )

    async def _context(
        self, run: Run, task: Task, checks: tuple[CheckResult, ...]
    ) -> PromptContext:
        listed = await self.book.task_artifacts(task.id)  # once, for each kind read below
        findings, failed = await self._feedback(run, task, listed)
        if run.stage is S.REVIEW and not checks:  # what QA's checks gave, for the reviewer
            qa = await self._latest_json(listed, ArtifactKind.QA_REPORT)
            checks = tuple(QAReport.model_validate(qa).checks) if qa else ()
        counted = any(c.figures is not None for c in (*checks, *failed))
        diff = (
            await self._latest_text(listed, ArtifactKind.DIFF)
            if run.stage in (S.QA, S.REVIEW, S.DOCS)
            else None
        )
        events = await self.book.task_events_of(task.id, TaskTransitioned, DecisionRecorded)
        decisions = [e for e in events if isinstance(e, DecisionRecorded)]
        failure, again = _sent_back(events, run)
        dev = run.stage is S.IMPLEMENTING
        loops = {
            S.QA: task.qa_loops,
            S.REVIEW: task.review_loops,
            S.IMPLEMENTING: task.qa_loops + task.review_loops,
        }
        return PromptContext(
            task=task,
            stage=run.stage,
            role=run.role,
            round=1 + loops.get(run.stage, 0),
            spec=await self._latest_output(listed, ArtifactKind.SPEC, SpecAnswer),
            plan=await self._latest_output(listed, ArtifactKind.PLAN, PlanAnswer),
            findings=findings,
            failed_checks=failed,
            reject_reasons=tuple(d.reason for d in decisions if d.decision == "reject"),
            answers=tuple(d.reason for d in decisions if d.decision in ("answer", "note")),
            failure=failure,
            again=again,
            check_results=checks,
            baseline=await self.book.baseline(task.project) if counted else None,
            diff=diff or "",
            pull_request=await pending_feedback(self.book, task) if dev else None,
        )

    async def _feedback(
        self, run: Run, task: Task, listed: Listed
    ) -> tuple[tuple[Finding, ...], tuple[CheckResult, ...]]:
        """What an IMPLEMENTING run must act on: the blocking findings of the review that
        sent it back, and the checks of the QA that did."""
        if run.stage is not S.IMPLEMENTING:
            return (), ()
        findings: list[Finding] = []
        if task.review_verdict == "changes_requested":
            findings = await self._round_findings(task, blocking_only=True, listed=listed)
        failed: tuple[CheckResult, ...] = ()
        qa = (
            await self._latest_json(listed, ArtifactKind.QA_REPORT)
            if task.checks_passed is False
            else None
        )
        if qa:
            failed = tuple(c for c in QAReport.model_validate(qa).checks if not c.passed)
        return tuple(findings), failed

    # -- who wrote the change ----------------------------------------------------------------

    async def authors(self, task: Task) -> tuple[Author, ...]:
        """The adapters (and models) of the task's succeeded IMPLEMENTING runs: who wrote
        the change a REVIEW run is about to judge."""
        runs = [
            r
            for r in await self.book.task_runs(task.id)
            if r.stage is S.IMPLEMENTING and r.status is RunStatus.SUCCEEDED and r.adapter
        ]
        if not runs:
            return ()
        configured = await self._profile_models(task, {r.id for r in runs})
        found: dict[tuple[str, tuple[str, ...]], Author] = {}
        for r in runs:
            assert r.adapter is not None  # filtered above; mypy cannot see it
            models = tuple(sorted({m for m in (configured.get(r.id), r.model) if m}))
            found.setdefault((r.adapter, models), Author(adapter=r.adapter, models=models))
        return tuple(found.values())

    async def _profile_models(self, task: Task, run_ids: set[str]) -> dict[str, str | None]:
        """The model each run's profile named, from the RunStarted its worker recorded
        (the last one of a run: the adapter that went on to do it)."""
        models: dict[str, str | None] = {}
        for event in await self.book.task_events_of(task.id, RunStarted):
            if event.run_id in run_ids:
                models[event.run_id] = event.model
        return models

    # -- completion --------------------------------------------------------------------------

    async def complete(self, lease: Lease, report: RunReport) -> Task | None:
        """Accept a worker's report under its lease (LeaseLost otherwise), then decide.

        The run is recorded finished with its own artifacts (its prompt, its log, the
        evidence of a violation) in one store transaction; the decision is then one more
        where it is one move of the task (core.control.deciding). A report told again — its
        first telling recorded the run, and the process that took it stopped (a serve
        replica killed, the store gone) before deciding — is decided now, rather than left
        to the stall check to run the stage again; a task that was decided on has left the
        run's stage, and is not decided twice."""
        run = await self._fits_its_run(lease, report)
        self.book.reread_config()
        outcome = self._outcome(report)
        own = _own(_finished(run, outcome), report) if run is not None else ()
        try:
            run = await self.book.record_run(lease, outcome, own)
        except LeaseLost:
            run = await self._told_before(lease, outcome)
            kept = await self._kept_any(run)
            return await self._decide_once(run, report, () if kept else _own(run, report))
        return await self._decide_once(run, report, ())

    async def _fits_its_run(self, lease: Lease, report: RunReport) -> Run | None:
        """The run `lease` is on; refuse (PolicyRefused) a report whose agent could not have
        played the run's role: a worker credential is no licence to say which agent ran."""
        run = await self.book.find_run(lease.run_id)
        if report.result is None or run is None or run.role not in ROLES:
            return run  # no such run (the lease is checked next), or T25's own stage
        task = await self.book.find_task(lease.task_id)
        if task is None:
            return run
        chain = self._policy(task).roles.chain(run.role) or []
        result = report.result
        if why := policies.foreign_completion(chain, run.role, result.adapter, result.model):
            raise PolicyRefused(f"{run.id}: {why}; the completion is refused")
        return run

    async def _told_before(self, lease: Lease, outcome: RunOutcome) -> Run:
        """The run `lease` finished with this very outcome (LeaseLost if it did not: a
        lapsed lease, a run cancelled or reaped, another worker's)."""
        run = await self.book.find_run(lease.run_id)
        if (
            run is None
            or run.lease_token != lease.token
            or run.worker != lease.worker
            or run.status is not outcome.status
            or run.error != outcome.error
        ):
            raise LeaseLost(f"the lease of {lease.run_id} no longer holds")
        return run

    async def _decide_once(
        self, run: Run, report: RunReport, own: Sequence[NewArtifact]
    ) -> Task | None:
        """Decide, while the run's task is still in its stage, with the run's `own`
        artifacts when its first telling kept none of them."""
        if run.role == MERGE_ROLE:  # a worker's merge: landed, or refused
            await self.book.keep(own)
            merged = await self.book.merge_finished(run, report.commit, error=self._failure(report))
            if merged.merged and report.commit:  # its trial's figures: the default branch's
                await self.book.keep_baseline(merged, report.commit, report.checks, run_id=run.id)
            return merged
        task = await self.book.find_task(run.task_id)
        if task is None or task.state is not run.stage or task.archived:
            await self.book.keep(own)
            return task  # the task moved on (cancelled, say) while the run was going
        moved: dict[str, Any] = {}
        if task.rewind_to is not None:  # this run began where the reset or retry asked
            moved["rewind_to"] = None
        if report.branch_head not in (None, task.branch_head):  # where the next run checks
            moved["branch_head"] = report.branch_head
        d = Deciding(self.book, run, moved, own)
        task = await self._decide(d, task, report)
        await d.settle(task)
        return task

    async def _kept_any(self, run: Run) -> bool:
        kept = await self.book.task_artifacts(run.task_id)
        return any(a.meta.run_id == run.id for a in kept)

    def _outcome(self, report: RunReport) -> RunOutcome:
        """What the store keeps of a run's report: its status, agent, usage and cost."""
        result = report.result
        if result is None:  # a stage T25 did itself, or a run that could not start
            failed = bool(report.error or report.violation or report.needs_input)
            return RunOutcome(
                status=RunStatus.FAILED if failed else RunStatus.SUCCEEDED,
                error=self._failure(report) or report.needs_input,
                adapter_reason=report.adapter_reason,
            )
        model = result.usage.model or result.model
        failed = bool(report.error or report.violation or not result.ok)
        return RunOutcome(
            status=RunStatus.FAILED if failed else RunStatus.SUCCEEDED,
            exit_code=result.exit_code,
            error=self._failure(report),
            adapter=result.adapter,
            adapter_reason=report.adapter_reason,
            cli_version=result.cli_version,
            model=model,
            usage=result.usage,
            requests=result.requests,
            cost_usd=self._cost(result, model),
            session_id=result.session_id,
            resumed_session=result.resumed_session,
        )

    def _cost(self, result: AgentResult | None, model: str | None) -> float:
        """The configured rates decide; a CLI's own figure counts only for an unpriced model."""
        if result is None:
            return 0.0
        rate = self.book.config.rate_for(model)
        if rate is None and result.cost_usd is not None:
            return result.cost_usd
        return cost.estimate(result.usage, rate)

    @staticmethod
    def _failure(report: RunReport) -> str | None:
        if report.error:
            return report.error
        if report.violation:
            undone = f" ({report.undone})" if report.undone else ""
            return "the run changed the main checkout: " + "; ".join(report.violation) + undone
        if report.result and not report.result.ok:
            return report.result.error or f"agent run failed ({report.result.failure})"
        return None

    async def _decide(self, d: Deciding, task: Task, report: RunReport) -> Task:
        run = d.run
        if report.changed_meanwhile:
            task = await self._changed_meanwhile(d, task, report)
        why = self._failure(report)
        if why and report.violation:  # held: retry and merge wait for an acknowledgement
            error = f"{run.stage} run {run.id} failed: {why}"
            return await self._fail(d, task, error, violation=error)
        if run.stage is S.QA and (verdict := policies.evaluate_qa(report.checks)).unstarted:
            return await self._qa_unstarted(d, task, report, verdict)
        if report.needs_input:  # no agent may play the role (a review's authors): ask why
            return await self._ask(d, task, report.needs_input)
        if why:
            return await self._fail(d, task, f"{run.stage} run {run.id} failed: {why}")
        if run.stage is S.PR_OPEN and report.pull_request is not None:
            return await on_pull_request(self.book, d, task, report.pull_request, self._ask)
        if run.stage is S.PR_OPEN:
            return await d.move(task, S.DOCS, reason=report.note)
        text = report.result.final_text if report.result else ""
        try:
            output = parse_answer(run.stage, text)
        except AnswerInvalid as exc:
            return await self._fail(
                d,
                task,
                f"{run.stage} run {run.id}: the answer did not parse: {exc.message} "
                "(the raw output is kept in the run's log)",
            )
        if output.question:
            return await self._ask(d, task, output.question)
        return await self._answered(d, task, report, output)

    async def _answered(
        self, d: Deciding, task: Task, report: RunReport, output: StageAnswer
    ) -> Task:
        """Each stage's policy on its answer (parse_answer gives each stage its own kind)."""
        match output:
            case SpecAnswer():
                d.keep(ArtifactKind.SPEC, _json(output), "application/json")
                return await d.move(task, S.PLAN)
            case PlanAnswer():
                return await self._planned(d, task, output)
            case DevAnswer():
                return await self._implemented(d, task, report)
            case QAAnswer():
                return await self._qa(d, task, report, output)
            case ReviewAnswer():
                return await self._reviewed(d, task, output, report.head)
            case DocsAnswer():
                d.keep(ArtifactKind.DOCS, _json(output), "application/json")
                return await self._documented(d, task, report)
        raise AssertionError(f"no decision for {d.run.stage} ({type(output).__name__})")

    async def _planned(self, d: Deciding, task: Task, plan: PlanAnswer) -> Task:
        content = _json(plan)
        d.keep(ArtifactKind.PLAN, content, "application/json")
        if not policies.requires_plan_approval(plan, self._policy(task).approval):
            return await d.move(
                task, S.IMPLEMENTING, reason=f"{plan.risk}-risk plan needs no approval"
            )
        asked = ApprovalRequested(
            task_id=task.id,
            run_id=d.run.id,
            plan_sha256=hashlib.sha256(content).hexdigest(),  # the plan's artifact's
            risk=plan.risk,
            files=list(plan.files),
        )
        return await d.move(
            task,
            S.AWAITING_APPROVAL,
            reason=f"{plan.risk}-risk plan needs a human approval",
            then=(asked,),
        )

    async def _implemented(self, d: Deciding, task: Task, report: RunReport) -> Task:
        if report.diff is not None:
            d.keep(ArtifactKind.DIFF, report.diff.encode(), "text/x-diff")
        stat = report.diff_stat or DiffStat()
        config = self._policy(task)
        over = policies.check_diff_limits(stat, config.limits)
        if over:
            return await self._fail(d, task, f"diff limits exceeded: {over}")
        added = added_dependencies(report.manifests)
        over = policies.check_dependency_budget(added, config.limits)
        if over:
            return await self._fail(d, task, f"dependency budget exceeded: {over}")
        protected = policies.guarded(stat, config.policies)
        reason = stat.summary()
        if added:
            reason += f"; new dependencies: {', '.join(added)}"
        if protected:
            reason += f"; protected paths touched: {', '.join(protected)}"
        return await d.move(task, S.QA, reason=reason, protected_paths=protected)

    async def _qa(self, d: Deciding, task: Task, report: RunReport, output: QAAnswer) -> Task:
        verdict = policies.evaluate_qa(report.checks)
        qa = QAReport(
            checks=list(report.checks),
            passed=verdict.passed,
            summary=output.summary,
            concerns=list(output.concerns),
        )
        d.keep(ArtifactKind.QA_REPORT, _json(qa), "application/json")
        reason = "; ".join(filter(None, (verdict.summary, report.note)))
        if verdict.passed:  # sealed with the head the checks ran on (core.control.history)
            return await d.move(
                task,
                S.REVIEW,
                reason=reason,
                facts={CHECKED_HEAD: report.head},
                checks_passed=True,
            )
        return await self._send_back(d, task, "qa", reason, checks_passed=False)

    async def _qa_unstarted(
        self, d: Deciding, task: Task, report: RunReport, verdict: policies.QAVerdict
    ) -> Task:
        """A required check could not start: the environment's fault, not the change's. No
        loop is spent: the task waits for the operator, and their answer runs QA again."""
        qa = QAReport(checks=list(report.checks), passed=False, summary=verdict.summary)
        d.keep(ArtifactKind.QA_REPORT, _json(qa), "application/json")
        return await self._ask(
            d,
            task,
            f"{verdict.summary}. To go on: {WHERE_CHECKS_RUN}; "
            f"then `t25 answer {task.id} …` runs QA again",
        )

    async def _reviewed(
        self, d: Deciding, task: Task, output: ReviewAnswer, head: str | None
    ) -> Task:
        d.keep(ArtifactKind.REVIEW, _json(output), "application/json")
        if d.run.role == "reviewer" and self._policy(task).roles.chain("security"):
            return await d.enqueue(task, "security")
        # The round's findings, this run's with them (kept with the move that follows).
        verdict = policies.evaluate_review(await self._round_findings(task, (d.run, output)))
        if verdict.approve:
            return await d.move(
                task,
                S.PR_OPEN,
                reason=verdict.summary,
                review_verdict="approve",
                reviewed_head=head,
            )
        return await self._send_back(
            d, task, "review", verdict.summary, review_verdict="changes_requested"
        )

    async def _documented(self, d: Deciding, task: Task, report: RunReport) -> Task:
        """DOCS is done. Its commit, when it touches documentation paths only and sits on the
        very commit REVIEW approved, is what a merge takes; one that touches anything else
        goes through QA and review (within the review loops), or waits for a human."""
        if report.commit is None:
            return await d.move(task, S.DONE)
        outside = policies.beyond_documentation(report.committed, self.book.config.policies)
        commit = report.commit[:12]
        if not outside:
            on_reviewed = report.head is not None and report.head == task.reviewed_head
            why = f"documentation commit {commit} ({_listed(report.committed)})"
            fields: dict[str, Any] = {"reviewed_head": report.commit} if on_reviewed else {}
            return await d.move(task, S.DONE, reason=why, **fields)
        beyond = (
            f"the docs stage's commit {commit} changed more than documentation ({_listed(outside)})"
        )
        config = self._policy(task)
        touched = policies.protected_touched(report.committed, config.policies.protected)
        if report.diff_stat is not None:  # the branch as DOCS left it: tests it took away too
            touched = (*touched, *policies.guarded(report.diff_stat, config.policies))
        protected = tuple(sorted({*task.protected_paths, *touched}))
        if policies.may_loop_again(task.review_loops, config.limits.max_review_loops):
            return await d.move(
                task,
                S.QA,
                reason=f"{beyond}: it goes through QA and review",
                review_loops=task.review_loops + 1,
                checks_passed=None,
                review_verdict=None,
                reviewed_head=None,
                protected_paths=protected,
            )
        task = await d.move(task, protected_paths=protected)
        return await self._ask(
            d,
            task,
            f"{beyond}, and the review loops are spent: answer to let the docs stage finish; "
            f"a merge will then need `t25 recheck {task.id}` (QA and review of that commit)",
        )

    def _policy(self, task: Task) -> Config:
        """The configuration in force for the task's project (its own roles, limits, QA
        checks and approval policy in place of the top-level ones)."""
        return self.book.config.for_project(task.project)

    async def _send_back(self, d: Deciding, task: Task, loop: str, why: str, **fields: Any) -> Task:
        """QA or REVIEW found problems: back to IMPLEMENTING, or to a human once the loop is spent."""
        limits = self._policy(task).limits
        done, bound = (
            (task.qa_loops, limits.max_qa_loops)
            if loop == "qa"
            else (task.review_loops, limits.max_review_loops)
        )
        if policies.may_loop_again(done, bound):
            fields[f"{loop}_loops"] = done + 1
            return await d.move(task, S.IMPLEMENTING, reason=why, **fields)
        task = await d.move(task, **fields)
        # The answer grants one more loop: IMPLEMENTING with the answer in its prompt, then
        # this check again (a second failure asks again).
        return await self._ask(
            d,
            task,
            f"{loop.upper()} sent the task back {done} times "
            f"(limit {bound}) and it still fails: {why}. "
            f"Answer with guidance: the dev agent gets one more round with your answer, "
            f"then {loop.upper()} runs again.",
            resume_state=S.IMPLEMENTING,
        )

    async def _ask(self, d: Deciding, task: Task, question: str, **fields: Any) -> Task:
        """Wait for a human; an answer returns to the stage that asked (or `resume_state`)."""
        asked = InputRequested(task_id=task.id, stage=task.state, question=question)
        return await d.move(task, S.NEEDS_INPUT, reason=question, then=(asked,), **fields)

    async def _changed_meanwhile(self, d: Deciding, task: Task, report: RunReport) -> Task:
        """The main checkout changed while an unconfined run went on. Whose change it was
        T25 cannot tell - the operator works there too - so the run stands, its work kept,
        and the task asks; merge and retry wait for the operator's word (acknowledge)."""
        shown = report.changed_meanwhile[:SHOWN_CHANGES]
        more = len(report.changed_meanwhile) - len(shown)
        changes = "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
        undone = f" ({report.undone})" if report.undone else ""
        note = (
            f"the main checkout changed while {d.run.stage} run {d.run.id} ran, unconfined - "
            f"yours? {changes}{undone}"
        )
        return await d.move(task, violation=note)

    async def _fail(self, d: Deciding, task: Task, error: str, **fields: Any) -> Task:
        return await d.move(task, S.FAILED, reason=error, error=error, **fields)

    # -- artifacts ---------------------------------------------------------------------------

    async def _latest_text(self, listed: Listed, kind: ArtifactKind) -> str | None:
        found = [a for a in listed if a.meta.kind is kind]
        got = await self.book.artifact(found[-1].id) if found else None
        return got[1].decode(errors="replace") if got else None

    async def _latest_json(self, listed: Listed, kind: ArtifactKind) -> dict[str, Any] | None:
        text = await self._latest_text(listed, kind)
        found = json.loads(text) if text else None
        return found if isinstance(found, dict) else None

    async def _latest_output(self, listed: Listed, kind: ArtifactKind, model: type[A]) -> A | None:
        data = await self._latest_json(listed, kind)
        return model.model_validate(data) if data else None

    async def _round_findings(
        self,
        task: Task,
        judged: tuple[Run, ReviewAnswer] | None = None,
        *,
        blocking_only: bool = False,
        listed: Listed | None = None,
    ) -> list[Finding]:
        """Findings of every review run (reviewer, security) since REVIEW was last entered;
        those of the run being `judged` from its answer, not yet kept."""
        runs = [
            r
            for r in await self.book.task_runs(task.id)
            if r.stage is S.REVIEW and r.status is RunStatus.SUCCEEDED
        ]
        if not runs:
            return []
        last_round = _last_round(runs)
        ids = {r.id for r in last_round} - {judged[0].id if judged else ""}
        findings: list[Finding] = []
        for artifact in await self.book.task_artifacts(task.id) if listed is None else listed:
            if artifact.meta.kind is ArtifactKind.REVIEW and artifact.meta.run_id in ids:
                _, content = await self.book.artifact(artifact.id)
                findings += ReviewAnswer.model_validate_json(content).findings
        if judged is not None and judged[0].id in {r.id for r in last_round}:
            findings += judged[1].findings
        if blocking_only:
            return list(policies.evaluate_review(findings).blocking)
        return findings


def _last_round(runs: list[Run]) -> list[Run]:
    """The newest reviewer run and any security run queued after it."""
    reviewers = [r for r in runs if r.role == "reviewer"]
    start = reviewers[-1].enqueued_at if reviewers else runs[-1].enqueued_at
    return [r for r in runs if r.enqueued_at >= start]


def _json(model: BaseModel) -> bytes:
    return model.model_dump_json(indent=2).encode()


def _listed(paths: Sequence[str], shown: int = 5) -> str:
    """Paths in a reason: the first few, then how many more."""
    more = len(paths) - shown
    return ", ".join(paths[:shown]) + (f" … and {more} more" if more > 0 else "")


def _sent_back(events: Sequence[Event], run: Run) -> tuple[str, str | None]:
    """When the task entered this stage by an operator's retry or reset: what failed
    before (a retry) and the operator's words; ("", None) otherwise."""
    moves = [e for e in events if isinstance(e, TaskTransitioned)]
    if not moves or moves[-1].to_state is not run.stage or moves[-1].actor == T25:
        return "", None
    last = moves[-1]
    decided = [
        e for e in events if isinstance(e, DecisionRecorded) and e.decision in ("retry", "reset")
    ]
    if not decided or (decided[-1].id or 0) < (last.id or 0):
        return "", None
    failed = [m for m in moves[:-1] if m.to_state is S.FAILED]
    failure = failed[-1].reason if last.from_state is S.FAILED and failed else ""
    return failure, decided[-1].reason


def _finished(run: Run, outcome: RunOutcome) -> Run:
    """`run` as its completion with `outcome` records it: the agent that played it."""
    agent = {"adapter": outcome.adapter, "cli_version": outcome.cli_version, "model": outcome.model}
    return run.model_copy(update=agent)


def _own(run: Run, report: RunReport) -> tuple[NewArtifact, ...]:
    """The run's own artifacts: its prompt, its log, the evidence of a violation."""
    own: list[NewArtifact] = []
    if report.prompt is not None:
        own.append(run_artifact(run, ArtifactKind.PROMPT, report.prompt.encode(), "text/markdown"))
    if report.result is not None and report.result.log is not None:
        # A file on this host, stored a chunk at a time (a worker's spool, or what a remote
        # worker uploaded to serve): never read whole.
        own.append(run_artifact(run, ArtifactKind.LOG, report.result.log.path, "text/plain"))
    if report.evidence:
        evidence = report.evidence.encode()
        own.append(run_artifact(run, ArtifactKind.VIOLATION, evidence, "application/json"))
    return tuple(own)
