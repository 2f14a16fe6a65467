"""Whether a process still runs: how T25 tells its own leftovers (a prompt file, a spooled
log named after the pid that made it) from those of a process that is gone."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """True while `pid` runs (another user's process included: it cannot be signalled)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it runs
        return True
    return True
