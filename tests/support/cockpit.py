"""The cockpit under Pilot: a seeded factory (`seeded`, a fixture: real git repository, real
SQLite store), the app on it, and waits that let the app run; an attached cockpit's helpers."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import DataTable

from t25_tui.runtime import open_sample
from t25_tui.tui.app import T25App, make_app
from t25_tui.tui.sample_data import Seeded
from tests.support.screen_text import screen_text


def help_rows(text: str) -> dict[str, str]:
    """The help screen's rows that name a command: its id -> the keys shown for it."""
    rows = {}
    for line in text.splitlines():
        if line.count("█") >= 2:  # inside the dialog's border
            cells = re.split(r"\s{2,}", line.split("█")[1].strip())
            if len(cells) == 3:
                rows[cells[2]] = cells[0]
    return rows


@pytest.fixture
async def seeded(tmp_path: Path):
    s = await open_sample(tmp_path / "shop")
    yield s
    await s.close()


def app_for(s: Seeded, **kw) -> T25App:
    return make_app(s.control, clock=s.clock, actor="ana@ops", **kw)


async def until(pilot, condition: Callable[[], object], within_s: float = 30.0) -> None:
    """Wait for a condition, letting the app run, and then for the screen it leaves in front
    to be mounted (a dialog just pushed has no widgets to query before); fail with a clear
    message on timeout."""
    deadline = time.monotonic() + within_s
    while not (condition() and pilot.app.screen.is_mounted):
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {within_s:g} s; {_where(pilot.app)}")
        await pilot.pause(0.02)


def _where(app: T25App) -> str:
    """Where the cockpit stood when a wait ran out: its screens, the focused widget, the
    tables in front (rows, whether Textual has measured them, their sizes) and the top of
    the screen as drawn."""
    stack = " > ".join(type(screen).__name__ for screen in app.screen_stack)
    tables = [
        f"#{t.id}: {t.row_count} rows {[str(k.value) for k in list(t.rows)[:8]]}, "
        f"measured {not t._require_update_dimensions}, "
        f"virtual {t.virtual_size}, region {t.size}"
        for t in app.screen.query(DataTable)
    ]
    try:
        drawn = [line.rstrip()[:160] for line in screen_text(app).splitlines() if line.strip()]
    except Exception as exc:  # noqa: BLE001 - the wait's own failure must still be said
        drawn = [f"(the screen could not be drawn: {exc!r})"]
    return (
        f"screens: {stack}; focused: {app.focused!r}; tables: {tables or 'none'}; "
        "drawn:\n" + "\n".join(drawn[:14])
    )


async def until_async(pilot, condition, within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {within_s:g} s; {_where(pilot.app)}")
        await pilot.pause(0.05)


async def settle_board(app: T25App, pilot) -> None:
    await asyncio.wait_for(app.loaded.wait(), 10)
    await pilot.pause()


async def landed(control, ref: str) -> bool:
    """Whether the merge of `ref` is over: merged, and its worktree's cleanup recorded. The
    decision goes on past `merged` (it removes the worktree, with git): a test that ended
    at `merged` would close the loop on a git call still starting."""
    from core.domain.events import WorktreeCleaned

    if not (await control.task(ref)).merged:
        return False
    events = await control.store.events_after(0, task_id=ref, limit=100_000)
    return any(isinstance(e, WorktreeCleaned) for e in events)


TOKEN = "operator-secret-7"


def remote_app(seeded, remote):
    return make_app(remote, clock=seeded.clock, actor="ana@remote", link=remote.link)


def card_state(app, tid):
    return next((c.task.state for c in app.cards if c.task.id == tid), None)
