"""Ended children reach the event loop without a thread per child (adapters.child_watcher),
in `t25` and in this suite alike."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from adapters.child_watcher import watch_children_by_pidfd
from core.workspace.git import run_command


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
        assert isinstance(asyncio.get_child_watcher(), asyncio.PidfdChildWatcher)
    assert started == []
