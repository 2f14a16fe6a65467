"""Ended children reach the event loop without a thread per child (adapters.child_watcher),
in `t25` and in this suite alike."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from adapters.child_watcher import watch_children_by_pidfd
from core.workspace.git import run_command

if sys.version_info < (3, 12):
    from adapters.child_watcher import RunningLoopPidfdWatcher


@pytest.mark.skipif(not watch_children_by_pidfd(), reason="no pidfd on this kernel")
async def test_short_commands_start_no_thread_to_wait_for_them(tmp_path) -> None:
    started: list[str] = []
    before = threading.Thread.start

    def counted(self: threading.Thread) -> None:
        started.append(self.name)
        before(self)

    threading.Thread.start = counted  # type: ignore[method-assign]
    try:
        done = await asyncio.gather(
            *(run_command(["true"], cwd=tmp_path, env={}) for _ in range(20))
        )
    finally:
        threading.Thread.start = before  # type: ignore[method-assign]

    assert [d.code for d in done] == [0] * 20
    if sys.version_info < (3, 12):
        assert isinstance(asyncio.get_child_watcher(), RunningLoopPidfdWatcher)
    assert started == []


@pytest.mark.skipif(not watch_children_by_pidfd(), reason="no pidfd on this kernel")
def test_a_loop_in_another_thread_waits_for_its_children_too(tmp_path) -> None:
    """The cockpit's snapshot tests start git from a loop of their own, in another thread."""
    codes: list[int] = []

    def elsewhere() -> None:
        async def both() -> list[int]:
            done = await asyncio.gather(
                run_command(["true"], cwd=tmp_path, env={}),
                run_command(["false"], cwd=tmp_path, env={}),
            )
            return [d.code for d in done]

        codes.extend(asyncio.run(both()))

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive() and codes == [0, 1]


@pytest.mark.skipif(not watch_children_by_pidfd(), reason="no pidfd on this kernel")
async def test_a_child_killed_by_a_signal_reports_it(tmp_path) -> None:
    child = await asyncio.create_subprocess_exec("sleep", "30")
    child.kill()
    assert await asyncio.wait_for(child.wait(), 30) == -9
