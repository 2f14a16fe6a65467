"""A child's exit reaches asyncio through a pidfd, with no thread started for it
(core.worker.child_watch): in the loop of the main thread and in one run in another thread,
with the exit status as the threaded watcher gives it."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import Iterator

import pytest

from core.worker.child_watch import PidfdWatcher, watch_children_by_pidfd

pytestmark = pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="Python 3.12 watches children by pidfd by itself"
)


@pytest.fixture
def pidfd_watched() -> Iterator[None]:
    policy = asyncio.get_event_loop_policy()
    before = policy._watcher  # type: ignore[attr-defined]  # None until one is asked for
    if not watch_children_by_pidfd():
        pytest.skip("this kernel offers no pidfd")
    try:
        yield
    finally:
        policy._watcher = before  # type: ignore[attr-defined]


async def exits(*codes: int) -> list[int | None]:
    """Start a child per code that exits with it (a negative one: killed by that signal)."""

    async def one(code: int) -> int | None:
        script = f"import os; os.kill(os.getpid(), {-code})" if code < 0 else f"exit({code})"
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script)
        return await proc.wait()

    return list(await asyncio.gather(*map(one, codes)))


def threads_started_during(run: object) -> tuple[object, set[str]]:
    before = {t.name for t in threading.enumerate()}
    seen: set[str] = set()
    stop = threading.Event()

    def watch() -> None:  # the names of threads that come and go while the children run
        while not stop.wait(0.001):  # not a wait: sampling the live threads
            seen.update(t.name for t in threading.enumerate())

    spy = threading.Thread(target=watch, name="spy")
    spy.start()
    try:
        result = run()  # type: ignore[operator]
    finally:
        stop.set()
        spy.join()
    return result, seen - before - {"spy"}


def test_children_are_reaped_without_a_thread_each(pidfd_watched):
    assert isinstance(asyncio.get_event_loop_policy().get_child_watcher(), PidfdWatcher)

    codes, started = threads_started_during(lambda: asyncio.run(exits(0, 3, 7, -9)))

    assert codes == [0, 3, 7, -signal.SIGKILL]
    assert not [name for name in started if "waitpid" in name], started


def test_a_loop_in_another_thread_reaps_its_own_children(pidfd_watched):
    """3.11's own PidfdChildWatcher is bound to the main thread's loop: a loop run in a
    thread could not start a child at all."""
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(asyncio.run(exits(0, 5))))
    thread.start()
    thread.join(timeout=60)

    assert got == [[0, 5]]
