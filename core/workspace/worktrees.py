"""Task worktrees: the deliberately paranoid part of T25.

Every task gets a git worktree of its own at `<root>/<task id>`, on branch `<type>/<id>`,
created from the repository's default branch. Agents work there and nowhere else; T25
commits what they changed, measures the diff, cleans up after a merge or archive, and
merges into the main checkout only when a human asks.

`Worktrees` is the task worktrees of one repository (core.workspace.task_trees: paths,
ownership records, locks, making and adopting a tree), with the parts built on them:

* `history` (core.workspace.history): T25's commits on the task branch, resets, rewinds,
  snapshots and what a lost attempt left, each kept under a ref;
* `changes` (core.workspace.changes): the branch's diff, its counts and manifests;
* `merges` (core.workspace.merging): the merge tried in a trial worktree, then landed;
* and, here, the cleanup and the fingerprint of the main checkout around a run
  (core.workspace.fingerprint, core.workspace.watch).

**Cleanup never loses work.** A tree with uncommitted, untracked or *ignored* files is
kept, and the reason names them (`git worktree remove` alone would delete ignored files);
only what tools make again (`worktrees.caches`, core.workspace.caches) goes with the tree.
A dry run is the same decision, said and not done.
Removal is `git worktree remove` without `--force`; nothing here ever deletes a tree
itself, but for a checked-out submodule git would refuse to remove, once it is found to
hold its recorded commit and nothing else (core.workspace.submodules). The branch is kept. The forced removals are git's, of a tree T25 has just added
and could not check out (empty, nobody's work: `TaskTrees._create`) and of a merge's trial
tree that git lists as a worktree (T25's own commit and what the checks left:
`Merges._remove_trial`); never of a tree cleanup is asked to remove, and never of a
directory git does not list.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from core.config.caches import DEFAULT_CACHES
from core.domain.backoff import retry
from core.domain.models import Task
from core.errors import WorktreeRefused
from core.workspace import submodules
from core.workspace.caches import Leftovers, drop_untracked, sort_leftovers
from core.workspace.changes import Changes
from core.workspace.fingerprint import SNAPSHOTS_REF, Fingerprint, fingerprint
from core.workspace.git import (
    default_branch,
    git_bytes,
    git_reason,
    listed,
    run_git,
    status_entries,
)
from core.workspace.history import History
from core.workspace.push_settings import read_push_settings
from core.workspace.task_trees import (
    ADMIN_RACE,
    ADMIN_RACE_RETRIES,
    TaskTrees,
    met_half_written_entry,
)
from core.workspace.trial_merge import Merges
from core.workspace.watch import Watch, Watched

if TYPE_CHECKING:
    from core.config.schema import Config


@dataclass(frozen=True)
class Cleanup:
    """The outcome of a cleanup: whether the tree was removed, and why (not). In a dry run
    (`dry_run`), whether it would be: the same decision, nothing done."""

    removed: bool
    reason: str
    dry_run: bool = False


class Worktrees(TaskTrees):
    """Create, adopt, commit in, diff, clean up and merge task worktrees of one repository.

    `repo` is the main checkout, `root` the configured worktree root, `owner` a stable
    identity of this T25 installation, written into every ownership record.
    """

    def __init__(
        self,
        repo: Path,
        root: Path,
        default_branch: str,
        *,
        owner: str,
        former: Sequence[str] = (),
        caches: Sequence[str] = DEFAULT_CACHES,
    ) -> None:
        super().__init__(repo, root, default_branch, owner=owner, former=former)
        self.caches = tuple(caches)  # what a cleanup disregards (core.workspace.caches)
        self.history = History(self)
        self.changes = Changes(self)
        self.merges = Merges(self)
        self.watch = Watch(self.repo)  # the runs going on (core.workspace.watch)
        # Read before any run of this process: where PR_OPEN pushes (push_settings.py).
        self.push_settings = read_push_settings(self.repo)

    async def cleanup(self, task: Task, *, dry_run: bool = False) -> Cleanup:
        """Remove the worktree if, and only if, nothing in it could be lost: caches
        (`worktrees.caches`) aside, no uncommitted, untracked or ignored file. `dry_run`:
        the same decision, said and not done."""
        path = self.path_for(task.id)
        with self.working_on(task.id):
            if not os.path.lexists(path) and path not in await self.listing():
                return Cleanup(False, f"no worktree at {path}; nothing to remove", dry_run)
            kept, caches = await self._may_remove(task, path)
            if kept is not None:
                return Cleanup(
                    False, f"{'would keep' if dry_run else 'kept'} {path}: {kept}", dry_run
                )
            inside = await submodules.changes(path)
            if inside:
                return Cleanup(
                    False,
                    f"{'would keep' if dry_run else 'kept'} {path}: changes inside submodules: "
                    f"{listed(list(inside))}",
                    dry_run,
                )
            if dry_run:
                return Cleanup(True, f"would remove {path}{_dropping(caches)}", dry_run)
            await asyncio.to_thread(drop_untracked, path, caches.untracked_caches)
            snapshot = await self.history.snapshot(task)
            held = await submodules.take_down(path, await self.admin_dir(path))
            if held:
                return Cleanup(
                    False, f"kept {path}: {held}; move or delete them, then clean up again"
                )
            # Never --force: if git sees something we did not, git's refusal stands.
            async with self.admin_lock:
                done = await run_git(
                    "worktree",
                    "remove",
                    "--",
                    str(path),
                    cwd=self.repo,
                    drivers_from=(self.repo, path),
                )
            if done.code != 0:
                return Cleanup(
                    False, f"kept {path}: git refused to remove it ({git_reason(done.err)})"
                )
            self.record_path(task.id).unlink(missing_ok=True)
            at = (
                f" (its head kept as {snapshot[:12]} under {SNAPSHOTS_REF}/{task.id}/)"
                if snapshot
                else ""
            )
            return Cleanup(
                True, f"removed {path}{_dropping(caches)}; branch {task.branch} kept{at}"
            )

    async def _may_remove(self, task: Task, path: Path) -> tuple[str | None, Leftovers]:
        """The one decision of a cleanup and of its dry run: (why the tree at `path` is
        kept, or None; its caches, which go with it)."""
        none = Leftovers({})
        try:
            await self.verify(task, path)
        except WorktreeRefused as exc:
            return f"{exc.message}; {exc.hint}", none
        listed = (await self.listing()).get(Path(os.path.realpath(path)), {})
        if "locked" in listed:
            why = f" ({listed['locked']})" if listed["locked"] else ""
            return f"git has it locked{why}; `git worktree unlock` it first", none
        left = await self._leftovers(path)
        dirt = _dirt(left)
        if dirt:
            return f"{dirt}; commit, move or delete them, then clean up again", left
        return None, left

    async def _leftovers(self, path: Path) -> Leftovers:
        """What the tree holds beyond its commit, its caches told apart."""
        raw = await git_bytes(
            "status",
            "--porcelain=v1",
            "-z",
            "--ignored=traditional",
            "--untracked-files=all",
            "--ignore-submodules=all",
            cwd=path,
        )
        return sort_leftovers(status_entries(raw), self.caches)

    async def fingerprint(self, task: Task | None = None) -> Fingerprint:
        """The main checkout's fingerprint, leaving out this worktree root; for a task's run,
        with its branch among the refs and its worktree's config among the git files."""
        if task is None:
            return await _past_half_written(lambda: fingerprint(self.repo, exclude=[self.root]))
        return await self._fingerprint(task, await self.admin_dir(self.path_for(task.id)))

    async def _fingerprint(self, task: Task, git_dir: Path) -> Fingerprint:
        return await _past_half_written(
            lambda: fingerprint(
                self.repo, exclude=[self.root], branch=task.branch, worktree_git_dir=git_dir
            )
        )

    async def watch_run(self, task: Task, *, may_commit: bool = False) -> Watched:
        """Start watching a run of `task` (`may_commit`: its agent may commit on the branch);
        `self.watch.finish` ends it. The worktree's entry is found now, before the run: what
        the run does to it is measured, never followed."""
        git_dir = await self.admin_dir(self.path_for(task.id))
        own = (f"refs/heads/{task.branch}",) if may_commit else ()
        return await self.watch.start(lambda: self._fingerprint(task, git_dir), may_move=own)


