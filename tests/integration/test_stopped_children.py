"""Nothing of a stopped child is left behind, whichever of T25's two ways started it
(`run_process` for agents, checks and probes; `run_command` for git, push and `gh`).

A caller may be cancelled while its child runs, while the child is still starting, or once
more while the child is being ended (asyncio.run cancels every task again as it closes the
loop). Each time the child must be reaped, and its pipes closed, before the cancellation
goes on. Otherwise asyncio reaps it later, on a watcher thread that hands the exit status
to the loop; once the loop has closed, the status never arrives, and the garbage collector
warns about a "still running" child and open pipe transports in whatever test runs next.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from adapters.process import minimal_env, run_process
from core.workspace import git
from core.workspace.git import git_env, run_command

Start = Callable[[list[str], Path], Awaitable[object]]

STARTERS: dict[str, Start] = {
    # agent CLIs, QA checks, version and sandbox probes
    "run_process": lambda argv, cwd: run_process(
        argv, cwd=cwd, env=minimal_env(), timeout_s=600, abort=asyncio.Event(), grace_s=0.5
    ),
    # every git call, the push and `gh pr create`
    "run_command": lambda argv, cwd: run_command(argv, cwd=cwd, env=git_env()),
}


@pytest.fixture(params=sorted(STARTERS))
def start(request) -> Start:
    return STARTERS[request.param]


@pytest.fixture
def children(monkeypatch) -> list[asyncio.subprocess.Process]:
    """Every child started through asyncio during the test."""
    started: list[asyncio.subprocess.Process] = []
    spawn = asyncio.create_subprocess_exec

    async def recorded(*args, **kwargs) -> asyncio.subprocess.Process:
        proc = await spawn(*args, **kwargs)
        started.append(proc)
        return proc

    monkeypatch.setattr(asyncio, "create_subprocess_exec", recorded)
    return started


def sleeper(up: Path, *, ignore_sigterm: bool = False) -> list[str]:
    """A child that marks `up` once it runs, then sleeps (deaf to SIGTERM if asked)."""
    deaf = "signal.signal(signal.SIGTERM, signal.SIG_IGN); " if ignore_sigterm else ""
    code = (
        f"import pathlib, signal, sys, time; {deaf}"
        "pathlib.Path(sys.argv[1]).touch(); time.sleep(300)"
    )
    return [sys.executable, "-c", code, str(up)]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def cancel_when(up: Path, task: asyncio.Task, times: int = 1) -> float:
    """Cancel `task` once the child runs (and again, while it is being ended); return when
    the first cancellation was sent."""
    while not up.exists():  # noqa: ASYNC110 - the child says it runs by a file
        await asyncio.sleep(0.01)
    task.cancel()
    first = time.monotonic()
    for _ in range(times - 1):
        await asyncio.sleep(0.05)
        task.cancel()
    return first


def assert_nothing_left(children: list[asyncio.subprocess.Process], fds: int) -> None:
    [child] = children
    assert child.returncode is not None, "the child is not reaped"
    assert open_fds() == fds, "a pipe to the child is still open"


async def test_cancelled_while_the_child_runs(start, children, tmp_path):
    fds, up = open_fds(), tmp_path / "up"
    me = asyncio.current_task()
    canceller = asyncio.create_task(cancel_when(up, me))
    with pytest.raises(asyncio.CancelledError):
        await start(sleeper(up), tmp_path)
    me.uncancel()
    # Checked in the very step the cancellation came out in, before the loop runs again:
    # whatever asyncio would still do later does not count.
    assert_nothing_left(children, fds)
    await canceller


async def test_cancelled_while_the_child_starts_and_again_while_waiting_for_it(
    start, children, tmp_path, monkeypatch
):
    fds = open_fds()
    me = asyncio.current_task()
    record = asyncio.create_subprocess_exec

    async def cancelled_meanwhile(*args, **kwargs) -> asyncio.subprocess.Process:
        me.cancel()  # while the child is being started ...
        proc = await record(*args, **kwargs)
        me.cancel()  # ... and again while the caller waits for the start to finish
        return proc

    monkeypatch.setattr(asyncio, "create_subprocess_exec", cancelled_meanwhile)
    with pytest.raises(asyncio.CancelledError):
        await start(sleeper(tmp_path / "up"), tmp_path)
    while me.uncancel():
        pass
    assert_nothing_left(children, fds)


def test_cancelled_as_the_loop_closes_leaves_nothing_for_the_garbage_collector(
    start, children, tmp_path
):
    up = tmp_path / "up"

    async def main() -> None:
        running = asyncio.create_task(start(sleeper(up), tmp_path))
        # Once asyncio has the child (its pipes connected): a loop closed in the middle of
        # asyncio's own start of a child hangs inside asyncio on 3.11, whatever its caller
        # does (`_make_subprocess_transport` then waits for an exit its cancelled pipe
        # connection leaves unreported; seen on loaded cores). T25 stops its runs before its
        # loop closes, so only a child already started meets the closing loop.
        while not children:  # noqa: ASYNC110 - the recorder says the start is over
            await asyncio.sleep(0.01)
        await cancel_when(up, running)
        await asyncio.sleep(0)  # not a wait: one step: it is ending its child now ...
        # ... and main returns: asyncio.run cancels it once more, waits for it, closes the loop.

    gc.collect()  # only this test's garbage is looked at below
    fds = open_fds()
    asyncio.run(main())
    assert_nothing_left(children, fds)
    children.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


async def test_a_command_cancelled_twice_is_killed_without_waiting_out_the_grace(
    children, tmp_path
):
    # git gets TERM_GRACE_S to remove its *.lock files; a second cancellation means hurry.
    up = tmp_path / "up"
    me = asyncio.current_task()
    canceller = asyncio.create_task(cancel_when(up, me, times=2))
    with pytest.raises(asyncio.CancelledError):
        await run_command(sleeper(up, ignore_sigterm=True), cwd=tmp_path, env=git_env())
    ended = time.monotonic()
    while me.uncancel():
        pass
    assert children[0].returncode == -signal.SIGKILL
    assert ended - await canceller < git.TERM_GRACE_S
