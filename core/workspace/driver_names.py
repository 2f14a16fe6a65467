"""The filter and merge driver names a directory's git config declares (with the identity and
sparse-checkout values a commit needs: core.workspace.config_values), read again only when
a file git reads them from changed.

Before every git call T25 switches off each driver the repository names
(`core.workspace.git.neutral_drivers`), which took a `git config` process in front of
nearly every git call: 78 of the 232 git processes one task started. The names only change
when one of the config files changes, so they are kept per directory under the state of
those files: a linked worktree's `.git` pointer file, the shared `config`, the worktree's
`config.worktree` and `commondir`, and the operator's global config (T25's git reads no
system config: GIT_CONFIG_NOSYSTEM). A `.git` directory counts by its identity (device and
inode: another in its place is seen), not its times, which change with every index write.

Kept (core.workspace.settled_files) only when it cannot be stale: every file settled when
its state was taken, and

* no config file has an `include` or `includeIf`: an included file may be anywhere, and
  whether a conditional one applies can depend on the branch; such a directory's names are
  read before every call, as before;
* the directory is the top of a checkout (it holds `.git`); any other is read every time.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

from core.workspace.settled_files import Kept, settled_state

_kept: Kept[bytes] = Kept()


async def driver_names(directory: Path, read: Callable[[Path], Awaitable[bytes]]) -> bytes:
    """The NUL-separated config keys `read` gives for `directory` (its `git config
    --name-only --get-regexp`), read again only when a config file changed."""
    files = config_files(directory)
    state = settled_state(files) if files is not None else None
    key = (directory, _identity(directory / ".git"))
    kept = _kept.get(key, state)
    if kept is not None:
        return kept
    names = await read(directory)
    if not _includes(names):
        _kept.put(key, state, names)
    return names


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.lstat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def keys_of(entries: bytes) -> bytes:
    """The NUL-separated keys of `git config --null --get-regexp` output (each entry is a
    key, then a line feed and its value when it has one)."""
    return b"\0".join(entry.split(b"\n", 1)[0] for entry in entries.split(b"\0") if entry)


def forget() -> None:
    """Drop every kept reading (the next call reads each directory's config again)."""
    _kept.clear()


def config_files(directory: Path) -> list[Path] | None:
    """The files git reads `directory`'s config from, or None when it is not the top of a
    checkout T25 can follow (no `.git`, a link, a pointer file it cannot read)."""
    dot_git = directory / ".git"
    try:
        mode = dot_git.lstat().st_mode
    except OSError:
        return None
    pointer_file: list[Path] = []
    if stat.S_ISDIR(mode):
        git_dir = common = dot_git
    elif stat.S_ISREG(mode):
        pointer_file.append(dot_git)
        try:
            pointer = dot_git.read_text()
        except (OSError, UnicodeDecodeError):
            return None
        if not pointer.startswith("gitdir:"):
            return None
        git_dir = directory / pointer.removeprefix("gitdir:").strip()
        try:
            common = git_dir / (git_dir / "commondir").read_text().strip()
        except FileNotFoundError:
            common = git_dir
        except (OSError, UnicodeDecodeError):
            return None
    else:
        return None
    home = Path(os.environ.get("HOME") or Path.home())
    return [
        *pointer_file,
        common / "config",
        git_dir / "config.worktree",
        git_dir / "commondir",
        home / ".gitconfig",
        home / ".config" / "git" / "config",
    ]


def _includes(names: bytes) -> bool:
    return any(key.lower().startswith((b"include.", b"includeif.")) for key in names.split(b"\0"))
