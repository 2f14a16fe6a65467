"""What a task branch changes, read from git: the whole branch, or one run's commit.

The whole branch is compared with where it left the default branch (their merge base);
once merged, with the default branch just before the merge commit that brought it in.
One implementing run's change is the commit T25 made of it (its message ends with
`T25 run R-n`: `Worker._execute`), against that commit's parent. Nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.workspace.git import git, git_bytes, run_git

# As Worktrees.diff: no external diff, no textconv, no colour, fixed prefixes.
_DIFF = ("diff", "-M", "--no-ext-diff", "--no-textconv", "--no-color")
_PREFIXES = ("--src-prefix=a/", "--dst-prefix=b/")


@dataclass(frozen=True)
class Change:
    """A diff between two commits, as `git diff base tip` prints it."""

    base: str
    tip: str
    text: str


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
