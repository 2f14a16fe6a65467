"""`t25 logs --follow` opens at the end of a long run, as `tail -f` does; without it, every
line from the start."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.domain.events import RunOutput
from core.domain.models import NewRun, TaskState
from store import open_store

LINES = 3000  # of 100 characters: 300 KB, far past the few KB `--follow` opens with


def _line(n: int) -> str:
    return f"line {n:05d} " + "x" * 89


async def _runs(repo: Path) -> tuple[str, str]:
    """T-1's two runs: a short one, then a long one."""
    store = await open_store(f"sqlite:///{repo / '.factory' / 't25.db'}")
    try:
        short, _ = await store.enqueue_run(NewRun(task_id="T-1", stage=TaskState.SPEC, role="spec"))
        await store.append_event(
            RunOutput(task_id="T-1", run_id=short.id, stream="stdout", text="early\n")
        )
        long, _ = await store.enqueue_run(
            NewRun(task_id="T-1", stage=TaskState.PLAN, role="planner")
        )
        for start in range(0, LINES, 10):
            text = "".join(_line(n) + "\n" for n in range(start, start + 10))
            await store.append_event(
                RunOutput(task_id="T-1", run_id=long.id, stream="stdout", text=text)
            )
        return short.id, long.id
    finally:
        await store.close()


def test_follow_opens_a_long_run_at_its_end_and_says_where_the_rest_is(t25, repo):
    assert t25("init").code == 0
    assert t25("task", "new", "A long one").code == 0
    short, long = asyncio.run(_runs(repo))
    assert t25("cancel", "T-1", "--reason", "enough").code == 0  # so --follow ends

    for ref in (long, "T-1"):
        followed = t25("logs", ref, "--follow")
        assert followed.code == 0, followed.err
        lines = followed.out.splitlines()
        assert _line(LINES - 1) in lines and _line(0) not in lines and "early" not in lines
        shown = [line for line in lines if line.startswith("line ")]
        assert 64 * 1024 <= sum(len(line) + 1 for line in shown) < 80 * 1024
        assert shown == [_line(n) for n in range(LINES - len(shown), LINES)]  # whole, in order
        assert f"… earlier output: t25 logs {ref}" in followed.err

    whole = t25("logs", long)
    assert [line for line in whole.out.splitlines() if line.startswith("line ")] == [
        _line(n) for n in range(LINES)
    ]
    assert "early" in t25("logs", short, "--follow").out
