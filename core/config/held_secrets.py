"""T25's own secrets, held out of its environment.

FACTORY_WORKER_CREDENTIAL, T25_DATABASE_URL and T25_OPERATOR_TOKEN reach T25 as environment
variables. A process's initial environment stays in its memory, readable for its whole life in
`/proc/<pid>/environ` by every process of the same user - every agent CLI and QA check T25
starts included - however T25 edits `os.environ` afterwards. So the `t25` command line calls
`hold()` before anything else: when one of them is set, T25 executes itself again (the same
interpreter, the same arguments) with an environment lacking them, and hands the values over
on a pipe whose number is the only thing the new environment says (`T25_HELD_SECRETS_FD`); the
new image reads the pipe to its end and closes it at once. From then on the values live only in
this module, read through `get`, and the process is undumpable (`PR_SET_DUMPABLE` 0 on Linux):
a process of the same user can no longer open its `/proc/<pid>/environ` or `mem`, nor ptrace
it.

    hold()          the `t25` entry point's first step (never library code)
    get(NAME)       one secret's value, or None
    values()        every secret that is set, by name (what output is redacted of)
    undumpable()    PR_SET_DUMPABLE 0 on Linux; False where it cannot be had

When nothing was held - no secret was set at start, or the code runs in-process, as tests do
with `monkeypatch.setenv` - `get` reads `os.environ`: the variables are then either unset or
put there by the caller itself, and a second source of truth for tests would be one more way
to differ from the binary.

`t25 --help` runs `hold()`, so this module imports os and sys only (ctypes only when it makes
the process undumpable) and does nothing when no secret is set.
"""

from __future__ import annotations

import os
import stat
import sys

WORKER_CREDENTIAL = "FACTORY_WORKER_CREDENTIAL"
DATABASE_URL = "T25_DATABASE_URL"
OPERATOR_TOKEN = "T25_OPERATOR_TOKEN"
NAMES = (WORKER_CREDENTIAL, DATABASE_URL, OPERATOR_TOKEN)

HANDOFF_ENV = "T25_HELD_SECRETS_FD"  # the pipe's number, and nothing else, in the new image
_PR_SET_DUMPABLE = 4  # <linux/prctl.h>

_held: dict[str, str] | None = None


class HandoffError(SystemExit):
    """The values could not be handed to the new image: one line on stderr, exit status 1."""

    def __init__(self, why: str) -> None:
        print(f"t25: error: could not hold T25's secrets: {why}", file=sys.stderr)
        super().__init__(1)


def get(name: str) -> str | None:
    """The value of one of T25's secrets (`NAMES`), or None when it is not set."""
    if _held is not None:
        return _held.get(name)
    return os.environ.get(name)


def values() -> dict[str, str]:
    """Every one of T25's secrets that is set, by name."""
    return {name: value for name in NAMES if (value := get(name))}


def hold() -> None:
    """Take T25's secrets out of the process's environment; the `t25` entry point's first step.

    Returns at once when none is set. Otherwise executes the same interpreter again with the
    values on a pipe (and returns only in the new image, having read them), or, where a
    process cannot execute itself again, keeps them here and makes the process undumpable.
    """
    global _held
    handed = os.environ.pop(HANDOFF_ENV, None)
    if handed is not None:
        undumpable()  # before the values are in memory
        _held = _receive(handed)
        return
    present = {name: os.environ[name] for name in NAMES if name in os.environ}
    if not present:
        return
    if os.name == "posix" and sys.executable and sys.orig_argv:
        _execute_again(present)  # does not return
    _held = present  # the initial environment still holds them: undumpable hides it
    for name in present:
        del os.environ[name]
    undumpable()


def undumpable() -> bool:
    """Make this process undumpable (Linux): same-user processes lose `/proc/<pid>/environ`,
    `mem`, `fd/` and ptrace. False where it cannot be had (another OS, no libc)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _execute_again(present: dict[str, str]) -> None:
    """Execute the same interpreter with the same arguments, the secrets on a pipe instead of
    in the environment. The values are written before the exec (a pipe keeps what it holds
    when its writer is gone), so the new image reads them to the end without waiting."""
    payload = b"".join(
        os.fsencode(name) + b"=" + os.fsencode(value) + b"\0" for name, value in present.items()
    )
    read_end, write_end = os.pipe()
    try:
        os.set_blocking(write_end, False)
        try:
            written = os.write(write_end, payload)
        except BlockingIOError:
            written = 0
        if written != len(payload):
            raise HandoffError(f"{len(payload)} bytes of secrets do not fit in a pipe")
    finally:
        os.close(write_end)
    os.set_inheritable(read_end, True)
    env = {key: value for key, value in os.environ.items() if key not in present}
    env[HANDOFF_ENV] = str(read_end)
    try:
        os.execve(sys.executable, [sys.orig_argv[0], *sys.orig_argv[1:]], env)
    except OSError as exc:
        os.close(read_end)
        raise HandoffError(f"{sys.executable} could not be executed again: {exc}") from exc


def _receive(handed: str) -> dict[str, str]:
    """Read the values from the pipe the previous image left open, then close it."""
    try:
        fd = int(handed)
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            raise OSError("not a pipe")
        data = bytearray()
        while chunk := os.read(fd, 65536):
            data += chunk
        os.close(fd)
    except (ValueError, OSError) as exc:
        raise HandoffError(f"{HANDOFF_ENV}={handed!r} is not a pipe T25 left: {exc}") from exc
    held: dict[str, str] = {}
    for entry in bytes(data).split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and os.fsdecode(name) in NAMES:
            held[os.fsdecode(name)] = os.fsdecode(value)
    return held
