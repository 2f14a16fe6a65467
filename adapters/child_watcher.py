"""How the event loop learns that a child process ended.

On Python 3.11 asyncio's default watcher starts a thread per child, to block in `waitpid`
until it exits; a task starts a few hundred short git processes, and starting those
threads was about a third of the loop's busy time. A pidfd watcher (Linux 5.3 and later)
instead hands the loop a file descriptor per child that becomes readable when it exits: no
thread. Python 3.12 chose it by default; on 3.11 T25 installs it itself, once per process,
wherever the kernel has `pidfd_open`.
"""

from __future__ import annotations

import asyncio
import os
import sys
import warnings


def watch_children_by_pidfd() -> bool:
    """Install the pidfd watcher where Python does not already use it; True when it is in
    use afterwards (False: this kernel or platform has no pidfd)."""
    if sys.version_info >= (3, 12):
        return True  # the default where the kernel allows it; setting one is deprecated
    if not _has_pidfd():
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if not isinstance(asyncio.get_child_watcher(), asyncio.PidfdChildWatcher):
            asyncio.set_child_watcher(asyncio.PidfdChildWatcher())
    return True


def _has_pidfd() -> bool:
    if not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # an older kernel, or a seccomp filter that refuses it
        return False
    return True
