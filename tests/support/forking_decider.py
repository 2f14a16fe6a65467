"""A decider to be killed (see test_audit_across_processes.py): T25 imported once, then one
forked child per decision, so that a hundred decisions killed at random points cost a
hundred forks, not a hundred interpreters.

Reads `TASK` lines on stdin. For each, forks a child that opens the store of the t25.yaml
it was given, says `deciding`, cancels TASK as `killer`, says `decided SECONDS` (how long
the decision took), and exits 0 (1 if the decision raised). The parent prints `pid PID` as
soon as the child exists and `exit STATUS` once it is gone, however it ended (the caller
may SIGKILL it in between, timed from `deciding`).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from core.config.schema import load_config
from core.control.service import ControlPlane
from store import open_store


async def cancel(config_path: Path, task: str) -> None:
    config = load_config(config_path)
    store = await open_store(config.store_url)
    try:
        control = ControlPlane(config, store)
        _say("deciding")
        began = time.monotonic()
        await control.cancel(task, actor="killer", reason="killed at random")
        _say(f"decided {time.monotonic() - began:.4f}")
    finally:
        await store.close()


def _say(line: str) -> None:
    """One whole line in one write: a child killed at any point leaves no half line."""
    os.write(sys.stdout.fileno(), f"{line}\n".encode())


def main(config_path: Path) -> None:
    for line in sys.stdin:
        task = line.strip()
        pid = os.fork()
        if pid == 0:
            try:
                asyncio.run(cancel(config_path, task))
            except BaseException:  # noqa: BLE001 - the status says it
                os._exit(1)
            os._exit(0)
        _say(f"pid {pid}")
        _, status = os.waitpid(pid, 0)
        _say(f"exit {os.waitstatus_to_exitcode(status)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
