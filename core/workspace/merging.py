"""A merge made where the checkout is: tried, checked, then landed.

Serve merges itself when it holds a checkout of the task's repository with the task's
branch; otherwise a worker on a host that has one does it, as a leased run of role
`merge` (core.domain.models.MERGE_ROLE). Both go through here: the merge commit made in
a trial worktree (core.workspace.trial_merge), `qa.checks` run on it confined as QA's, and
only when every required check passes the default branch moved by fast-forward. A check
that could not start refuses the merge naming its program: the environment's fault, not
the change's.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from core.config.policy_config import QACheck
from core.domain.agent import CheckSandbox
from core.domain.check_start import WHERE_CHECKS_RUN, unstarted, unstarted_line
from core.domain.models import Task
from core.domain.text import printable
from core.errors import MergeRefused
from core.ports import CheckRunner
from core.workspace.git import run_git

if TYPE_CHECKING:
    from core.workspace.task_trees import TaskTrees
    from core.workspace.trial_merge import Merges, TrialMerge


async def checked_merge(
    merges: Merges,
    task: Task,
    checks: Sequence[QACheck],
    run_check: CheckRunner | None,
    confine: CheckSandbox,
) -> TrialMerge:
    """The merge of the commit REVIEW approved, made in a trial worktree with `checks` run
    on the result; refused (MergeRefused, the trial removed, the default branch where it
    was) when it cannot be made or a required check fails. The caller lands it
    (`Merges.land`) and discards it after."""
    if checks and run_check is None:
        raise MergeRefused(
            "this T25 process cannot run the QA checks a merge must pass",
            hint="merge from `t25 merge`, the cockpit or `t25 serve`",
        )
    trial = await merges.trial_merge(task, message=merge_message(task))
    where = trial.path
    assert where is not None, "a trial merge is checked out"
    try:
        abort = asyncio.Event()
        results = [await run_check(c, where, abort, confine) for c in checks if run_check]
    except BaseException:
        await merges.discard(trial)
        raise
    stuck = unstarted(results)
    if stuck:  # the environment's fault: say so, and do not blame the change
        await merges.discard(trial)
        raise MergeRefused(
            f"the merge of {task.branch} is refused: {unstarted_line(stuck)} "
            f"(an environment error, not the change's); {merges.trees.default_branch} is unchanged",
            hint=f"{WHERE_CHECKS_RUN}; then merge again",
        )
    failed = [c for c in results if c.required and not c.passed]
    if failed:
        await merges.discard(trial)
        first = failed[0]
        said = printable(first.excerpt.strip().splitlines()[-1]) if first.excerpt.strip() else ""
        raise MergeRefused(
            f"the merge of {task.branch} fails the required QA check{'s' * (len(failed) > 1)} "
            f"{', '.join(c.name for c in failed)} ({first.name}: exit {first.exit_code}"
            f"{': ' + said[:200] if said else ''}); "
            f"{merges.trees.default_branch} is unchanged",
            hint=f"bring {task.branch} up to date with {merges.trees.default_branch} "
            "so the checks pass on the merge, then merge",
        )
    return dataclasses.replace(trial, checks=tuple(results))


def merge_message(task: Task) -> str:
    """The merge commit's message."""
    return f"Merge {task.branch}: {task.title} ({task.id})"


async def merged_already(trees: TaskTrees, task: Task) -> str | None:
    """The default branch's head, when the commit REVIEW approved is already in it (a merge
    job whose worker died after landing, run again); None otherwise."""
    reviewed = task.reviewed_head
    if reviewed is None:
        return None
    default = f"refs/heads/{trees.default_branch}"
    inside = await run_git(
        "merge-base", "--is-ancestor", reviewed, default, cwd=trees.repo, drivers_from=()
    )
    if inside.code != 0:
        return None
    head = await run_git("rev-parse", default, cwd=trees.repo, drivers_from=())
    return head.out.decode().strip() or None
