"""What QA's checks leave in a task's worktree, taken away before anything commits it.

A check runs code the change wrote, in the task's tree: a report it writes, a file it
reformats or removes, would otherwise be committed by the next stage that commits
(`git add --all`: a loop back to IMPLEMENTING, or DOCS) and merge as if reviewed. T25
notes the tree's state before the checks and, after them, puts back every path whose
state they changed: a file they created is removed, a tracked file they changed or removed
is checked out again from the branch's head. Ignored files (caches a tool regenerates) are
never committed and are left alone. A QA stage without checks takes no state at all.

Why this and not a copy-on-write view of the tree inside the sandbox: bubblewrap gives an
overlay only from 0.10 (Debian 12 ships 0.8), and an overlay needs the kernel's leave in a
user namespace; putting back what git sees works wherever git does, under every sandbox, for
two `git status` calls (`bench/check_litter.py` measures them).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from core.workspace.git import git_bytes, status_entries

# What `git status` reports of a path; an entry that is the same after the checks as before
# is not theirs (the tree T25 committed is clean, so before is normally empty).
State = frozenset[tuple[str, str]]


async def tree_state(path: Path) -> State:
    """The tree's changes against its head: (XY, path) for every changed, removed or
    untracked (not ignored) file."""
    raw = await git_bytes(
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--ignore-submodules=all",
        "--no-renames",
        cwd=path,
    )
    return frozenset(status_entries(raw))


async def put_back(path: Path, before: State) -> tuple[str, ...]:
    """Undo what changed in the tree since `before`: remove the files that appeared, check
    out from HEAD the tracked ones that changed. Returns the paths put back, sorted."""
    after = await tree_state(path)
    new = after - before
    created = sorted(name for xy, name in new if xy == "??")
    changed = sorted({name for xy, name in new if xy != "??"})
    for name in created:
        _remove(path, name)
    if changed:
        await git_bytes(
            "checkout", "HEAD", "--", *(f":(literal){n}" for n in changed),
            cwd=path,
        )  # fmt: skip
    return tuple(sorted({*created, *changed}))


def _remove(tree: Path, name: str) -> None:
    """Remove one file the checks created, and the folders it leaves empty up to the tree."""
    place = tree / name
    with contextlib.suppress(FileNotFoundError):
        place.unlink()
    folder = place.parent
    while folder != tree and folder.is_relative_to(tree):
        try:
            os.rmdir(folder)
        except OSError:
            break
        folder = folder.parent


def litter_note(put: tuple[str, ...], shown: int = 5) -> str:
    """'the checks left 2 files in the tree, removed before any commit: a.txt, b.log'."""
    if not put:
        return ""
    names = ", ".join(put[:shown]) + (f" and {len(put) - shown} more" if len(put) > shown else "")
    files = f"{len(put)} file{'' if len(put) == 1 else 's'}"
    return f"the checks left {files} in the tree, put back before any commit: {names}"
