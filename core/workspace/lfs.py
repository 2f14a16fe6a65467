"""What a repository that keeps files in Git LFS needs of T25, and what T25 says when it
cannot give it.

With git-lfs on PATH, T25's git calls run its filter (`core.workspace.lfs_filter`): a
worktree holds the real files, smudged from the main checkout's local LFS store, and a file
written under an LFS pattern is committed through LFS. Without it, a worktree would hold
pointer files (a check that needs the file fails, far from the cause) and an agent's new
file would be committed as a raw blob; T25 refuses the worktree instead, in one line.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from core.workspace.git import run_git
from core.workspace.lfs_filter import lfs_program

# Every `.gitattributes` in the tree, at any depth.
ATTRIBUTE_FILES = ":(glob)**/.gitattributes"
LFS_ATTRIBUTE = r"filter=lfs([[:space:]]|$)"
_SMUDGE_FAILED = re.compile(r"^fatal: (.+): smudge filter lfs failed$", re.MULTILINE)


async def uses_lfs(repo: Path, rev: str | None = None) -> bool:
    """Whether a `.gitattributes` of `rev` (default: the index of the tree at `repo`)
    sends some path through the lfs filter. `git grep` reads blobs and runs nothing."""
    where = ("-e", LFS_ATTRIBUTE, rev) if rev else ("--cached", "-e", LFS_ATTRIBUTE)
    done = await run_git(
        "grep", "-l", "-I", "-E", *where, "--", ATTRIBUTE_FILES, cwd=repo, drivers_from=()
    )
    return done.code == 0 and bool(done.out.strip())


def missing_lfs(where: str) -> str:
    """The line that says git-lfs is missing for a repository that needs it."""
    return (
        f"{where} keeps files in Git LFS (.gitattributes: filter=lfs) but git-lfs is not "
        "on PATH: a worktree would hold pointer files and files under LFS patterns would be "
        "committed as raw blobs"
    )


async def lfs_problem(tree: Path) -> str | None:
    """Why a worktree of this repository cannot be worked: it uses LFS and git-lfs is not
    on PATH; None when all is well."""
    if lfs_program() is not None or not await uses_lfs(tree):
        return None
    return missing_lfs("the repository")


def unfetched_object(stderr: str) -> str | None:
    """A checkout that failed because an LFS object is not in the local store (T25 fetches
    nothing), in words; None for any other failure."""
    found = _SMUDGE_FAILED.search(stderr)
    if found is None:
        return None
    return (
        f"the Git LFS content of {os.fsdecode(found.group(1))} is not in the main checkout's "
        "local LFS store, and T25 downloads nothing"
    )


FETCH_HINT = "run `git lfs fetch` (or `git lfs pull`) in the main checkout, then retry"
