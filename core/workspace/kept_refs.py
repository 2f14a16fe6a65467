"""The commit a branch names, read with `git rev-parse` once and kept while the files git
reads it from stay as they were (core.workspace.settled_files): the branch's loose ref,
`packed-refs` and the repository's config (which says how refs are stored). A stage read
its task branch's tip four times, each a git process; the branch moves only when one of
those files changes.

Not kept: a branch that is a symbolic ref (what it names can move without its file
changing) and any branch of a repository that stores refs in a reftable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from core.workspace.settled_files import Kept, settled_state

_kept: Kept[tuple[str | None]] = Kept()


async def kept_commit(
    common: Path, ref: str, read: Callable[[], Awaitable[str | None]]
) -> str | None:
    """What `read` says `ref` (refs/heads/…) names in the repository at `common`."""
    files = _ref_files(common, ref)
    state = settled_state(files) if files is not None else None
    kept = _kept.get((common, ref), state)
    if kept is not None:
        return kept[0]
    commit = await read()
    _kept.put((common, ref), state, (commit,))
    return commit


def _ref_files(common: Path, ref: str) -> list[Path] | None:
    if (common / "reftable").exists():
        return None
    loose = common / ref
    try:
        if loose.read_bytes().startswith(b"ref:"):
            return None
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        pass  # packed, or absent: packed-refs says which
    except OSError:
        return None
    return [common / "config", loose, common / "packed-refs"]
