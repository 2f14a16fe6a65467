"""The worker plane: claim a run's lease, execute it where the code lives, report back.

A worker claims the oldest queued run with a deadline and a fencing token, heartbeats
while it works, and completes under the same token; a completion whose lease expired
or whose token went stale is rejected by the store and its results are dropped. The
agent runs in the task's own worktree. Every run (the agent, QA's checks, PR_OPEN's
push) is watched: the main checkout is fingerprinted before and after, and a run that
changed it fails, with what it changed in the shared git files and refs put back
(`core.workspace.watch`) and its worktree reset to T25's last commit; so does an
implementing run whose tree links outside itself. Output streams to the event log as it
comes, bounded per run (`core.worker.output`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.config.schema import AgentProfile
from core.domain.agent import AgentRequest, AgentResult, CheckSandbox, Failure, RunCaps
from core.domain.check_start import unstarted, unstarted_line
from core.domain.events import RunStarted
from core.domain.manifests import is_manifest
from core.domain.models import (
    MERGE_ROLE,
    CheckResult,
    Lease,
    ResumableSession,
    Run,
    Task,
    TaskState,
)
from core.domain.pids import alive
from core.domain.reports import RunReport
from core.domain.tools import tools_for
from core.errors import (
    LeaseLost,
    NoAdapter,
    ProtocolMismatch,
    StaleState,
    T25Error,
    WorktreeBusy,
)
from core.ports import AgentAdapter, CheckRunner, Claim, RunQueue
from core.ports.forge import ForgeOpener
from core.worker.lease_check import confirm_lease
from core.worker.output import OutputBudget, OutputStream
from core.worker.outside_changes import changed_meanwhile, outward, undo, watching
from core.worker.pull_request_stage import pull_request_run
from core.worker.selection import QuotaBook, Selection, not_the_authors, select_adapter
from core.workspace.branch_guard import check_branch
from core.workspace.check_litter import litter_note, put_back, tree_state
from core.workspace.merging import checked_merge, merged_already
from core.workspace.pull_request import push_default_branch
from core.workspace.sizes import largest_file
from core.workspace.worktrees import Workspace, Worktrees

log = logging.getLogger("t25.worker")

LOCK_RETRY_S = 0.5
OVERLOAD_BACKOFF_S = (2.0, 8.0, 30.0)  # pauses before retrying an overloaded provider
RUN_LOGS = "run-logs"  # under `.factory/`: the logs of runs going on, until reported


def host_name() -> str:
    """This process, as a worker name: host and pid."""
    return f"{os.uname().nodename}:{os.getpid()}"


class Worker:
    """Runs leased runs one at a time until stopped."""

    def __init__(
        self,
        runs: RunQueue,
        workspace: Workspace,
        adapters: Mapping[str, AgentAdapter],
        run_check: CheckRunner,
        *,
        name: str | None = None,
        quota: QuotaBook | None = None,
        lease_ttl_s: float = 30.0,
        heartbeat_s: float = 2.0,
        live: dict[str, asyncio.Event] | None = None,
        wake: asyncio.Event | None = None,
        overload_backoff_s: tuple[float, ...] | None = None,
        forges: ForgeOpener | None = None,
    ) -> None:
        # Pauses before retrying an overloaded provider on the same adapter.
        self.overload_backoff_s = (
            OVERLOAD_BACKOFF_S if overload_backoff_s is None else overload_backoff_s
        )
        self.runs = runs
        self.workspace = workspace
        self.config = workspace.config
        # Runs going on, by task (the control plane's, in-process: its cancel stops them at once).
        self.live = live if live is not None else {}
        # Set when work is queued in this process; without one, the worker polls.
        self.wake = wake or asyncio.Event()
        self.adapters = adapters
        self.run_check = run_check
        self.forges = forges  # how PR_OPEN reaches a project's forge (pull_request_stage)
        self.name = name or host_name()
        self.quota = quota or QuotaBook()
        self.lease_ttl_s = lease_ttl_s
        self.heartbeat_s = heartbeat_s
        self.stopping = asyncio.Event()
        self.busy = False

    async def run_forever(self, poll_s: float = 0.5) -> None:
        sweep_run_logs(self.config.root / ".factory" / RUN_LOGS)
        while not self.stopping.is_set():
            if not await self.run_once():
                self.wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake(), poll_s)

    async def _wake(self) -> None:
        waits = [
            asyncio.ensure_future(self.wake.wait()),
            asyncio.ensure_future(self.stopping.wait()),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def run_once(self) -> bool:
        """Claim and work one run; False when the queue had nothing to claim. A claim the
        worker is stopped in the middle of is finished, then handed back: its run is never
        left leased to a worker that is gone."""
        claiming = asyncio.ensure_future(self.runs.claim(self.name, self.lease_ttl_s))
        try:
            claim = await asyncio.shield(claiming)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                got = await claiming
                if got is not None:
                    await self.runs.release(got.lease)
            raise
        if claim is None:
            return False
        self.busy = True
        try:
            await self._work(claim)
        finally:
            self.busy = False
        return True

    async def _work(self, claim: Claim) -> None:
        lease, run, task = claim.lease, claim.run, claim.task
        what = f"{task.id} {run.stage.value} (run {run.id}, attempt {run.attempts})"
        log.info("%s claimed %s", self.name, what)
        started = time.monotonic()
        abort = asyncio.Event()
        self.live[lease.task_id] = abort
        beat = asyncio.create_task(self._heartbeat(lease, abort))
        handed_back = False
        report: RunReport | None = None
        try:
            try:
                if run.role == MERGE_ROLE:
                    report = await self._merge(task, abort)
                else:
                    report = await self._execute(lease, run, task, abort, claim)
            except LeaseLost as exc:  # a call under the lease found it gone, or gave up on serve
                abort.set()
                handed_back = True
                log.info(
                    "%s lost the lease of %s after %s: %s", self.name, what, _took(started), exc
                )
                return
            except T25Error as exc:  # the worktree was refused, no adapter could run, ...
                report = RunReport(error=exc.message)
            if abort.is_set() and beat.done():
                handed_back = True  # the lease was lost: whatever we have is not ours to report
                log.info("%s lost the lease of %s after %s", self.name, what, _took(started))
                return
            beat.cancel()
            try:
                await self.runs.complete(
                    lease, report
                )  # heartbeats move the deadline, not the token
                log.info(
                    "%s finished %s on %s: %s in %s",
                    self.name,
                    what,
                    report.result.adapter if report.result else "T25",
                    report.outcome(),
                    _took(started),
                )
            except LeaseLost as exc:
                log.info("%s lost the lease of %s; its result is dropped: %s", self.name, what, exc)
            except StaleState as exc:  # another decider moved the task first: it won
                log.info("the decision after %s lost to another: %s", run.id, exc)
            handed_back = True
        finally:
            if not handed_back:  # stopped mid-run (shutdown): the run goes back to the queue
                with contextlib.suppress(LeaseLost):
                    await asyncio.shield(self.runs.release(lease))
                log.info("%s released %s after %s", self.name, what, _took(started))
            beat.cancel()
            self.live.pop(lease.task_id, None)
            _discard_log(report.result if report else None)  # reported, or never to be

    async def _heartbeat(self, lease: Lease, abort: asyncio.Event) -> Lease:
        """Extend the lease until cancelled; on LeaseLost, abort the agent."""
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                lease = await self.runs.heartbeat(lease, self.lease_ttl_s)
            except LeaseLost:
                abort.set()
                return lease
            except ProtocolMismatch as exc:  # serve was replaced by one of another version
                log.error("%s: %s", lease.run_id, exc)
                abort.set()  # nothing this run would send can be taken: its next claim ends it
                return lease
            except T25Error as exc:  # the control plane is unreachable: try again
                log.warning("heartbeat of %s failed: %s", lease.run_id, exc)

    # -- executing one run -----------------------------------------------------------------

    async def _execute(
        self,
        lease: Lease,
        run: Run,
        task: Task,
        abort: asyncio.Event,
        claim: Claim | None = None,
    ) -> RunReport:
        worktrees = self.workspace.worktrees(task.project)
        async with self._locked(worktrees, task.id, abort):
            await check_branch(worktrees, task)  # the branch T25 made, never one made anew
            path = await worktrees.ensure(task)
            if run.attempts > 1:  # an attempt before this one lost its lease midway
                await self._set_aside(worktrees, run, task)
            report = await self._in_worktree(lease, run, task, abort, claim, worktrees, path)
            return report.model_copy(update={"branch_head": await worktrees.tip(task)})

    async def _in_worktree(
        self,
        lease: Lease,
        run: Run,
        task: Task,
        abort: asyncio.Event,
        claim: Claim | None,
        worktrees: Worktrees,
        path: Path,
    ) -> RunReport:
        """The run in its worktree, from where it starts: the commit a reset or a retried
        implementation names, or, for a second attempt, where T25's last run left the
        branch (whatever a lost attempt committed on top is kept under refs/t25/archive/)."""
        start = task.rewind_to or (task.branch_head if run.attempts > 1 else None)
        if start is not None:
            archived = await worktrees.history.rewind(task, start)
            if archived:
                log.info(
                    "%s: moved %s back to %s; its head %s kept under refs/t25/archive/",
                    task.id,
                    task.branch,
                    start[:12],
                    archived[:12],
                )
        last_commit = await worktrees.tip(task)  # T25's: each run before watched or confined
        async with watching(worktrees, run, task, self.config, self.adapters) as watch:
            try:
                report = await self._stage(lease, run, task, worktrees, path, abort, claim)
            except LeaseLost:
                raise  # not this run's failure: the run is no longer ours
            except T25Error as exc:  # no adapter could run, the push failed, ...
                report = RunReport(error=exc.message)
            undone = await watch.finish(report)
        report = changed_meanwhile(report, undone)
        return await self._commit(lease, run, task, worktrees, report, last_commit)

    async def _commit(
        self,
        lease: Lease,
        run: Run,
        task: Task,
        worktrees: Worktrees,
        report: RunReport,
        last_commit: str | None,
    ) -> RunReport:
        """What an implementation or a documentation run changed, committed under a lease
        confirmed now, and weighed (its diff, its manifests, what DOCS touched)."""
        implementing = run.stage is TaskState.IMPLEMENTING
        committing = run.stage in (TaskState.IMPLEMENTING, TaskState.DOCS)
        if committing and report.result and report.result.ok:
            await confirm_lease(self.runs, lease, self.lease_ttl_s)  # lost: nothing committed
            subject = f"{task.id}: {task.title if implementing else 'documentation'}"
            message = f"{subject}\n\nT25 run {run.id}"
            commit, links = await worktrees.history.commit_inward(task, message)
            if links:  # nothing committed: a link out of the worktree undoes the run
                return await undo(worktrees, task, report, outward(links), last_commit)
            if implementing:
                span = await worktrees.changes.span(task)  # one range for the three reads
                stat = await worktrees.changes.diff_stat(task, span)
                largest, size = await largest_file(worktrees.repo, span[1], stat.files)
                stat = stat.model_copy(update={"largest": largest, "largest_bytes": size})
                manifests = [p for p in stat.touched if is_manifest(p)]
                return report.model_copy(
                    update={
                        "diff_stat": stat,
                        "diff": await worktrees.changes.diff(task, span),
                        "manifests": await worktrees.changes.manifests(task, manifests, span),
                    }
                )
            # DOCS: what it changed, for the pipeline to weigh
            changed = await worktrees.changes.changed(last_commit, commit) if commit else ()
            documented = await worktrees.changes.diff_stat(task) if commit else None
            return report.model_copy(
                update={
                    "head": last_commit,
                    "commit": commit,
                    "committed": changed,
                    "diff_stat": documented,
                }
            )
        return report.model_copy(update={"head": last_commit})

    async def _merge(self, task: Task, abort: asyncio.Event) -> RunReport:
        """A merge decided at a control plane with no checkout of the repository, made in
        this host's: tried, checked and landed as serve would (core.workspace.merging),
        then the default branch pushed where there is a remote and the worktree removed.
        A merge an earlier attempt landed is found, not made twice."""
        worktrees = self.workspace.worktrees(task.project)
        async with self._locked(worktrees, task.id, abort):
            commit = await merged_already(worktrees, task)
            ran: tuple[CheckResult, ...] = ()  # the trial's: the default branch's figures
            if commit is None:
                confine = CheckSandbox.of(self.config, task.project, f"merge-{task.id}")
                checks = self.config.for_project(task.project).qa.checks
                trial = await checked_merge(worktrees.merges, task, checks, self.run_check, confine)
                try:
                    commit = await worktrees.merges.land(trial)
                finally:
                    await worktrees.merges.discard(trial)
                ran = trial.checks
            pushed = await push_default_branch(worktrees)
            cleaned = await worktrees.cleanup(task)
        note = (
            f"merged {task.branch} into {worktrees.default_branch} as {commit[:12]} "
            f"on {self.name}; {pushed}; {cleaned.reason}"
        )
        return RunReport(commit=commit, note=note, checks=ran)

    async def _set_aside(self, worktrees: Worktrees, run: Run, task: Task) -> None:
        """What the lost attempt left is kept under a ref, never built on."""
        name = f"{run.id}-{run.attempts - 1}"
        kept = await worktrees.history.set_aside(task, name)
        if kept:
            log.warning(
                "%s: the worktree held what a lost attempt of %s left; kept as "
                "refs/t25/leftovers/%s (%s) and reset",
                task.id,
                run.id,
                name,
                kept[:12],
            )

    async def _stage(
        self,
        lease: Lease,
        run: Run,
        task: Task,
        worktrees: Worktrees,
        path: Path,
        abort: asyncio.Event,
        claim: Claim | None = None,
    ) -> RunReport:
        """Do the run's stage: PR_OPEN's push, or QA's checks and the role's agent."""
        authors = claim.authors if claim else ()
        if run.stage is TaskState.PR_OPEN:
            forge = self.config.project(task.project).pull_request
            return await pull_request_run(
                self.runs, lease, run, task, worktrees, forge, self.forges, abort
            )
        policy = self.config.for_project(task.project)  # its own roles, checks and limits
        chain = policy.roles.chain(run.role) or []
        passed: list[str] = []
        if run.stage is TaskState.REVIEW:
            rule = self.config.policies.reviewer_differs_from_author
            chain, passed = not_the_authors(chain, authors, rule)
            if not chain:
                reason = "; ".join(passed)
                return RunReport(adapter_reason=reason, needs_input=_no_reviewer(run, reason, rule))
        checks: list[CheckResult] = []
        litter = ""
        if run.stage is TaskState.QA and policy.qa.checks:  # none: nothing to leave litter
            confine = CheckSandbox.of(self.config, task.project, run.id)
            before = await tree_state(path)
            checks = [await self.run_check(c, path, abort, confine) for c in policy.qa.checks]
            litter = litter_note(await put_back(path, before))
            if stuck := unstarted(checks):  # the environment's fault: no agent reads it
                return RunReport(
                    checks=tuple(checks), needs_input=unstarted_line(stuck), note=litter
                )
        prompt = await self.runs.prompt(lease, run, task, checks)
        session = claim.resume if claim else None
        goes_on = None
        if session is not None and any(_resumes(p, session) for p in chain):
            continued = await self.runs.prompt(lease, run, task, checks, continuing=True)
            goes_on = Continuation(session, continued)
        result, reason = await self._run_agent(
            lease, run, task, prompt, path, abort, chain, passed, goes_on
        )
        sent = goes_on.prompt if goes_on and result.resumed_session else prompt
        return RunReport(
            result=result, adapter_reason=reason, prompt=sent, checks=tuple(checks), note=litter
        )

    @contextlib.asynccontextmanager
    async def _locked(
        self, worktrees: Worktrees, task_id: str, abort: asyncio.Event
    ) -> AsyncIterator[None]:
        """Hold the worktree's lock, waiting while another process still holds it (a worker
        frozen past its lease keeps it until it wakes, learns its lease is gone, and lets go)."""
        while True:
            try:
                lock = worktrees.lock(task_id).acquire()
                break
            except WorktreeBusy:
                if abort.is_set():
                    raise
                await asyncio.sleep(LOCK_RETRY_S)
        try:
            yield
        finally:
            lock.release()

    async def _run_agent(
        self,
        lease: Lease,
        run: Run,
        task: Task,
        prompt: str,
        cwd: Path,
        abort: asyncio.Event,
        chain: Sequence[AgentProfile],
        passed: Sequence[str] = (),
        goes_on: Continuation | None = None,
    ) -> tuple[AgentResult, str]:
        """Run the chain: the first usable adapter, falling back past exhausted quota and a
        CLI with no working login (the run's own failure says so; the next profile is tried
        for this run, recorded with the reason, as for a CLI that is not installed).
        `passed` says why profiles before it were passed over (a review's authors); a
        profile that may continue the session `goes_on` names does (`_continue`)."""
        tried: frozenset[str] = frozenset()
        notes: list[str] = list(passed)
        overloaded: AgentResult | None = None  # the last adapter still overloaded, or logged out
        limits = self.config.limits
        budget = OutputBudget(limits.max_output_event_bytes, limits.max_log_bytes)
        while True:
            try:
                chosen = select_adapter(chain, self.adapters, self.quota, role=run.role, skip=tried)
            except NoAdapter as exc:
                if overloaded is not None:  # nobody else to ask: report that run as it was
                    return overloaded, "; ".join(notes)
                if not notes:
                    raise
                raise NoAdapter(f"{exc.message}; before that: {'; '.join(notes)}") from None
            profile = chosen.profile
            await self._announce(lease, run, task, chosen, "; ".join([*notes, chosen.reason]))
            request = self._request(run, task, prompt, cwd, profile)
            if goes_on is not None and _resumes(profile, goes_on.session):
                result = await self._continue(lease, chosen, request, goes_on, notes, abort, budget)
            else:
                result = await self._run_through_overload(
                    lease, chosen, request, notes, abort, budget
                )
            reason = "; ".join([*notes, chosen.reason])
            if result.failure in (Failure.OVERLOAD, Failure.LOGIN) and not abort.is_set():
                # Still overloaded after the retries, or not logged in: the next adapter may
                # serve; this one is skipped only for this run (neither is an exhausted
                # quota), and the last such run is reported as it was when none is left.
                _discard_log(overloaded)
                overloaded, tried = result, tried | {profile.adapter}
                notes.append(_passed_over(profile.adapter, result, len(self.overload_backoff_s)))
                continue
            if result.failure is not Failure.QUOTA:
                if overloaded is not result:
                    _discard_log(overloaded)
                return result, reason
            _discard_log(result)
            self.quota.mark(profile.adapter, result.quota_resets_at)
            tried |= {profile.adapter}
            notes.append(f"{profile.adapter}: quota exhausted ({result.error or 'no detail'})")

    async def _announce(
        self, lease: Lease, run: Run, task: Task, chosen: Selection, reason: str
    ) -> None:
        """Record that the run starts on `chosen`, with why it was chosen."""
        await self.runs.record(
            lease,
            RunStarted(
                task_id=task.id,
                run_id=run.id,
                worker=self.name,
                adapter=chosen.profile.adapter,
                adapter_reason=reason,
                cli_version=await chosen.adapter.version(),
                model=chosen.profile.model,
                attempt=run.attempts,
                head=await self.workspace.worktrees(task.project).tip(task),
            ),
        )

    def _request(
        self, run: Run, task: Task, prompt: str, cwd: Path, profile: AgentProfile
    ) -> AgentRequest:
        policy = self.config.for_project(task.project)
        return AgentRequest(
            task_id=task.id,
            run_id=run.id,
            role=run.role,
            stage=run.stage,
            prompt=prompt,
            cwd=cwd,
            model=profile.model,
            args=tuple(profile.args),
            timeout_s=float(policy.timeout_for(profile)),
            env_passthrough=tuple(profile.env_passthrough),
            private_home=profile.private_home,
            sandbox=policy.sandbox.for_profile(profile),
            sandbox_image=profile.sandbox_image,
            network=policy.sandbox.network,
            allow_hosts=policy.sandbox.hosts_for(run.role),
            hidden=self.config.private_paths(),
            read_paths=tuple(policy.sandbox.read_paths),
            caps=RunCaps.of(policy.limits),
            max_log_bytes=self.config.limits.max_log_bytes,
            log_dir=self.config.root / ".factory" / RUN_LOGS,
            tools=tools_for(run.role, profile.tools),
            at_checkout=policy.sandbox.tree_at == "checkout",
        )

    async def _continue(
        self,
        lease: Lease,
        chosen: Selection,
        request: AgentRequest,
        goes_on: Continuation,
        notes: list[str],
        abort: asyncio.Event,
        budget: OutputBudget,
    ) -> AgentResult:
        """Continue the last dev run's session with what is new; a CLI that cannot (the
        session is not on this host, or is gone) gets `request`, the whole prompt, once."""
        session = goes_on.session
        resumed = request.model_copy(
            update={"prompt": goes_on.prompt, "resume_session": session.session_id}
        )
        result = await self._run_through_overload(lease, chosen, resumed, notes, abort, budget)
        if result.failure is not Failure.EXIT or abort.is_set():
            return result
        _discard_log(result)  # not the run's: it starts again
        notes.append(
            f"{chosen.profile.adapter}: could not continue session {session.session_id} of "
            f"{session.run_id} ({result.error or 'no detail'}); ran afresh with the whole prompt"
        )
        return await self._run_through_overload(lease, chosen, request, notes, abort, budget)

    async def _run_through_overload(
        self,
        lease: Lease,
        chosen: Selection,
        request: AgentRequest,
        notes: list[str],
        abort: asyncio.Event,
        budget: OutputBudget,
    ) -> AgentResult:
        """Run `request` on `chosen`; a transient overload is retried on the same adapter
        after a growing pause (each noted), inside this run: it costs the task no attempt.
        Their output streams within the run's `budget`."""
        for pause in (*self.overload_backoff_s, None):
            async with OutputStream(
                lambda e: self.runs.record(lease, e), request.task_id, request.run_id, budget
            ) as stream:
                result = await chosen.adapter.run(request, stream.write, abort)
            if result.failure is not Failure.OVERLOAD or pause is None or abort.is_set():
                break
            _discard_log(result)  # retried: this try's log is not the run's
            notes.append(
                f"{chosen.profile.adapter}: overloaded, retried after {pause:g} s "
                f"({result.error or 'no detail'})"
            )
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(abort.wait(), pause)
        return result


