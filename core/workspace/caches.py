"""What a worktree's cleanup disregards: the caches tools make again (`worktrees.caches`).

A task's worktree is removed after a merge or an archive only if nothing in it could be
lost. Yet every Python task's tree holds `.pytest_cache` and `__pycache__` once its checks
ran, and a JavaScript or Rust one `node_modules/.cache` or `target/`: kept for those, each
tree would stay, gigabytes at a time. So an untracked or ignored path inside a directory the
configured list names is a cache, and does not keep the tree; anything else still does.

An entry is a directory name, or a few joined by `/` (`node_modules/.cache`), each part a
shell pattern (`*.egg-info`); it matches those directories at any depth, or only at the top
of the tree when it starts with `/` (`/target`). What it matches is the directory and all
below it: a file that merely bears the name (`target` as a file) is no cache. An untracked
nested repository is never one.

    sort_leftovers(entries, caches) -> Leftovers: what keeps the tree, what is a cache
    cache_of(path, caches)          -> the cache directory a path lies in, or None
    drop_untracked(tree, paths)     -> remove untracked cache files before the tree goes
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

KINDS = {"??": "untracked", "!!": "ignored"}


@dataclass(frozen=True)
class Leftovers:
    """A worktree's files that are not committed, sorted: `keeping` (kind -> paths) would be
    lost with the tree, so they keep it; `untracked_caches` and `ignored_caches` would not,
    and `cache_dirs` are the cache directories that hold them."""

    keeping: dict[str, list[str]]
    untracked_caches: tuple[str, ...] = ()
    ignored_caches: tuple[str, ...] = ()
    cache_dirs: tuple[str, ...] = ()

    @property
    def caches(self) -> tuple[str, ...]:
        return (*self.untracked_caches, *self.ignored_caches)


def sort_leftovers(entries: Iterable[tuple[str, str]], caches: Sequence[str]) -> Leftovers:
    """Sort `git status --porcelain` entries ((XY, path), ignored ones included): a change
    to a tracked file always keeps the tree; an untracked or ignored path inside a cache
    directory does not."""
    keeping: dict[str, list[str]] = {"uncommitted": [], "untracked": [], "ignored": []}
    found: dict[str, list[str]] = {"untracked": [], "ignored": []}
    dirs: dict[str, None] = {}
    for xy, name in entries:
        kind = KINDS.get(xy, "uncommitted")
        where = None if kind == "uncommitted" else cache_of(name, caches, kind == "untracked")
        if where is None:
            keeping[kind].append(name)
        else:
            found[kind].append(name)
            dirs[where] = None
    return Leftovers(keeping, tuple(found["untracked"]), tuple(found["ignored"]), tuple(dirs))


def cache_of(path: str, caches: Sequence[str], untracked: bool = False) -> str | None:
    """The cache directory (`pkg/__pycache__/`) `path` lies in, one of `caches` naming it,
    or None. `path` is relative to the tree, a directory ending with `/`; an `untracked`
    one so is a repository of its own (git lists no other directory so), never a cache."""
    if path.endswith("/") and untracked:
        return None
    parts = path.rstrip("/").split("/")
    dirs = parts if path.endswith("/") else parts[:-1]
    for entry in caches:
        end = _match_end(dirs, entry)
        if end is not None:
            return "/".join(dirs[:end]) + "/"
    return None


def _match_end(dirs: list[str], entry: str) -> int | None:
    """Where the first run of `dirs` that `entry` names ends, or None."""
    want = entry.strip("/").split("/")
    starts = [0] if entry.startswith("/") else range(len(dirs) - len(want) + 1)
    for start in starts:
        run = dirs[start : start + len(want)]
        if len(run) == len(want) and all(fnmatchcase(d, w) for d, w in zip(run, want, strict=True)):
            return start + len(want)
    return None


def drop_untracked(tree: Path, paths: Sequence[str]) -> None:
    """Remove the untracked cache files `paths` (files or links, as git lists them with
    `--untracked-files=all`), never following a link, and only where their directory is
    really inside `tree`. Git would not remove a tree holding them without --force; with
    them gone, the removal stays unforced (the empty directories left are nothing to git)."""
    real = os.path.realpath(tree)
    for name in paths:
        where = os.path.join(tree, name)
        if os.path.commonpath([real, os.path.realpath(os.path.dirname(where))]) != real:
            continue  # a directory on the way was swapped for a link: left for git to judge
        try:
            os.unlink(where)  # a link is removed, not what it points to
        except IsADirectoryError:
            shutil.rmtree(where)  # fd-based: never follows a link inside
        except FileNotFoundError:
            pass
