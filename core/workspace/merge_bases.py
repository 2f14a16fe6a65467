"""The merge base of two commits, found once.

What two commits' merge base is never changes: it depends on their history alone, and
T25's git reads no replace refs (GIT_NO_REPLACE_OBJECTS). So it is kept by the two
commits' names, and a stage that asks for its branch's base three or four times (its
commit's check of the links it adds, then its diff, its figures, its review) starts one
`git merge-base` for it. A commit is its own merge base with itself: no process at all,
which is every task branch's first commit.

Not kept in a shallow repository (`shallow`: a fetch that deepens it can change the
answer) or one with grafts (`info/grafts`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

_KEPT = 1024
_kept: dict[tuple[Path, str, str], str] = {}  # (repository, commit, commit) -> merge base


async def merge_base(common: Path, a: str, b: str, find: Callable[[], Awaitable[str]]) -> str:
    """The merge base of the commits `a` and `b` (full object names) in the repository at
    `common`: `find`'s answer, asked once for the pair."""
    if a == b:
        return a
    key = (common, a, b)
    if (kept := _kept.get(key)) is not None:
        return kept
    found = await find()
    if found and not _rewritable(common):
        if len(_kept) >= _KEPT:
            del _kept[next(iter(_kept))]
        _kept[key] = found
    return found


def _rewritable(common: Path) -> bool:
    """Whether the repository's history can change under the same commit names."""
    return (common / "shallow").exists() or (common / "info" / "grafts").exists()


def forget() -> None:
    """Drop every kept merge base."""
    _kept.clear()
