"""What a task branch changes, read from git: the whole branch, or one run's commit.

The whole branch is compared with where it left the default branch (their merge base);
once merged, with the default branch just before the merge commit that brought it in.
One implementing run's change is the commit T25 made of it (its message ends with
`T25 run R-n`: `Worker._execute`), against that commit's parent. Nothing here writes.

`Changes` is what a worker reads of the task branch it works (`Worktrees.changes`): its
diff and counts since the merge base, manifests at both ends, the paths two commits differ in.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from core.domain.manifests import MAX_MANIFEST_CHARS, ManifestChange
from core.domain.models import DiffStat, Task
from core.errors import WorktreeRefused
from core.workspace.git import git, git_bytes, run_git

if TYPE_CHECKING:
    from core.workspace.task_trees import TaskTrees

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's tree with nothing in it
# Every diff here: no external diff, no textconv, no colour, fixed prefixes.
_DIFF = ("diff", "-M", "--no-ext-diff", "--no-textconv", "--no-color")
_PREFIXES = ("--src-prefix=a/", "--dst-prefix=b/")


@dataclass(frozen=True)
class Change:
    """A diff between two commits, as `git diff base tip` prints it."""

    base: str
    tip: str
    text: str


class Changes:
    """What the task branches of one repository change, for the worktrees' own reads:
    against where each left the default branch, or between two commits."""

    def __init__(self, trees: TaskTrees) -> None:
        self.trees = trees

    async def span(self, task: Task) -> tuple[str, str]:
        """(merge-base with the default branch, tip of the task branch): found once for
        several reads of the same branch (each read finds it otherwise, two git processes)."""
        tip = await self.trees.rev(f"refs/heads/{task.branch}")
        if tip is None:
            raise WorktreeRefused(
                f"the task branch {task.branch} does not exist",
                hint="the task has no worktree yet; nothing to compare",
            )
        return await self.trees.merge_base(tip), tip

    async def diff(self, task: Task, span: tuple[str, str] | None = None) -> str:
        """The unified diff of the task branch since it left the default branch."""
        base, tip = span or await self.span(task)
        raw = await git_bytes(*_DIFF, *_PREFIXES, base, tip, "--", cwd=self.trees.repo)
        return raw.decode(errors="replace")

    async def diff_stat(self, task: Task, span: tuple[str, str] | None = None) -> DiffStat:
        """Files, added and deleted lines of the task branch since it left the default
        branch; a binary file counts as a file with no lines."""
        base, tip = span or await self.span(task)
        raw = await git_bytes(
            "diff", "--raw", "--numstat", "-z", "-M", "--no-ext-diff", "--no-textconv",
            "--no-color", base, tip, "--", cwd=self.trees.repo,
        )  # fmt: skip
        fields = os.fsdecode(raw).split("\0")
        removed, i = _removed(fields)
        files, renamed_from, added, deleted = [], [], 0, 0
        while i < len(fields):  # then `--numstat`: added, deleted, name
            head = fields[i]
            i += 1
            if not head:
                continue
            plus, minus, name = head.split("\t", 2)
            if not name:  # a rename: the old and new names follow
                renamed_from.append(fields[i])
                name, i = fields[i + 1], i + 2
            files.append(name)
            if plus != "-":
                added, deleted = added + int(plus), deleted + int(minus)
        return DiffStat(
            files=tuple(files),
            renamed_from=tuple(renamed_from),
            removed=removed,
            added=added,
            deleted=deleted,
        )

    async def changed(self, before: str | None, after: str) -> tuple[str, ...]:
        """The paths that differ between two commits (every path of `after` with no `before`)."""
        base = before or EMPTY_TREE
        raw = await git_bytes(
            "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv",
            base, after, "--", cwd=self.trees.repo,
        )  # fmt: skip
        return tuple(name for name in os.fsdecode(raw).split("\0") if name)

    async def manifests(
        self, task: Task, paths: Sequence[str], span: tuple[str, str] | None = None
    ) -> tuple[ManifestChange, ...]:
        """Each of `paths` as text where the task branch left the default branch and at its
        tip (None where it does not exist, is not UTF-8 or is over MAX_MANIFEST_CHARS)."""
        if not paths:
            return ()
        base, tip = span or await self.span(task)
        out = []
        for path in paths:
            ends = [await self._text_at(commit, path) for commit in (base, tip)]
            out.append(ManifestChange(path=path, before=ends[0], after=ends[1]))
        return tuple(out)

    async def _text_at(self, commit: str, path: str) -> str | None:
        # `cat-file blob` runs no filter or textconv: nothing a repository plants.
        done = await run_git(
            "cat-file", "blob", f"{commit}:{path}", cwd=self.trees.repo, drivers_from=()
        )
        if done.code != 0:
            return None
        try:
            text = done.out.decode()
        except UnicodeDecodeError:
            return None
        return text if len(text) <= MAX_MANIFEST_CHARS else None


async def _rev(repo: Path, ref: str) -> str | None:
    sha = await git(
        "rev-parse", "--quiet", "--verify", f"{ref}^{{commit}}", cwd=repo, check=False,
        drivers_from=(),
    )  # fmt: skip
    return sha or None


async def _diff(repo: Path, base: str, tip: str) -> Change:
    raw = await git_bytes(*_DIFF, *_PREFIXES, base, tip, "--", cwd=repo, drivers_from=())
    return Change(base=base, tip=tip, text=raw.decode(errors="replace"))


async def branch_change(repo: Path, default_branch: str, branch: str) -> Change | None:
    """The task branch's whole change; None when the branch is not in `repo`."""
    # Both ends in one git call: a branch that is not here fails it.
    done = await run_git(
        "rev-parse", f"refs/heads/{branch}^{{commit}}", f"refs/heads/{default_branch}^{{commit}}",
        cwd=repo, drivers_from=(),
    )  # fmt: skip
    ends = done.out.decode(errors="replace").split()
    if done.code != 0 or len(ends) != 2:
        return None
    tip, main = ends
    base = await git("merge-base", main, tip, cwd=repo, drivers_from=())
    if base == tip and tip != main:  # merged: compare with the default branch before it
        before = await _before_merge(repo, tip, main)
        if before is not None:
            return await _diff(repo, before, tip)
    return await _diff(repo, base, tip)


