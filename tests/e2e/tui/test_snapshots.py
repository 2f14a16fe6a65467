"""Snapshot tests: how the cockpit looks, grouped by screen, made deterministic.

The data is the seeded board (fixed ids, every timestamp pinned), the clock is frozen,
no worker runs, and colour variables are removed from the environment.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.screen import ModalScreen
from textual.widgets import DataTable

from t25_tui.runtime import open_sample
from t25_tui.tui.screens.base import T25Screen
from tests.support.cockpit import app_for, until


@pytest.fixture
def seeded_app(tmp_path: Path, monkeypatch):
    for var in ("NO_COLOR", "FORCE_COLOR", "COLORTERM", "TEXTUAL_THEME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    for var in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):  # the same commits, the same ids
        monkeypatch.setenv(var, "2026-01-01T12:00:00+00:00")
    loop = asyncio.new_event_loop()
    seeded = loop.run_until_complete(open_sample(tmp_path / "shop"))
    yield lambda: app_for(seeded)
    loop.run_until_complete(seeded.close())
    loop.close()


async def _loaded(pilot) -> None:
    """The board has read the store, drawn it, and nothing is left to draw."""
    await asyncio.wait_for(pilot.app.loaded.wait(), 60)
    await pilot.wait_for_scheduled_animations()


async def _ready(pilot) -> None:
    """The screen on top has read the store and drawn it: its tables too, whose column widths
    Textual works out when the table is next idle after rows are added (on a loaded machine
    the picture could be taken before, every column as narrow as its heading)."""
    screen = pilot.app.screen
    await until(pilot, lambda: not isinstance(screen, T25Screen) or screen.ready)
    await until(pilot, lambda: all(_laid_out(t) for t in screen.query(DataTable)))
    await pilot.wait_for_scheduled_animations()


def _laid_out(table: DataTable) -> bool:
    """Whether the table has measured what was put in it (Textual keeps no public flag)."""
    return not table._require_update_dimensions and not table._updated_cells


def _then(*keys: str):
    async def run_before(pilot) -> None:
        await _loaded(pilot)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()  # until the key's handling is done
        await _ready(pilot)

    return run_before


async def _pushed(pilot, key: str) -> None:
    """`key` pressed, and the screen it opens on top (a loaded machine may take a while to
    push it: until then the screen in front is still the one the key was pressed on)."""
    before = pilot.app.screen
    await pilot.press(key)
    await until(pilot, lambda: pilot.app.screen is not before)


def _pane(key: str):
    """The pane `key` opens, once it is on top and has read the store and drawn it."""

    async def run_before(pilot) -> None:
        await _loaded(pilot)
        await _pushed(pilot, key)
        await _ready(pilot)

    return run_before


def _open(task: str, key: str | None = None, *, pushes: bool = False):
    """The task's detail screen, once it is on top and drawn; then `key` pressed there and,
    when it `pushes` a screen, that one on top and drawn."""

    async def run_before(pilot) -> None:
        await _loaded(pilot)
        pilot.app.board.focus_task(task)
        await _pushed(pilot, "enter")
        await _ready(pilot)
        if key is not None:
            await (_pushed(pilot, key) if pushes else pilot.press(key))
            await _ready(pilot)

    return run_before


def test_board(snap_compare, seeded_app):
    assert snap_compare(seeded_app(), terminal_size=(120, 36), run_before=_then())


def test_board_at_80x24(snap_compare, seeded_app):
    """One list grouped by state; the selected card (right: the next state's first) whole."""
    assert snap_compare(seeded_app(), terminal_size=(80, 24), run_before=_then("right"))


def test_board_at_160x48(snap_compare, seeded_app):
    assert snap_compare(seeded_app(), terminal_size=(160, 48), run_before=_then("right"))


def test_task_detail_history(snap_compare, seeded_app):
    assert snap_compare(seeded_app(), terminal_size=(120, 36), run_before=_open("T-2"))


def test_task_detail_runs(snap_compare, seeded_app):
    assert snap_compare(seeded_app(), terminal_size=(120, 36), run_before=_open("T-1", "3"))


def _dialog(task: str, key: str):
    async def run_before(pilot) -> None:
        await _loaded(pilot)
        pilot.app.board.focus_task(task)
        await pilot.press(key)
        # The dialog is pushed once what it shows is read (the plan, the merge's evidence).
        await until(pilot, lambda: isinstance(pilot.app.screen, ModalScreen))
        await _ready(pilot)

    return run_before


def test_approval_dialog(snap_compare, seeded_app):
    assert snap_compare(seeded_app(), terminal_size=(100, 30), run_before=_dialog("T-2", "a"))


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_approval_dialog_at(snap_compare, seeded_app, size):
    assert snap_compare(seeded_app(), terminal_size=size, run_before=_dialog("T-2", "a"))


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_merge_question_at(snap_compare, seeded_app, size):
    assert snap_compare(seeded_app(), terminal_size=size, run_before=_dialog("T-1", "m"))


def test_cost_pane(snap_compare, seeded_app):
    assert snap_compare(seeded_app(), terminal_size=(120, 36), run_before=_pane("c"))


def test_audit_pane(snap_compare, seeded_app):
    assert snap_compare(seeded_app(), terminal_size=(120, 36), run_before=_pane("u"))


def test_diff_screen_at_80x24(snap_compare, seeded_app):
    assert snap_compare(
        seeded_app(), terminal_size=(80, 24), run_before=_open("T-1", "d", pushes=True)
    )


def test_diff_screen_at_160x48(snap_compare, seeded_app):
    assert snap_compare(
        seeded_app(), terminal_size=(160, 48), run_before=_open("T-1", "d", pushes=True)
    )
