"""The merge of a task branch: made on no branch, tried in a worktree of its own, landed.

**Merge is the only write to the main checkout**, and it is a human action. The merge
commit (`--no-ff`: the default branch's head and the reviewed commit as parents) is made
by `git merge-tree` on no branch and checked out in a trial worktree (`<root>/.merge/<id>`)
where the QA checks run on it (core.workspace.merging); only then does the default branch
move, by fast-forward to that tested commit: never forced, never rewriting history. Refused
with the reason, nothing changed, when the checkout is elsewhere or dirty, the branch is
empty or moved since review, the merge conflicts, or the default branch moved during the
trial.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from core.domain.models import CheckResult, Task
from core.errors import MergeRefused, T25Error, WorktreeRefused
from core.workspace import lfs
from core.workspace.fingerprint import LANDED_REF
from core.workspace.git import (
    git,
    git_bytes,
    git_reason,
    listed,
    merge_tree,
    run_git,
    status_entries,
)
from core.workspace.history import commit_identity
from core.workspace.in_the_way import untracked_in_the_way
from core.workspace.task_trees import TaskTrees

log = logging.getLogger("t25.worktrees")

TRIAL_DIR = ".merge"  # trial worktrees of merges: <root>/.merge/<task id>
_SHOWN = 5  # new commits named in a refusal before "… and N more"


@dataclass(frozen=True)
class TrialMerge:
    """A merge made but not landed: the commit the default branch would move to, checked
    out in a worktree of its own (`path`) for the QA checks."""

    task_id: str
    branch: str
    commit: str  # the merge commit: parents `base` and `tip`, on no branch
    base: str  # the default branch's head it was made on
    tip: str  # the task branch's head it merges
    path: Path | None  # None: a merge the default branch already holds (core.control.merge_record)
    checks: tuple[CheckResult, ...] = ()  # what `qa.checks` gave on it (core.workspace.merging)


class Merges:
    """The merges of one repository's task branches into its default branch."""

    def __init__(self, trees: TaskTrees) -> None:
        self.trees = trees

    async def merge(self, task: Task, *, message: str) -> str:
        """Make the merge commit in a trial worktree and fast-forward the default branch
        to it (no checks in between); return the merge commit."""
        trial = await self.trial_merge(task, message=message)
        try:
            return await self.land(trial)
        finally:
            await self.discard(trial)

    async def trial_merge(self, task: Task, *, message: str) -> TrialMerge:
        """The merge of the very commit REVIEW approved into the default branch, made as a
        commit on no branch (`git merge-tree`: no checkout is touched) and checked out in a
        trial worktree of its own, where the QA checks run on it. Refused, with nothing
        changed, unless the main checkout could take it and it is a clean merge."""
        default, branch = self.trees.default_branch, task.branch
        with self.trees.working_on(task.id):
            await self._ready_for_merge()
            tip = await self.trees.rev(f"refs/heads/{branch}")
            if tip is None:
                raise MergeRefused(
                    f"the task branch {branch} does not exist", hint="nothing to merge"
                )
            await self.moved_since_review(task)
            base = await git("rev-parse", f"refs/heads/{default}", cwd=self.trees.repo)
            ahead = await git("rev-list", "--count", f"{base}..{tip}", cwd=self.trees.repo)
            if ahead == "0":
                raise MergeRefused(
                    f"{branch} has no commits beyond {default}", hint="nothing to merge"
                )
            tried = await merge_tree(self.trees.repo, base, tip)
            if tried.conflicts:
                raise MergeRefused(
                    f"merging {branch} into {default} conflicts in "
                    f"{listed(list(tried.conflicts))}; {default} is unchanged",
                    hint=f"bring {branch} up to date with {default} and resolve them, then merge",
                )
            if tried.tree is None:
                raise MergeRefused(
                    f"git could not merge {branch} into {default}: {git_reason(tried.err)}",
                    hint="fix what git reports, then merge",
                )
            tree = tried.tree
            identity = await commit_identity(self.trees.repo)
            commit = await git(
                *identity, "commit-tree", tree, "-p", base, "-p", tip, "-m", message,
                cwd=self.trees.repo, drivers_from=(),
            )  # fmt: skip
            in_the_way = await untracked_in_the_way(self.trees.repo, base, commit)
            if in_the_way:
                raise MergeRefused(
                    f"the merge would write over {len(in_the_way)} file(s) of the main "
                    f"checkout that git does not track: {listed(in_the_way)}",
                    hint="move them away (or commit them), then merge",
                )
            path = await self._trial_tree(task, commit)
        return TrialMerge(
            task_id=task.id, branch=branch, commit=commit, base=base, tip=tip, path=path
        )

    async def _trial_tree(self, task: Task, commit: str) -> Path:
        """`<root>/.merge/<id>`: a detached worktree at `commit`, for the checks to run in."""
        trials = self.trees.real_root() / TRIAL_DIR
        trials.mkdir(exist_ok=True)
        if trials.is_symlink() or trials.resolve() != self.trees.real_root() / TRIAL_DIR:
            raise WorktreeRefused(
                f"{trials} is not a plain directory inside the worktree root",
                hint=f"remove {trials}; T25 recreates it",
            )
        path = trials / self.trees.path_for(task.id).name
        await self._remove_trial(path)  # one a stopped merge left
        async with self.trees.admin_lock:
            done = await run_git(
                "worktree", "add", "--quiet", "--no-checkout", "--detach", "--", str(path),
                commit, cwd=self.trees.repo,
            )  # fmt: skip
        if done.code == 0:
            done = await self.trees.check_out(path)
        problem = await self.trees.unworkable(path) if done.code == 0 else None
        if done.code != 0 or problem:
            await self._remove_trial(path)
        if problem:
            raise MergeRefused(
                f"the merge of {task.branch} cannot be checked: {problem.message}",
                hint=problem.hint,
            )
        if done.code != 0:
            unfetched = lfs.unfetched_object(done.err)
            raise MergeRefused(
                f"git could not check out the merge of {task.branch}: "
                f"{unfetched or git_reason(done.err)}",
                hint=lfs.FETCH_HINT if unfetched else "fix what git reports, then merge",
            )
        return path

    async def land(self, trial: TrialMerge) -> str:
        """Move the default branch to the tried merge commit, by fast-forward only: refused,
        with nothing changed, when the main checkout cannot take it or the default branch
        has moved since the trial."""
        default = self.trees.default_branch
        with self.trees.working_on(trial.task_id):
            await self._ready_for_merge()
            now = await git("rev-parse", f"refs/heads/{default}", cwd=self.trees.repo)
            if now != trial.base:
                raise MergeRefused(
                    f"{default} moved from {trial.base[:12]} to {now[:12]} while the merge "
                    "was tried; it is unchanged",
                    hint="merge again: the checks run on the new merge",
                )
            # Named first, so that a run watching the checkout sees HEAD move along it as
            # T25's doing (core.workspace.fingerprint), whenever it looks.
            await git(
                "update-ref", f"{LANDED_REF}/{trial.task_id}", trial.commit,
                cwd=self.trees.repo, drivers_from=(),
            )  # fmt: skip
            # Explicit flags beat merge.* and branch.<name>.mergeOptions config.
            done = await run_git(
                "merge", "--ff-only", "--no-verify", "--no-autostash", "--quiet",
                trial.commit, cwd=self.trees.repo,
            )  # fmt: skip
            if done.code != 0:
                raise MergeRefused(
                    f"git refused to move {default} to the merge of {trial.branch}: "
                    f"{git_reason(done.err)}",
                    hint="fix what git reports in the main checkout, then merge",
                )
            after = await git("rev-parse", "HEAD", cwd=self.trees.repo)
            if after != trial.commit:  # cannot happen with --ff-only; checked anyway
                raise T25Error(
                    f"{default} is at {after[:12]}, not at the merge {trial.commit[:12]}",
                    hint="inspect the main checkout's history",
                )
            return after

    async def discard(self, trial: TrialMerge) -> None:
        """Remove the trial worktree (its commit is in the repository, or was refused)."""
        if trial.path is not None:
            await self._remove_trial(trial.path)

    async def _remove_trial(self, path: Path) -> None:
        """Remove a trial tree git lists as a worktree of this repository: forced, since it
        holds only T25's own merge commit and what the checks left in it. Anything else at
        its path is never deleted: the merge is refused, naming it."""
        listed = path in await self.trees.listing()
        if not listed:
            if os.path.lexists(path):
                raise MergeRefused(
                    f"{path} is in the way of the merge's trial worktree, and git does not "
                    "list it as one",
                    hint=f"move {path} away, then merge",
                )
            return
        async with self.trees.admin_lock:
            done = await run_git(
                "worktree",
                "remove",
                "--force",
                "--",
                str(path),
                cwd=self.trees.repo,
                drivers_from=(),
            )
        if done.code != 0 and not os.path.lexists(path):  # its entry outlived the directory
            await run_git("worktree", "prune", cwd=self.trees.repo, drivers_from=())
        elif done.code != 0:
            log.warning("t25: the trial worktree %s was not removed: %s", path, done.err.strip())

    async def _ready_for_merge(self) -> None:
        """Refuse unless the main checkout is on the default branch, with no merge in
        progress and no uncommitted change to a tracked file."""
        default = self.trees.default_branch
        head = await git("symbolic-ref", "--quiet", "HEAD", cwd=self.trees.repo, check=False)
        if head != f"refs/heads/{default}":
            now = head.removeprefix("refs/heads/") if head else "a detached HEAD"
            raise MergeRefused(
                f"the main checkout is on {now}, not on {default}",
                hint=f"switch it to {default} (git switch {default}), then merge",
            )
        if await self.trees.rev("MERGE_HEAD") is not None:
            raise MergeRefused(
                "a merge is already in progress in the main checkout",
                hint="finish it or abort it (git merge --abort) first",
            )
        raw = await git_bytes(
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=no",
            "--ignore-submodules=all",
            cwd=self.trees.repo,
        )
        dirty = [name for _, name in status_entries(raw)]
        if dirty:
            raise MergeRefused(
                f"the main checkout has uncommitted changes to {len(dirty)} tracked "
                f"file(s): {listed(dirty)}",
                hint="commit or stash them, then merge",
            )

    async def moved_since_review(self, task: Task) -> None:
        """Refuse (MergeRefused) a task branch whose head is not the commit REVIEW approved,
        naming the commits that are new. A task reviewed before T25 recorded the head
        (`reviewed_head` None) is not checked."""
        reviewed = task.reviewed_head
        tip = await self.trees.rev(f"refs/heads/{task.branch}")
        if reviewed is None or tip is None or tip == reviewed:
            return
        new = await git(
            "log", "--no-decorate", "--format=%h %s", f"{reviewed}..{tip}", cwd=self.trees.repo
        )
        lines = new.splitlines() or [f"{tip[:12]} (the branch no longer contains it)"]
        shown = "; ".join(lines[:_SHOWN]) + (
            f" … and {len(lines) - _SHOWN} more" * (len(lines) > _SHOWN)
        )
        raise MergeRefused(
            f"{task.branch} has moved since review approved {reviewed[:12]}: "
            f"{len(lines)} new commit(s): {shown}",
            hint=f"inspect them (git log {reviewed[:12]}..{task.branch}); a merge takes only "
            f"what was reviewed: `t25 recheck {task.id}` sends it through QA and review again",
        )

    async def landed(self, task: Task) -> str | None:
        """Whether the task branch's change is in the default branch although T25 did not
        merge it: merged there (its tip an ancestor), or squash-, rebase- or cherry-pick-
        merged — merging the branch now would change nothing (`git merge-tree`: the tree
        it would make is the default branch's own). How, in words; None when it is not."""
        tip = await self.trees.tip(task)
        default = f"refs/heads/{self.trees.default_branch}"
        if tip is None:
            return None
        inside = await run_git(
            "merge-base", "--is-ancestor", tip, default, cwd=self.trees.repo, drivers_from=()
        )
        if inside.code == 0:
            return f"{task.branch} is merged into {self.trees.default_branch}"
        tree = (await merge_tree(self.trees.repo, default, tip)).tree
        if tree is not None and tree == await git(
            "rev-parse", f"{default}^{{tree}}", cwd=self.trees.repo
        ):
            return (
                f"{task.branch}'s change is already in {self.trees.default_branch} "
                "(squash- or rebase-merged: merging it would change nothing)"
            )
        return None
