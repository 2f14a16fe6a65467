"""What `t25 merge --dry-run` says a merge would do, found by trying it with nothing touched.

`git merge-tree --write-tree` (git 2.38 or later) makes the merge's tree in the object
store alone: no checkout, no index, no ref moves. It tells a clean merge from one that
conflicts, and which files conflict; a tree equal to the default branch's own is a branch
that adds nothing (merged already, or squash- or cherry-picked into it). The merge itself
is tried the same way (`Merges.trial_merge`), so the dry run and the merge agree. With
an older git the merge is not tried, and the dry run says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.domain.models import Task
from core.errors import MergeRefused
from core.workspace.git import git_said, listed, merge_tree, run_git

if TYPE_CHECKING:
    from core.workspace.worktrees import Worktrees

SHOWN = 10  # conflicting files named; the rest counted


@dataclass(frozen=True)
class MergePreview:
    """Why the merge would be refused (None: it would not), or how it would be made."""

    refusal: str | None = None
    made_as: str | None = None  # "as a merge commit onto trunk at 3e19ef1…", or "not tried: …"


async def preview_merge(worktrees: Worktrees, task: Task) -> MergePreview:
    """The merge of the task branch into the default branch, tried with nothing touched."""
    try:
        await worktrees.merges.moved_since_review(task)
    except MergeRefused as exc:
        return MergePreview(refusal=exc.message)
    branch, default = task.branch, worktrees.default_branch
    tip = await worktrees.tip(task)
    if tip is None:
        return MergePreview(refusal=f"the task branch {branch} does not exist: nothing to merge")
    base = await _rev(worktrees, f"refs/heads/{default}")
    tried = await merge_tree(worktrees.repo, base, tip)
    if tried.conflicts:
        return MergePreview(refusal=f"conflicts in {listed(tried.conflicts, SHOWN)}")
    if tried.tree is None:
        return MergePreview(made_as=f"(not tried: {await _cannot_try(worktrees, tried.err)})")
    if tried.tree == await _rev(worktrees, f"{base}^{{tree}}"):
        return MergePreview(refusal=f"nothing to merge: {branch} adds nothing to {default}")
    return MergePreview(made_as=f"as a merge commit onto {default} at {base[:12]}")


async def _rev(worktrees: Worktrees, ref: str) -> str:
    done = await run_git("rev-parse", "--verify", ref, cwd=worktrees.repo, drivers_from=())
    return done.out.decode().strip()


async def _cannot_try(worktrees: Worktrees, err: str) -> str:
    """Why git could not try the merge: too old a git, in so many words, or what it said."""
    done = await run_git("--version", cwd=worktrees.repo, drivers_from=())
    version = done.out.decode().strip().removeprefix("git version ")
    numbers = tuple(int(n) for n in version.split(".")[:2] if n.isdigit())
    if numbers and numbers < (2, 38):
        return f"git {version} cannot try a merge without a checkout; git 2.38 or later can"
    return f"git could not try it: {git_said(err) or 'no reason given'}"