async def _past_half_written(read: Callable[[], Awaitable[Fingerprint]]) -> Fingerprint:
    """A fingerprint, read again when its `git status` met a worktree entry another
    process (another worker's `git worktree add`) was still writing."""
    return await retry(
        lambda _: read(),
        pauses=ADMIN_RACE.pauses(ADMIN_RACE_RETRIES),
        transient=met_half_written_entry,
    )


def _dirt(left: Leftovers) -> str:
    """'' when nothing keeps the tree, else '2 uncommitted, 1 ignored file(s): a.py, b.log …'."""
    counts = [f"{len(names)} {kind}" for kind, names in left.keeping.items() if names]
    if not counts:
        return ""
    every = [name for names in left.keeping.values() for name in names]
    return f"{', '.join(counts)} file(s): {listed(every)}"


def _dropping(left: Leftovers) -> str:
    """' (its caches with it: 3 files in .pytest_cache/, …)' when it holds any."""
    if not left.caches:
        return ""
    return f" (its caches with it: {len(left.caches)} files in {listed(list(left.cache_dirs))})"


class Workspace:
    """The worktrees of every configured project, owned by one T25 installation.

    `owner` names the installation (its store's: core.workspace.ownership); a worktree
    another installation made is never adopted."""

    def __init__(self, config: Config, *, owner: str, former: Sequence[str] = ()) -> None:
        self.config = config
        self.owner, self.former = owner, former
        self._by_project: dict[str, Worktrees] = {}

    def worktrees(self, project: str) -> Worktrees:
        if project not in self._by_project:
            p = self.config.project(project)
            repo = Path(p.repo)
            self._by_project[project] = Worktrees(
                repo,
                self.config.worktrees.root,
                p.default_branch or default_branch(repo),
                owner=self.owner,
                former=self.former,
                caches=self.config.worktrees.caches,
            )
        return self._by_project[project]
