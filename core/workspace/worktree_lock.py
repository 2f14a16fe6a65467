"""The lock on one task's worktree: one driver at a time, across processes.

`flock` on `<root>/.meta/<id>.lock` (core.workspace.task_trees), holding the pid. The kernel
drops the lock when its process dies, so a crash leaves no stale lock. The lock file is never
deleted: deleting it would let two processes lock two different files of the same name.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from core.errors import WorktreeBusy, WorktreeRefused

# Lock files this process holds, with the pid that took them: a child made by fork()
# inherits this dict but not the right to act as the holder.
_HELD: dict[str, int] = {}
_HELD_GUARD = threading.Lock()


class WorktreeLock:
    """An exclusive, non-blocking lock on one task's worktree, across processes.

    Use as a context manager. A second process (or a second attempt in this one) gets
    `WorktreeBusy` naming the pid that holds it; nobody waits on a busy worktree.
    """

    def __init__(self, path: Path, task_id: str) -> None:
        self.path = path
        self.task_id = task_id
        self._fd: int | None = None

    @property
    def held_here(self) -> bool:
        return _HELD.get(str(self.path)) == os.getpid()

    def acquire(self) -> WorktreeLock:
        key = str(self.path)
        with _HELD_GUARD:
            if self.held_here:
                raise WorktreeBusy(
                    f"the worktree of {self.task_id} is already locked by this process "
                    f"(pid {os.getpid()})",
                    hint="finish the work that holds it first",
                )
            # O_NOFOLLOW: a planted symlink cannot make us create or truncate another file.
            # O_CLOEXEC: an agent started while we hold the lock must not inherit it.
            try:
                fd = os.open(
                    self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
                )
            except OSError as exc:  # ELOOP: someone put a link where the lock file goes
                raise WorktreeRefused(
                    f"cannot open the lock file {self.path}: {exc.strerror}",
                    hint=f"remove {self.path}; T25 recreates it",
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise WorktreeBusy(
                    f"the worktree of {self.task_id} is being driven by another T25 process "
                    f"(pid {holder})",
                    hint="wait for it to finish, or stop that process; its lock ends with it",
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            self._fd = fd
            _HELD[key] = os.getpid()
        return self

    def release(self) -> None:
        with _HELD_GUARD:
            if self._fd is None:
                return
            _HELD.pop(str(self.path), None)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> WorktreeLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
