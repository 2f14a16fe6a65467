"""How this process learns that a child it started has exited.

A task starts some fifty git processes, and every agent and check is a child too. On Python
3.11 asyncio learns of each exit through its default `ThreadedChildWatcher`: a thread
started per child, blocked in `waitpid` until the child ends — ~0.4 ms of the event loop's
time per process to start it (`bench/stage_cost.py`), and one more thread contending with
the loop for the interpreter lock. `PidfdWatcher` waits on a pidfd of each child in the
selector of the loop that started it: no thread at all. It is Python 3.12's own
`PidfdChildWatcher`, which 3.12 uses by itself where it can: 3.11's is bound to the one
loop the main thread last set, and refuses a loop run in another thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

log = logging.getLogger("t25.worker")


class PidfdWatcher(asyncio.AbstractChildWatcher):
    """Each child's exit read from its pidfd by the running loop that started it."""

    def is_active(self) -> bool:
        return True

    def close(self) -> None:
        pass

    def attach_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        pass

    def __enter__(self) -> PidfdWatcher:
        return self

    def __exit__(self, *_exc: object) -> None:
        pass

    def add_child_handler(  # type: ignore[override]  # the callback is asyncio's own
        self, pid: int, callback: Callable[..., Any], *args: Any
    ) -> None:
        loop = asyncio.get_running_loop()
        pidfd = os.pidfd_open(pid)
        loop._add_reader(pidfd, self._reap, loop, pid, pidfd, callback, args)  # type: ignore[attr-defined]

    @staticmethod
    def _reap(
        loop: asyncio.AbstractEventLoop,
        pid: int,
        pidfd: int,
        callback: Callable[..., Any],
        args: tuple[Any, ...],
    ) -> None:
        loop._remove_reader(pidfd)  # type: ignore[attr-defined]
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # reaped elsewhere: its status is lost
            code = 255
            log.warning("child process %d was reaped elsewhere; its exit status is lost", pid)
        else:
            code = os.waitstatus_to_exitcode(status)
        os.close(pidfd)
        callback(pid, code, *args)

    def remove_child_handler(self, pid: int) -> bool:
        return True  # the pidfd's reader goes when the child exits


def watch_children_by_pidfd() -> bool:
    """Have asyncio learn of child exits through pidfds where the kernel offers them
    (Linux 5.3+, not refused by a seccomp filter); True if it now does. Children already
    started keep the watcher they were started under."""
    if sys.version_info >= (3, 12):
        return False  # asyncio uses pidfds by itself, and deprecates choosing a watcher
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):  # not Linux, an older kernel, a seccomp filter
        return False
    policy = asyncio.get_event_loop_policy()
    if not isinstance(policy, asyncio.DefaultEventLoopPolicy):
        return False  # a loop policy of its own (uvloop's) watches children its own way
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if not isinstance(policy.get_child_watcher(), PidfdWatcher):
            policy.set_child_watcher(PidfdWatcher())
    return True
