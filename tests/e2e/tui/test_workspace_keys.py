"""Pilot tests: `s` and `e` start the operator's shell and editor in the selected task's
worktree, and say so when it has none.

Under Pilot the app is headless and `App.suspend` is not supported there, so the cockpit
hands over no terminal (`_terminal_handed_over` is a no-op): the program really runs, with
the argv and directory a real terminal would get, and these tests read what it recorded.
The suspension itself is tested on the real binary in a pty, with an interactive shell.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from t25_tui.tui.screens.dialogs import MessageDialog
from tests.support.cockpit import app_for, settle_board, until
from tests.support.shell import recorder


async def test_the_shell_and_the_editor_open_in_the_worktree(seeded, tmp_path, monkeypatch):
    shell, shell_record = recorder(tmp_path, "shell")
    editor, editor_record = recorder(tmp_path, "editor")
    monkeypatch.setenv("SHELL", str(shell))
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.delenv("VISUAL", raising=False)
    worktree = seeded.control.worktrees("shop").path_for("T-1")
    app = app_for(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-1")
        await pilot.press("s")
        await until(pilot, lambda: "back from" in app.status_note)
        assert shell_record.read_text().splitlines()[0] == str(worktree)
        await pilot.press("e")
        await until(pilot, lambda: "editor in T-1" in app.status_note)
        assert editor_record.read_text().splitlines() == [str(worktree), "."]


async def test_a_task_without_a_worktree_says_so(seeded, tmp_path, monkeypatch):
    shell, record = recorder(tmp_path, "shell")
    monkeypatch.setenv("SHELL", str(shell))
    app = app_for(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-9")
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, MessageDialog))
        assert "T-9 has no worktree" in app.screen.body
        assert not Path(record).exists()


def test_the_real_cockpit_steps_aside_for_a_shell_and_comes_back(tmp_path, monkeypatch):
    """`t25 tui` on a pty: `s` suspends it, an interactive /bin/sh gets the terminal in the
    worktree, and exiting the shell brings the board back."""
    from t25_tui.cli.demo import DEMO_CONFIG
    from tests.support.terminal import Terminal, make_sample_checkout, t25_as_operator

    repo = make_sample_checkout(tmp_path / "shop", DEMO_CONFIG)
    t25_as_operator(repo, "task", "new", "Rotate the key", "--description", "scripted: risk=high")
    monkeypatch.setenv("SHELL", "/bin/sh")
    monkeypatch.setenv("PS1", "in-the-worktree$ ")
    term = Terminal(repo, size=(100, 30))
    try:
        term.wait_for("APPROVE 1", timeout=90)  # T-1, selected, has its worktree
        term.type("s")
        term.wait_for("in-the-worktree$")
        # ctrl+c and ctrl+\ at the shell's prompt are the shell's, not the cockpit's: the
        # terminal signals its whole foreground group, the cockpit included, so the cockpit
        # gets them too, here sent to it alone so that when they arrive is no matter.
        for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGINT):
            os.kill(term.pid, sig)
        term.type("\x03")
        term.type("echo still-here\r")
        term.wait_for("still-here\r\nin-the-worktree$")
        term.type("pwd > ../where; exit 7\r")
        term.wait_for("back from /bin/sh in T-1's worktree (exit 7)")
        assert (repo / ".factory" / "worktrees" / "where").read_text().strip() == str(
            (repo / ".factory" / "worktrees" / "T-1").resolve()
        )
        term.type("q")
        assert term.wait_exit() == 0
    finally:
        term.kill()
