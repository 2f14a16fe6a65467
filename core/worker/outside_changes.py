"""What a run changed outside its worktree, as its report says it: whether it ran confined,
an unconfined run's main checkout changed meanwhile (kept, and the task asks), a broken
invariant undone (the worktree back to T25's last commit), and links that lead outside.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from core.config.schema import Config
from core.domain.models import Run, Task, TaskState
from core.domain.reports import RunReport
from core.errors import T25Error
from core.ports import AgentAdapter
from core.workspace.watch import Undone, Watched
from core.workspace.worktrees import Worktrees


def runs_agent_code(run: Run) -> bool:
    """Whether a run of this stage executes anything but T25's own code: PR_OPEN is T25's
    push, with hooks off, so it is not watched (no fingerprint of the main checkout before
    and after it)."""
    return run.stage is not TaskState.PR_OPEN


class Watching:
    """A run under watch (or not, when it runs no agent code): `finish` says what it
    changed outside its worktree, and what T25 put back."""

    def __init__(self, worktrees: Worktrees, run: Run, watched: Watched | None) -> None:
        self.worktrees, self.run, self.watched = worktrees, run, watched

    async def finish(self, report: RunReport) -> Undone:
        if self.watched is None:
            return Undone()
        return await self.worktrees.watch.finish(self.watched, confined=confined(self.run, report))


def confined_ahead(
    run: Run, task: Task, config: Config, adapters: Mapping[str, AgentAdapter]
) -> bool:
    """Whether the run is known before it starts to run nothing outside bubblewrap: an
    agent's stage whose every profile in the role's chain has an adapter that confines that
    profile's sandbox here - and for QA, whose checks run beside its agent, the project's
    sandbox setting confines here too (its checks run under it: CheckSandbox.of; the agents'
    adapters tell, as the checks' sandbox is theirs). Such a run answers for nothing
    (`confined`), so no fingerprint of the main checkout is taken around it: up to four git
    processes fewer (~110 ms at 50,000 files), and never the "before" another run's undo
    goes back to (the operator's work since it started is not put back)."""
    if run.stage is TaskState.PR_OPEN:
        return False
    policy = config.for_project(task.project)
    chain = policy.roles.chain(run.role) or []
    for profile in chain:
        adapter = adapters.get(profile.adapter)
        if adapter is None or not adapter.confines(policy.sandbox.for_profile(profile)):
            return False
    if run.stage is TaskState.QA and chain:  # and its checks, under the project's setting
        adapter = adapters[chain[0].adapter]
        return adapter.confines(policy.sandbox.mode)
    return bool(chain)


@asynccontextmanager
async def watching(
    worktrees: Worktrees,
    run: Run,
    task: Task,
    config: Config,
    adapters: Mapping[str, AgentAdapter],
) -> AsyncIterator[Watching]:
    """Watch the main checkout around a run of `task` (an implementing agent may commit on
    the task branch), unless it is known to run confined (`confined_ahead`); a run stopped
    midway is no longer watched."""
    watched = None
    if runs_agent_code(run) and not confined_ahead(run, task, config, adapters):
        implementing = run.stage is TaskState.IMPLEMENTING
        watched = await worktrees.watch_run(task, may_commit=implementing)
    try:
        yield Watching(worktrees, run, watched)
    finally:
        if watched is not None:
            worktrees.watch.abandon(watched)


def confined(run: Run, report: RunReport) -> bool:
    """Whether nothing the run executed could reach the main checkout: its agent and its
    checks all ran in bubblewrap, or no agent code ran at all (PR_OPEN is T25's own push,
    with hooks off; a review with no reviewer left ran nothing). A run that ended in an
    error before saying what ran is not."""
    if not runs_agent_code(run):
        return True
    if report.result is None and report.error:
        return False
    ran = [check.confined for check in report.checks]
    if report.result is not None:
        ran.append(report.result.confined)
    return all(ran)


def changed_meanwhile(report: RunReport, undone: Undone) -> RunReport:
    """An unconfined run during which the main checkout changed: T25 cannot tell the run's
    doing from the operator's, so the run's work is kept and the task asks (the git files
    that run programs were put back at once, their changed copies kept)."""
    if not undone.changes:
        return report
    put_back = f"T25 put back {', '.join(undone.put_back)}" if undone.put_back else ""
    return report.model_copy(
        update={
            "changed_meanwhile": undone.changes,
            "undone": put_back,
            "evidence": undone.evidence,
        }
    )


async def undo(
    worktrees: Worktrees, task: Task, report: RunReport, undone: Undone, last_commit: str | None
) -> RunReport:
    """The invariant was broken: nothing the run left is built on. The worktree goes back
    to T25's last commit, and the report says what was put back."""
    put_back = ", ".join(undone.put_back) or "nothing to put back"
    reset = f"reset the worktree to {(last_commit or '?')[:12]}"
    try:
        if last_commit is not None:
            await worktrees.history.reset(task, last_commit)
    except T25Error as exc:  # the run broke its worktree too: the violation stands
        reset = f"could not reset the worktree ({exc.message})"
    return report.model_copy(
        update={
            "violation": undone.changes,
            "undone": f"T25 put back {put_back} and {reset}",
            "evidence": undone.evidence,
        }
    )


def outward(links: tuple[str, ...]) -> Undone:
    """A tree about to be committed that links outside itself, as a violation."""
    lines = tuple(f"symbolic link {link} leads outside the worktree" for link in links)
    return Undone(lines, evidence=json.dumps({"changes": lines}, indent=2))
