"""Sparse checkouts: a task's worktree follows the main checkout's sparse cone, and a
change outside it is refused with its paths.

`git worktree add`, run in a sparse main checkout, gives the new worktree the same
sparse-checkout patterns (git 2.36 and later), so the worktree holds what the main
checkout holds. A file an agent writes outside the cone is one git will not stage (and a
file outside it that the agent changed would be committed without anyone having seen it in
a checkout): T25 refuses the commit, naming the paths, instead of failing on git's hint.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from core.errors import WorktreeRefused
from core.workspace.config_values import flag, kept_values
from core.workspace.git import git, git_bytes, status_entries

_SHOWN = 5
# git's own words before the paths it will not stage (`git add`, LC_ALL=C).
_GIT_SAYS = "outside of your sparse-checkout definition"


async def cone(tree: Path) -> tuple[str, ...] | None:
    """The directories of the sparse cone `tree` follows; None when it is not sparse in
    cone mode (not sparse at all, or a non-cone pattern list)."""
    said = await kept_values(tree)
    if not flag(said, "core.sparsecheckout"):
        return None
    if flag(said, "core.sparsecheckoutcone") is False:
        return None
    listed = await git("sparse-checkout", "list", cwd=tree, check=False, drivers_from=())
    return tuple(line.strip("/") for line in listed.splitlines() if line.strip("/"))


def in_cone(path: str, dirs: tuple[str, ...]) -> bool:
    """Whether cone mode includes `path`: files at the top, everything below a cone
    directory, and the files directly inside each directory that leads to one."""
    parent = posixpath.dirname(path)
    return not parent or any(
        path.startswith(f"{d}/") or d == parent or d.startswith(f"{parent}/") for d in dirs
    )


async def outside(tree: Path) -> tuple[str, ...]:
    """The changed paths of `tree` (changes and untracked files) outside its cone."""
    dirs = await cone(tree)
    if dirs is None:
        return ()
    raw = await git_bytes("status", "--porcelain=v1", "-z", "--untracked-files=all", cwd=tree)
    return tuple(name for _, name in status_entries(raw) if not in_cone(name, dirs))


def refusal(paths: list[str] | tuple[str, ...]) -> WorktreeRefused:
    shown = ", ".join(paths[:_SHOWN]) + (
        f" … and {len(paths) - _SHOWN} more" * (len(paths) > _SHOWN)
    )
    return WorktreeRefused(
        f"the change writes outside the sparse checkout the worktree follows (the main "
        f"checkout's): {shown}",
        hint="keep the change inside the sparse-checkout cone, or widen the main checkout's "
        "(git sparse-checkout add DIR), then retry",
    )


async def refuse_outside(tree: Path) -> None:
    """Refuse (WorktreeRefused) a change outside the worktree's sparse cone, naming it."""
    found = await outside(tree)
    if found:
        raise refusal(found)


def unstaged(stderr: str) -> list[str] | None:
    """The paths `git add` would not stage because they lie outside a sparse checkout
    (non-cone patterns: git's own list), or None when that is not why it failed."""
    if _GIT_SAYS not in stderr:
        return None
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if _GIT_SAYS in line)
    out = []
    for line in lines[start + 1 :]:
        if line.startswith("hint:"):
            break
        if line.strip() and not line.rstrip().endswith(":"):
            out.append(line.strip())
    return out
