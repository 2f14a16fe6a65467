"""The branch under review is the branch T25 made.

T25 records on the task the head its last run left the task branch at (`Task.branch_head`,
written with the run's completion, under its lease). Every run after that checks, before its
worktree is made or adopted, that the branch still holds that commit: a branch deleted, or
moved to where the commit is not, outside T25 fails the run saying what was expected and what
was found, rather than being recreated from the default branch (QA and review would then
approve "0 files, +0 -0") or built on (DOCS would commit a leftover file as documentation).
Commits added on top, by the operator say, are theirs to keep: the branch still holds T25's.

A run that starts from a commit T25 names (`Task.rewind_to`: a reset, a retried
implementation) is not checked: it moves the branch there, whatever it holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.domain.models import Task
from core.errors import BranchMoved
from core.workspace.git import run_git

if TYPE_CHECKING:
    from core.workspace.worktrees import Worktrees


async def check_branch(worktrees: Worktrees, task: Task) -> None:
    """Refuse (BranchMoved) a task branch that no longer holds `task.branch_head`."""
    expected = task.branch_head
    if expected is None or task.rewind_to is not None:
        return
    tip = await worktrees.tip(task)
    if tip == expected:
        return
    restore = f"git branch -f {task.branch} {expected[:12]}"
    if tip is None:
        raise BranchMoved(
            f"{task.branch} was deleted outside T25: expected {expected[:12]}",
            hint=f"restore it ({restore}), then `t25 retry {task.id}`",
        )
    held = await run_git(
        "merge-base", "--is-ancestor", expected, tip, cwd=worktrees.repo, drivers_from=()
    )
    if held.code == 0:
        return
    default = await run_git(
        "rev-parse", "--verify", "--quiet", f"refs/heads/{worktrees.default_branch}",
        cwd=worktrees.repo, drivers_from=(),
    )  # fmt: skip
    on_default = default.code == 0 and default.out.decode().strip() == tip
    found = tip[:12] + (f" ({worktrees.default_branch}'s head)" if on_default else "")
    raise BranchMoved(
        f"{task.branch} was moved outside T25: expected {expected[:12]}, found {found}",
        hint=f"put it back ({restore}), then `t25 retry {task.id}`; "
        f"or start its implementation again: `t25 reset {task.id} --to IMPLEMENTING`",
    )