async def _before_merge(repo: Path, tip: str, main: str) -> str | None:
    """The first parent of the oldest merge on the default branch that has `tip` as a parent."""
    listed = await git(
        "rev-list", "--merges", "--parents", "--reverse", "--ancestry-path", f"{tip}..{main}",
        cwd=repo, drivers_from=(),
    )  # fmt: skip
    for line in listed.splitlines():
        _merge, *parents = line.split()
        if tip in parents[1:]:
            return parents[0]
    return None


async def run_change(repo: Path, branch: str, run_id: str) -> Change | None:
    """The change of the commit T25 made for implementing run `run_id` on `branch`; None
    when the branch, or such a commit, is not in `repo`."""
    tip = await _rev(repo, f"refs/heads/{branch}")
    if tip is None:
        return None
    found = await git(
        "log", "--format=%H", "--basic-regexp", f"--grep=^T25 run {run_id}$", tip,
        cwd=repo, drivers_from=(),
    )  # fmt: skip
    commits = found.split()
    if not commits:
        return None
    commit = commits[0]
    parent = await _rev(repo, f"{commit}^1")
    if parent is None:  # a root commit: nothing before it
        return None
    return await _diff(repo, parent, commit)


def _removed(fields: list[str]) -> tuple[tuple[str, ...], int]:
    """The deleted paths in `git diff --raw -z` output's leading entries (`:modes shas
    status`, then one path, two for a rename or copy), and where those entries end."""
    removed, i = [], 0
    while i < len(fields) and fields[i].startswith(":"):
        status = fields[i].rsplit(" ", 1)[-1]
        if status == "D":
            removed.append(fields[i + 1])
        i += 3 if status[:1] in ("R", "C") else 2
    return tuple(removed), i
