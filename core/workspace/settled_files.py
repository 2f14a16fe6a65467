"""What T25 reads from git once and keeps until the files it came from change.

A file's state is its device, inode, size, mtime and ctime, for the file and for a link to
it. A reading is kept only when every file it came from was last changed longer before the
state was taken (which is before the reading) than its file system's clock tick: a later
write then has a later ctime, which nobody can set back, so even an in-place rewrite of the
same size with its old mtime is seen. A file changed more recently is read again every
time. A file whose ctime has a fraction of a second lives on a file system with fine
times (Linux's tick is 10 ms at most): `SETTLED_FINE_NS`; one whose ctime is whole seconds
may be on a file system that keeps only those (ext4 with small inodes, FAT): `SETTLED_NS`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

SETTLED_NS = 2_000_000_000  # twice the coarsest file-time tick of the file systems in use
SETTLED_FINE_NS = 50_000_000  # five times a 10 ms tick

FileState = tuple[int, int, int, int, int] | None
State = tuple[FileState, ...]
T = TypeVar("T")


def settled_state(files: Sequence[Path]) -> State | None:
    """Each file's state (None: absent), or None when one changed too recently to trust."""
    now = time.time_ns()
    out: list[FileState] = []
    for path in files:
        for look in (os.lstat, os.stat):
            try:
                st = look(path)
            except (FileNotFoundError, NotADirectoryError):
                out.append(None)
                continue
            except OSError:
                return None
            fine = st.st_ctime_ns % 1_000_000_000 != 0
            if max(st.st_ctime_ns, st.st_mtime_ns) > now - (
                SETTLED_FINE_NS if fine else SETTLED_NS
            ):
                return None
            out.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(out)


class Kept(Generic[T]):
    """Readings by key, each under the state of its files; the latest `size` kept."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._kept: dict[Hashable, tuple[State, T]] = {}

    def get(self, key: Hashable, state: State | None) -> T | None:
        kept = self._kept.get(key)
        return kept[1] if state is not None and kept is not None and kept[0] == state else None

    def put(self, key: Hashable, state: State | None, value: T) -> None:
        if state is None:
            return
        self._kept.pop(key, None)
        self._kept[key] = (state, value)
        while len(self._kept) > self.size:
            del self._kept[next(iter(self._kept))]

    def clear(self) -> None:
        self._kept.clear()
