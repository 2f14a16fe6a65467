"""What of the main checkout a merge would write over: files git does not track.

git refuses an untracked file in the way only when the fast-forward comes (after the merge's
checks have run), and overwrites an ignored one (an operator's `.env`) unasked; T25 asks
before either, so the merge is refused naming them.
"""

from __future__ import annotations

import os
from pathlib import Path

from core.workspace.git import git_bytes


async def untracked_in_the_way(repo: Path, base: str, commit: str) -> list[str]:
    """The paths `commit` adds to `base` where the checkout at `repo` already has something
    git does not track (the file itself, or a file where one of its folders would go)."""
    raw = await git_bytes(
        "diff", "--name-only", "-z", "--no-renames", "--diff-filter=A", base, commit, "--",
        cwd=repo,
    )  # fmt: skip
    return [name for name in os.fsdecode(raw).split("\0") if name and _taken(repo, name)]


def _taken(repo: Path, name: str) -> bool:
    parts = Path(name).parts
    folders = [repo.joinpath(*parts[:i]) for i in range(1, len(parts))]
    return os.path.lexists(repo / name) or any(
        os.path.lexists(f) and not f.is_dir() for f in folders
    )
