"""How the event loop learns that a child process ended.

On Python 3.11 asyncio's default watcher starts a thread per child, to block in `waitpid`
until it exits; a task starts a few dozen short git processes, and starting those threads
was about a third of the loop's busy time. A pidfd (Linux 5.3 and later) is a file descriptor
that becomes readable when its process ends: the loop watches it like a socket, and no
thread is started. Python 3.12 waits so by default.

3.11 ships a pidfd watcher too, but it serves the one loop it was attached to: a child
started from a loop in another thread (the cockpit's snapshot tests start git so) found it
inactive. This is 3.12's: each child is watched by the loop that started it. T25 installs it
once per process on 3.11, wherever the kernel has `pidfd_open`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


def watch_children_by_pidfd() -> bool:
    """Install the pidfd watcher where Python does not already use one; True when children
    are waited for by pidfd afterwards (False: this kernel or platform has none)."""
    if sys.version_info >= (3, 12):
        return (
            _has_pidfd()
        )  # 3.12 chooses it itself where the kernel allows; setting one is deprecated
    if not _has_pidfd():
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if not isinstance(asyncio.get_child_watcher(), RunningLoopPidfdWatcher):
            asyncio.set_child_watcher(RunningLoopPidfdWatcher())
    return True


if sys.version_info < (3, 12):  # 3.12 deprecates child watchers: defining one warns

    class RunningLoopPidfdWatcher(asyncio.AbstractChildWatcher):
        """A child's end reaches the loop that started it through the child's pidfd, as Python
        3.12's `PidfdChildWatcher` does it: nothing attached, no thread, no state of its own."""

        def __enter__(self) -> RunningLoopPidfdWatcher:
            return self

        def __exit__(self, *_: object) -> None:
            pass

        def is_active(self) -> bool:
            return True

        def close(self) -> None:
            pass

        def attach_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
            pass

        def add_child_handler(  # type: ignore[override]  # typeshed's is generic in the args
            self, pid: int, callback: Callable[..., Any], *args: Any
        ) -> None:
            loop = asyncio.get_running_loop()
            pidfd = os.pidfd_open(pid)
            loop._add_reader(pidfd, self._ended, pid, pidfd, callback, args)  # type: ignore[attr-defined]

        def _ended(
            self, pid: int, pidfd: int, callback: Callable[..., Any], args: tuple[Any, ...]
        ) -> None:
            asyncio.get_running_loop()._remove_reader(pidfd)  # type: ignore[attr-defined]
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:  # reaped elsewhere: its status is gone
                code = 255
                log.warning("child process %d: its exit status was already read; 255 reported", pid)
            else:
                code = os.waitstatus_to_exitcode(status)
            os.close(pidfd)
            callback(pid, code, *args)

        def remove_child_handler(self, pid: int) -> bool:
            return True  # the reader goes when the child ends; asyncio asks only after that


def _has_pidfd() -> bool:
    if not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # an older kernel, or a seccomp filter that refuses it
        return False
    return True
