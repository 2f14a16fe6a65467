"""Where the main checkout's git files are, and which of its index entries are flagged
assume-unchanged or skip-worktree: both read once and kept while the files they come from
stay as they were (core.workspace.settled_files)."""

from __future__ import annotations

import os
from pathlib import Path

from core.workspace.git import git, git_bytes
from core.workspace.settled_files import Kept, settled_state

_flags: Kept[dict[str, str]] = Kept()
_dirs: Kept[tuple[Path, Path]] = Kept()


async def git_dirs(repo: Path) -> tuple[Path, Path]:
    """The checkout's git directory and the common one (they differ in a linked worktree)."""
    dot_git = repo / ".git"
    state = settled_state([dot_git])
    kept = _dirs.get(repo, state)
    if kept is not None:
        return kept
    out = await git(
        "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir",
        cwd=repo, drivers_from=(),
    )  # fmt: skip
    git_dir, common = (Path(p) for p in out.splitlines())
    _dirs.put(repo, state, (git_dir, common))
    return git_dir, common


async def flagged_entries(repo: Path, index: Path) -> dict[str, str]:
    """The paths whose index entry carries assume-unchanged (a lower-case tag) or
    skip-worktree (`S`), from `git ls-files -v -z`, read again only when `index` changed."""
    state = settled_state([index])
    kept = _flags.get(index, state)
    if kept is not None:
        return dict(kept)
    raw = await git_bytes("ls-files", "-v", "-z", cwd=repo, drivers_from=())
    flags: dict[str, str] = {}
    for entry in filter(None, os.fsdecode(raw).split("\0")):
        tag, _, path = entry.partition(" ")
        if tag.islower() or tag == "S":
            flags[path] = f"flag {tag}"
    _flags.put(index, state, flags)
    return dict(flags)
