"""Pilot tests: a task that needs a human rings the bell and sends a desktop notification,
only while the terminal is not focused, and not at all with `cockpit.notifications: false`."""

from __future__ import annotations

from textual import events

from core.domain.events import InputRequested
from core.domain.models import TaskState
from t25_tui.tui.desktop import notification
from tests.support.cockpit import app_for, settle_board, until


def capture(app) -> list[str]:
    """What the app writes to the terminal: `bell` for the bell, else the sequence."""
    written: list[str] = []
    app.bell = lambda: written.append("bell")
    app.write_to_terminal = written.append
    return written


async def ask(control, tid: str = "T-7") -> None:
    task = await control.task(tid)
    await control.transition(task, TaskState.NEEDS_INPUT, actor="t25", reason="unclear")
    await control.record(InputRequested(task_id=tid, stage=TaskState.SPEC, question="which?"))


async def test_a_blurred_cockpit_rings_and_notifies_when_a_human_is_needed(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        written = capture(app)
        app.post_message(events.AppBlur())
        await until(pilot, lambda: not app.app_focus)
        await ask(seeded.control)
        await until(pilot, lambda: len(written) >= 2)
        assert written[0] == "bell"
        assert "\x1b]" in written[1] and "T-7 asks: which?" in written[1]


async def test_a_focused_cockpit_stays_quiet(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        written = capture(app)
        await ask(seeded.control)
        await until(pilot, lambda: "T-7" in app.board.shown_ids() and app.cards)
        await until(pilot, lambda: any(c.id == "T-7" and c.human for c in app.cards))
        assert written == []


async def test_notifications_off_in_t25_yaml(seeded):
    config = seeded.control.config
    seeded.control.config = config.model_copy(
        update={"cockpit": config.cockpit.model_copy(update={"notifications": False})}
    )
    app = app_for(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        written = capture(app)
        app.post_message(events.AppBlur())
        await until(pilot, lambda: not app.app_focus)
        await ask(seeded.control)
        await until(pilot, lambda: any(c.id == "T-7" and c.human for c in app.cards))
        assert written == []


def test_the_sequence_suits_the_terminal_and_carries_no_control_characters() -> None:
    vte = notification("T25", "T-3 asks: a;b\x1b]0;pwned\x07", {})
    assert vte == "\x1b]777;notify;T25;T-3 asks: a,b\\x1b]0,pwned\\x07\x07"
    assert notification("T25", "hi", {"LC_TERMINAL": "iTerm2"}) == "\x1b]9;T25: hi\x07"
    tmux = notification("T25", "hi", {"TMUX": "/tmp/tmux-1/default,1,0"})
    assert tmux == "\x1bPtmux;\x1b\x1b]777;notify;T25;hi\x07\x1b\\"
