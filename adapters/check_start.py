"""Whether a QA check's process never started, and why, from how it ended.

A check reaches its program through layers, and each says in its own way that the program
could not be had: `run_process` itself (a spawn error), T25's caps launcher and network bridge
(`t25: cannot start X: <strerror>`, exit 127), the reaper (`could not start X: …`, 127), and
bubblewrap (`bwrap: execvp X: <strerror>`, exit 1; any other `bwrap: …` line is the sandbox
refusing the run before it began). Only a run whose whole output is that one line counts:
a program that ran and printed more has started, whatever it printed.
"""

from __future__ import annotations

import os
import re

from adapters.process import ProcessResult

# The one line each layer prints when it cannot exec the program, with the exit it gives.
_EXEC_FAILED = (
    (127, re.compile(r"t25: cannot start (?P<program>.+?): (?P<why>.+)")),
    (
        127,
        re.compile(r"could not start (?P<program>.+?): (?:\[Errno \d+\] )?(?P<why>.+?)(?:: '.*')?"),
    ),
    (1, re.compile(r"bwrap: execvp (?P<program>.+?): (?P<why>.+)")),
)
_LAUNCHER = re.compile(r"t25: (?P<why>.+)")  # a cap or the bridge could not be set up (125)
_SANDBOX = re.compile(r"bwrap: (?P<why>.+)")  # bubblewrap refused before the program began
_SPAWN = re.compile(r"(?P<why>command not found|permission denied): (?P<program>.+)")

NOT_FOUND = "No such file or directory"
NOT_ALLOWED = ("Permission denied", "Operation not permitted")


def start_failure(done: ProcessResult, program: str, sandbox: str) -> str | None:
    """Why the check's process never started (`program` is its argv[0], `sandbox` the
    sandbox's name), or None when it did."""
    if done.spawn_error:
        spawned = _SPAWN.fullmatch(done.spawn_error)
        if spawned is None:
            return done.spawn_error
        return _program(
            spawned["program"],
            NOT_FOUND if spawned["why"] == "command not found" else NOT_ALLOWED[0],
        )
    if done.timed_out or done.aborted or done.exit_code in (None, 0):
        return None
    lines = done.tail.decode("utf-8", "replace").strip().splitlines()
    if len(lines) != 1:
        return None
    line = lines[0].strip()
    for code, pattern in _EXEC_FAILED:
        found = pattern.fullmatch(line)
        if found and done.exit_code == code and _same(found["program"], program):
            return _program(program, found["why"])
    if done.exit_code == 125 and (found := _LAUNCHER.fullmatch(line)):
        return f"T25 could not set up its run: {found['why']}"
    if sandbox == "bwrap" and done.exit_code == 1 and (found := _SANDBOX.fullmatch(line)):
        return f"the sandbox refused it (bwrap: {found['why']})"
    return None


def _same(said: str, program: str) -> bool:
    return said == program or os.path.basename(said) == os.path.basename(program)


def _program(program: str, why: str) -> str:
    if why == NOT_FOUND:
        return f"program '{program}' not found"
    if why in NOT_ALLOWED:
        return f"program '{program}' may not be run ({why.lower()})"
    return f"program '{program}' could not be run ({why})"
