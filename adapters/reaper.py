"""The leader of an unconfined run: starts the agent or QA check, and outlives nothing of it.

    python3 -I -S reaper.py PARENT_PID GRACE_S -- ARGV...

It is the child subreaper of everything the command starts - so a descendant that left its
session (`setsid`) or scrubbed its environment is still re-parented here, not to init - and
when the command ends, or T25 asks it to stop (SIGTERM), or T25 dies, it kills every
descendant it still has, reaps them, and exits with the command's status (a signal that ended
it ends the reaper too). Stopped by SIGTERM, it gives the command GRACE_S to exit, then kills
it and the rest. Run as a script with only the standard library: it costs one interpreter start.

T25's death reaches it as ORPHANED (PR_SET_PDEATHSIG), a signal it catches: it then kills
the command and everything below it at once, with no grace, and only then dies. A death
signal it could not catch (SIGKILL) would end it before it ended anything: the command would
die with it (its own death signal), but the command's children would be re-parented to init
and live on until the next T25 start sweeps them. The kernel sends the death signal when the
*thread* that started the reaper ends, not the process: T25 starts its children from the
thread running its event loop (asyncio's child watcher threads only wait for them), which
lives as long as any run does.

T25 itself is not made the subreaper: orphans would then become zombies of T25 that only a
wait for any child could reap, and such a wait would take the exit status of T25's own git
processes from the event loop that is waiting for them.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
ORPHANED = signal.SIGUSR1  # T25 died (the death signal asked for): end the run now
KILL_ROUNDS = 50  # each kills the current children; their children are re-parented here


def _prctl(option: int, value: int) -> None:
    """Linux's prctl; nothing elsewhere (no subreaper there: the run's tag is what is left)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (AttributeError, OSError):
        pass


def _children() -> list[int]:
    me = str(os.getpid())
    found: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:  # no /proc here
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                stat = file.read().decode("utf-8", "replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and fields[1] == me:
            found.append(int(name))
    return found


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_descendants() -> None:
    for _ in range(KILL_ROUNDS):
        children = _children()
        if not children:
            return
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.005)
        _reap()


class _Stop(Exception):
    """T25 asked the run to stop (SIGTERM or SIGINT)."""


class _Orphaned(Exception):
    """T25 died: nothing of the run may outlive it."""


def _on_stop(signum: int, frame: object) -> None:
    raise _Stop


def _on_orphaned(signum: int, frame: object) -> None:
    raise _Orphaned


def _wait(leader: int, deadline: float | None = None) -> int | None:
    """The leader's wait status once it exits, reaping every other child meanwhile; None
    when the deadline passes first."""
    while deadline is None or time.monotonic() < deadline:
        try:
            pid, raw = os.waitpid(-1, 0 if deadline is None else os.WNOHANG)
        except ChildProcessError:
            return None
        if pid == leader:
            return raw
        if pid == 0:
            time.sleep(0.01)
    return None


def main(argv: list[str]) -> int:
    parent, grace_s, command = int(argv[0]), float(argv[1]), argv[3:]
    signal.signal(ORPHANED, _on_orphaned)  # before asking for it: T25 may die at once
    try:
        status = _lead(parent, grace_s, command)
    except _Orphaned:  # T25 died: kill the command and the rest now, without grace
        status = None
    for stop in (ORPHANED, signal.SIGTERM, signal.SIGINT):  # nothing stops the clean-up
        signal.signal(stop, signal.SIG_IGN)
    _kill_descendants()
    if status is None or os.WIFSIGNALED(status):
        ended_by = signal.SIGKILL if status is None else os.WTERMSIG(status)
        if ended_by != signal.SIGKILL:  # SIGKILL cannot be caught, nor set back
            signal.signal(ended_by, signal.SIG_DFL)
        os.kill(os.getpid(), ended_by)
    return os.WEXITSTATUS(status) if status is not None else 137


def _lead(parent: int, grace_s: float, command: list[str]) -> int | None:
    """Start the command and wait for it; its wait status, None when it had to be killed."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, ORPHANED)
    if os.getppid() != parent:  # T25 died before the line above
        return None
    signal.signal(signal.SIGTERM, _on_stop)
    signal.signal(signal.SIGINT, _on_stop)
    me = os.getpid()
    leader = os.fork()
    if leader == 0:  # the command: it dies with the reaper
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != me:
            os._exit(137)
        for sig in (signal.SIGTERM, signal.SIGINT, ORPHANED):
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            sys.stderr.write(f"could not start {command[0]}: {exc}\n")
            os._exit(127)
    try:
        return _wait(leader)
    except _Stop:  # the command got SIGTERM too: give it a moment
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        return _wait(leader, deadline=time.monotonic() + grace_s)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