@dataclass(frozen=True)
class Continuation:
    """A send-back's dev run may continue `session`, with `prompt`: what is new only."""

    session: ResumableSession
    prompt: str


def _resumes(profile: AgentProfile, session: ResumableSession) -> bool:
    """Whether a run on `profile` continues `session`: its profile allows it, on the adapter
    whose CLI holds the session."""
    return profile.resume and profile.adapter == session.adapter


def sweep_run_logs(where: Path) -> list[Path]:
    """Remove the run logs a T25 process that no longer runs left in `where` (killed before
    it reported them): a spool is named `<run>-<pid>-….log` after the process writing it."""
    removed = []
    for path in where.glob("R-*-*-*.log"):
        pid = path.name.split("-")[2]
        if pid.isdigit() and not alive(int(pid)):
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append(path)
    return removed


def _passed_over(adapter: str, result: AgentResult, retries: int) -> str:
    """Why a run went past a CLI that is not logged in, or still overloaded after retries."""
    if result.failure is Failure.LOGIN:
        return f"{adapter}: not logged in ({result.error or 'no detail'}); log in, then retry"
    return f"{adapter}: still overloaded after {retries} retries"


def _discard_log(result: AgentResult | None) -> None:
    """Remove the file an agent's run spooled its log to: reported, or not to be."""
    if result is not None and result.log is not None:
        with contextlib.suppress(FileNotFoundError):
            result.log.path.unlink()


def _took(started: float) -> str:
    return f"{time.monotonic() - started:.1f} s"


def _no_reviewer(run: Run, passed: str, rule: str) -> str:
    """The question a REVIEW run asks when every profile of its chain wrote the change."""
    what = "adapter" if rule == "adapter" else "adapter or model"
    return (
        f"no agent of roles.{run.role} differs from the author of the change "
        f"(policies.reviewer_differs_from_author: {rule}): {passed}. Add a profile to "
        f"roles.{run.role} whose {what} differs, or set "
        "policies.reviewer_differs_from_author: off; then answer to run the review again."
    )
