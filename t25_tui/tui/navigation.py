"""Where the operator goes in the cockpit: the board and its filter, the screens above it,
the selected task's detail and log, and its worktree (a shell or an editor, with the
terminal handed over). `T25App` takes these as a mixin; the keys and the palette bind their
`action_*` by name.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from textual import on, work
from textual.widgets import Input

from core.domain.text import printable
from core.errors import T25Error
from core.ports import AgentAdapter, Operations
from t25_tui.tui.cards import BoardFilter, Clock
from t25_tui.tui.screens.base import Cockpit, T25Screen
from t25_tui.tui.screens.detail import TaskDetailScreen
from t25_tui.tui.screens.dialogs import MessageDialog
from t25_tui.tui.screens.help import HelpScreen
from t25_tui.tui.screens.inbox import Inbox
from t25_tui.tui.screens.panes import AuditPane, CostPane, ProfilesPane
from t25_tui.tui.workspace import editor_argv, shell_argv, worktree_of

if TYPE_CHECKING:
    from collections.abc import Mapping

    from t25_tui.tui.widgets.board import Board


class Navigation(Cockpit):
    """The operator's ways around the cockpit, and into a task's worktree."""

    control: Operations
    clock: Clock
    filter: BoardFilter
    read_everything: bool
    terminal_away: bool

    if TYPE_CHECKING:
        adapters: Mapping[str, AgentAdapter]

        @property
        def board(self) -> Board: ...

        def show_cards(self) -> None: ...

        def schedule_refresh(self) -> None: ...

        def status(self, note: str) -> None: ...

    def action_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.set_filter(event.value)
        self.board.focus_first()

    def set_filter(self, query: str) -> None:
        self.filter = BoardFilter.parse(query)
        self.query_one("#filter", Input).value = query
        self.show_cards()
        if bool(self.filter) != self.read_everything:
            self.schedule_refresh()  # a filter searches every task; without, the newest

    def key_escape(self) -> None:
        box = self.query_one("#filter", Input)
        if self.screen is self.screen_stack[0] and (box.has_focus or self.filter):
            self.set_filter("")
            self.board.focus_first()

    def _show(self, screen: T25Screen | None) -> None:
        """`screen` straight above the board (None: the board itself)."""
        while len(self.screen_stack) > 1:
            self.pop_screen()
        if screen is not None:
            self.push_screen(screen)

    def action_board(self) -> None:
        self._show(None)

    def action_inbox(self) -> None:
        self._show(Inbox(self.control, self.clock))

    def action_cost(self) -> None:
        self._show(CostPane(self.control, self.clock))

    def action_audit(self) -> None:
        self._show(AuditPane(self.control, self.clock))

    def action_profiles(self) -> None:
        self._show(ProfilesPane(self.control, self.clock, self.adapters))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def selected_task(self) -> str | None:
        screen = self.screen
        if isinstance(screen, T25Screen):
            return screen.selected_task
        return self.board.selected() if screen is self.screen_stack[0] else None

    def _need_task(self) -> str | None:
        tid = self.selected_task()
        if tid is None:
            self.bell()
            self.status("select a task first (arrows on the board)")
        return tid

    def action_open(self) -> None:
        if tid := self._need_task():
            self.push_screen(TaskDetailScreen(self.control, tid, self.clock))

    def action_log(self) -> None:
        if tid := self._need_task():
            if isinstance(self.screen, TaskDetailScreen):
                self.screen.action_tab("log")
            else:
                self.push_screen(TaskDetailScreen(self.control, tid, self.clock, tab="log"))

    def action_shell(self) -> None:
        if tid := self._need_task():
            self.into_worktree(tid, shell_argv(os.environ))

    def action_editor(self) -> None:
        if tid := self._need_task():
            self.into_worktree(tid, editor_argv(os.environ))

    @work(group="workspace", exclusive=True, exit_on_error=False)
    async def into_worktree(self, tid: str, argv: list[str]) -> None:
        """Run `argv` (a shell, an editor) in `tid`'s worktree with the terminal handed to
        it; the cockpit comes back when it ends. Its agents go on meanwhile: the program is
        awaited on the event loop, not waited for by a blocking call, so the loop keeps their
        output read and their leases renewed."""
        try:
            path = await worktree_of(self.control, tid)
        except T25Error as exc:
            hint = f"\n\nhint: {exc.hint}" if exc.hint else ""
            self.push_screen(MessageDialog("No worktree to open", exc.message + hint))
            return
        failed = ""
        with self._terminal_handed_over():
            try:
                program = await asyncio.create_subprocess_exec(*argv, cwd=path)
                code = await program.wait()
            except OSError as exc:
                failed = f"{argv[0]}: {exc.strerror or exc}"
        if failed:
            self.push_screen(MessageDialog("Could not start it", printable(failed)))
        else:
            self.status(f"back from {argv[0]} in {tid}'s worktree (exit {code})")

    @contextmanager
    def _terminal_handed_over(self) -> Iterator[None]:
        """The terminal belongs to another program: the cockpit suspends, and paints
        nothing until it is back (a repaint would land in the other program's screen).
        Headless (under a test) there is no terminal to hand over."""
        if self.is_headless:
            yield
            return
        self.terminal_away = True
        try:
            with self.batch_update(), self.suspend(), _keys_belong_to_the_program():
                yield
        finally:
            self.terminal_away = False


# What a key sends the terminal's foreground processes — the cockpit and the program it runs
# alike: ctrl+c, ctrl+\\.
_PROGRAMS_KEYS = (signal.SIGINT, signal.SIGQUIT)


@contextmanager
def _keys_belong_to_the_program() -> Iterator[None]:
    """While a shell or an editor has the terminal, ctrl+c and ctrl+\\ are its own: the
    cockpit, in the same process group, takes no notice of them (asyncio's default would stop
    the cockpit, and the program with it). The program starts with the default handling, as
    handlers are reset when it execs."""
    loop = asyncio.get_running_loop()
    before = {sig: signal.getsignal(sig) for sig in _PROGRAMS_KEYS}
    for sig in _PROGRAMS_KEYS:
        loop.add_signal_handler(sig, lambda: None)
    try:
        yield
    finally:
        for sig, handler in before.items():
            loop.remove_signal_handler(sig)
            if handler is not None:
                signal.signal(sig, handler)
