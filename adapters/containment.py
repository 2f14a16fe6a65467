"""Keeping a run's processes in hand when no sandbox ends them (sandbox: none, or auto where
bubblewrap cannot run). Inside bubblewrap the run's PID namespace does all of this.

    reaped(argv, env)      argv led by `adapters/reaper.py`: it dies with T25 and is the
                           subreaper of the run, killing what is left when the run ends
    tag_env(env, tag)      env carrying the run's tag, which every descendant inherits
    kill_tagged(tag)       SIGKILL every process still carrying `tag`; returns their pids
    sweep_leftovers()      at start: kill what runs of a T25 that is no longer alive left

A process that leaves its session (`setsid`) survives the process-group kill; the reaper
adopts it and kills it when the run ends. If T25 and the reaper are SIGKILLed together, what
the run left still carries the tag in its environment, and the next T25 sweeps it at start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

log = logging.getLogger("t25.adapters")

TAG_ENV = "T25_RUN_TAG"
REAPER = Path(__file__).with_name("reaper.py")


# How long a stopped command gets before the reaper kills it and the rest: half of the grace
# T25 gives a stopped run, so the reaper is done before T25 kills the group, reaper included.
REAPER_GRACE_S = 1.0


def reaped(argv: list[str], env: Mapping[str, str]) -> list[str]:
    """`argv` started under the reaper (an isolated interpreter, the standard library only);
    as it is when its program is not found, so that the start fails saying so."""
    if not shutil.which(argv[0], path=env.get("PATH")):
        return argv
    grace = f"{REAPER_GRACE_S:g}"
    return [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), grace, "--", *argv]


def run_tag(run_id: str) -> str:
    return f"{os.getpid()}.{run_id}"


def tag_env(env: Mapping[str, str], tag: str) -> dict[str, str]:
    return {**env, TAG_ENV: tag}


def _tagged() -> Iterator[tuple[int, str]]:
    """(pid, tag) of this user's processes that carry a run tag."""
    needle = f"{TAG_ENV}=".encode()
    uid = os.getuid()
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:  # no /proc here (macOS): nothing to find
        return
    for entry in entries:
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):  # gone meanwhile, or not ours to read
            if entry.stat().st_uid != uid:
                continue
            for item in (entry / "environ").read_bytes().split(b"\0"):
                if item.startswith(needle):
                    yield int(entry.name), item[len(needle) :].decode("utf-8", "replace")
                    break


def _kill(pids: list[int]) -> None:
    # Not reaped here: an orphan is the reaper's or init's child, never T25's.
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def kill_tagged(tag: str) -> list[int]:
    """SIGKILL every process that still carries `tag`."""
    pids = [pid for pid, found in _tagged() if found == tag]
    _kill(pids)
    if pids:
        log.warning("killed %d process(es) run %s left behind", len(pids), tag.split(".", 1)[1])
    return pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_leftovers() -> list[int]:
    """Kill the processes of runs whose T25 is no longer alive (killed with SIGKILL, or its
    machine's T25 crashed); never a live T25's."""
    pids = []
    for pid, tag in _tagged():
        owner = tag.split(".", 1)[0]
        if owner.isdigit() and int(owner) != os.getpid() and not _alive(int(owner)):
            pids.append(pid)
    _kill(pids)
    if pids:
        log.warning("killed %d process(es) left by runs of a T25 that died", len(pids))
    return pids
