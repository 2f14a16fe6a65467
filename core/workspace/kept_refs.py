"""The commit a branch names, read with `git rev-parse` once and kept while the files git
reads it from stay as they were (core.workspace.settled_files): the branch's loose ref,
`packed-refs` and the repository's config (which says how refs are stored). A stage read
its task branch's tip four times, each a git process; the branch moves only when one of
those files changes.

A loose ref is read as git reads it, from its file (git replaces it whole, by a rename): the
object name it holds is the branch's, and what that name peels to never changes, so each
name costs one `git rev-parse`, once. A branch T25 itself just moved is then read without
waiting for its file to settle. A branch in neither its loose file nor `packed-refs` does
not exist (a task's branch, before its worktree is made): no process either.

Not kept: a branch that is a symbolic ref (what it names can move without its file
changing) and any branch of a repository that stores refs in a reftable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

from core.workspace.settled_files import Kept, settled_state

_kept: Kept[tuple[str | None]] = Kept()
_peeled: dict[tuple[Path, str], str] = {}  # (repository, object name) → the commit it names
_PEELED_KEPT = 1024
_OBJECT_NAME = re.compile(rb"([0-9a-f]{40}|[0-9a-f]{64})\n?")


async def kept_commit(
    common: Path,
    ref: str,
    read: Callable[[], Awaitable[str | None]],
    peel: Callable[[str], Awaitable[str | None]],
) -> str | None:
    """The commit `ref` (refs/heads/…) names in the repository at `common`: `peel` of the
    object name its loose ref file holds, else what `read` says (kept while settled)."""
    named = loose_name(common, ref)
    if named is not None:
        return await _peel(common, named, peel)
    if _absent(common, ref):
        return None
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


def loose_name(common: Path, ref: str) -> str | None:
    """The object name `ref`'s loose file holds; None when it has none (packed, absent, a
    symbolic ref) or the repository keeps its refs in a reftable."""
    if (common / "reftable").exists():
        return None
    try:
        held = (common / ref).read_bytes()
    except OSError:
        return None
    found = _OBJECT_NAME.fullmatch(held)
    return found.group(1).decode() if found else None


def _absent(common: Path, ref: str) -> bool:
    """Whether `ref` is in neither its loose file nor `packed-refs` (read in that order, as
    git reads them: a `git pack-refs` moving it in between is still seen). False when
    unsure: a reftable, a loose file that is there but holds no object name."""
    if (common / "reftable").exists() or os.path.lexists(common / ref):
        return False
    try:
        packed = (common / "packed-refs").read_bytes()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    line = b" " + os.fsencode(ref) + b"\n"
    return line not in packed and not packed.endswith(line[:-1])


def made_commit(common: Path, name: str) -> None:
    """Note that `name` is a commit of the repository at `common` (T25 just made it): the
    branch that now names it is read without asking git what it peels to."""
    _keep(common, name, name)


def _keep(common: Path, name: str, commit: str) -> None:
    if len(_peeled) >= _PEELED_KEPT:
        del _peeled[next(iter(_peeled))]
    _peeled[(common, name)] = commit


async def _peel(
    common: Path, name: str, peel: Callable[[str], Awaitable[str | None]]
) -> str | None:
    commit = _peeled.get((common, name))
    if commit is None:
        commit = await peel(name)
        if commit is None:
            return None  # no such object (yet): asked again next time
        _keep(common, name, commit)
    return commit
