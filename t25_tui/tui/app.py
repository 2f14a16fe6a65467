"""The cockpit: `make_app` builds it with its services injected.

Tests, the screenshot script, the benchmark and `t25 tui` all call `make_app`, so they
run the same app. The app owns no domain truth: it holds the control plane as
`core.ports.Operations`, reads through it, listens to its bus through
`t25_tui.tui.messages`, and every operator action is a `Decision` handed to its `decide` —
as on the command line — so the checks and the audit are the same. Attached to a remote
`t25 serve`, the control plane is its REST client, and the bus is fed by the serve's event
stream; the app cannot tell.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Static
from textual.worker import Worker, WorkerState

from core.control.sweeper import Sweeper
from core.domain.models import TaskState
from core.domain.text import printable
from core.errors import ControlPlaneUnreachable, T25Error
from core.ports import AgentAdapter, Operations
from t25_tui.tui import messages as bridge
from t25_tui.tui.cards import (
    BoardFilter,
    Card,
    Clock,
    blocked,
    board_tasks,
    cards,
    over_budget,
    wall_clock,
)
from t25_tui.tui.commands import COMMANDS, Keymap, Node, bindings, held_in_dialogs
from t25_tui.tui.decision_flows import DecisionFlows
from t25_tui.tui.desktop import notification
from t25_tui.tui.intake_flow import IntakeFlow
from t25_tui.tui.navigation import Navigation
from t25_tui.tui.screens.base import T25Screen
from t25_tui.tui.screens.detail import TaskDetailScreen
from t25_tui.tui.screens.dialogs import (
    MessageDialog,
)
from t25_tui.tui.screens.inbox import Inbox
from t25_tui.tui.widgets.board import Board
from t25_tui.tui.widgets.footer import KeysFooter

# While a dialog is open the cockpit's own commands wait; Textual's keys (tab and
# shift+tab between fields, copy) and quitting still work.
HELD_IN_DIALOGS = held_in_dialogs()
BOARD_TICK_S = 0.2  # how often a stale board is re-read: events within one tick are one read


class T25App(Navigation, DecisionFlows, IntakeFlow):
    """The T25 cockpit: board, detail, log, inbox, cost, audit, profiles.

    Its commands, and every screen's, are the rows of `t25_tui.tui.commands`; the keys
    `t25.yaml`'s `keys:` moves go to Textual's keymap, which rebinds them by id."""

    CSS_PATH = "t25.tcss"
    TITLE = "T25"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = bindings(Node.APP)

    def __init__(
        self,
        control: Operations,
        *,
        sweeper: Sweeper | None = None,
        clock: Clock | None = None,
        actor: str = "operator",
        adapters: Mapping[str, AgentAdapter] | None = None,
        poll_s: float = 1.0,
        refresh_s: float = 5.0,
        setup_note: str | None = None,
        handle_signals: bool = False,
        link: Callable[[], str] | None = None,
    ) -> None:
        super().__init__()
        self.control = control
        self.sweeper = sweeper
        self.clock = clock or wall_clock
        self.actor = actor
        self.adapters = dict(adapters or {})
        self.poll_s, self.refresh_s = poll_s, refresh_s
        self.setup_note = setup_note
        self.handle_signals = handle_signals
        self.link = link  # attached to a remote control plane: the connection's state
        self.keymap = Keymap(control.config.keys)
        self.set_keymap(self.keymap.textual())
        self.filter = BoardFilter()
        self.cards: list[Card] = []
        self.unread: dict[TaskState, int] = {}  # finished tasks the board did not read
        self.read_everything = False  # the last read took every task (for a filter)
        self.seen_event_id = 0
        self.loaded = asyncio.Event()  # the first board is on screen
        self.status_note = ""
        self.stopping = False
        self.terminal_away = False  # a shell or editor has the terminal (into_worktree)
        self._board_stale = False  # something changed since the board was last read
        self._board_reads = 0  # reads in flight
        self._sweeper_task: asyncio.Task[None] | None = None
        self.select_next: str | None = None  # a task just filed: selected once on the board

    # -- layout and start --------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static("T25", id="status")
        # Always laid out (one line), so opening it never re-lays-out the board.
        yield Input(
            placeholder="/ filter: project:NAME type:feat|fix|… words — enter applies, "
            "escape clears",
            id="filter",
            compact=True,
        )
        yield Board(id="board")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.run_worker(
            bridge.pump(self.control.bus, self.post_message),
            name="bridge",
            group="bridge",
            exit_on_error=False,
        )
        if self.sweeper is not None:
            self.run_worker(
                self._run_sweeper(self.sweeper),
                name="sweeper",
                group="sweeper",
                exit_on_error=False,
            )
        if self.handle_signals:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGHUP, signal.SIGTERM):
                loop.add_signal_handler(sig, self._terminal_gone)
        self.set_interval(self.poll_s, self._poll)
        self.set_interval(self.refresh_s, self.schedule_refresh)
        self.set_interval(BOARD_TICK_S, self._board_tick)
        self.refresh_board()
        if self.setup_note:
            self.push_screen(MessageDialog("No agent CLI found", self.setup_note))

    async def _run_sweeper(self, sweeper: Sweeper) -> None:
        self._sweeper_task = asyncio.current_task()
        await sweeper.work(follow=True)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place a worker's failure becomes visible."""
        if event.state is WorkerState.ERROR and not self.stopping:
            error = event.worker.error
            if isinstance(error, ControlPlaneUnreachable):
                return  # the status line already says the link is down, and it reconnects
            text = (
                error.message if isinstance(error, T25Error) else f"{type(error).__name__}: {error}"
            )
            self.notify(
                printable(f"{event.worker.name or 'a worker'} failed: {text}"),
                markup=False,
                severity="error",
                timeout=30,
            )

    # -- shutting down -------------------------------------------------------------------------

    def _terminal_gone(self) -> None:
        """SIGHUP (a dropped SSH session) or SIGTERM: stop the agents, hand runs back, leave."""
        _mute_terminal(self)
        self.run_worker(self._leave(), name="hangup", group="shutdown", exit_on_error=False)

    async def _leave(self) -> None:
        """Stop the agents and hand their runs back first; then exit. With no terminal left,
        Textual's own shutdown can still block on a write nobody reads: everything that
        matters is in the store by then, so a watchdog ends the process if it does."""
        await self.finish_decisions()
        await self.stop_sweeper()
        watchdog = threading.Timer(HANGUP_EXIT_S, os._exit, args=(0,))
        watchdog.daemon = True
        watchdog.start()
        self.exit()

    async def stop_sweeper(self, timeout_s: float = 30.0) -> None:
        """Cancel the sweeper: running agents' process groups end, their leases go back."""
        self.stopping = True
        task = self._sweeper_task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=timeout_s)

    async def action_quit(self) -> None:
        await self.finish_decisions()
        await self.stop_sweeper()
        self.exit()

    async def finish_decisions(self) -> None:
        """A decision already sent to the control plane completes (state, audit line, event)
        before the cockpit goes; leaving never cuts one in half."""
        pending = [w for w in self.workers if w.group == "actions" and not w.is_finished]
        if pending:
            await self.workers.wait_for_complete(pending)

    # -- the board -----------------------------------------------------------------------------

    @property
    def board(self) -> Board:
        return self.query_one(Board)

    def schedule_refresh(self) -> None:
        """The board is out of date: it is re-read within a tick.

        Only a flag is set here. The tick, a timer that runs for the app's whole life,
        starts the read, so no failed, cancelled or lost timer can leave the board
        without its next refresh; and while one read is in flight the next waits for it,
        so a steady stream of events cannot keep cancelling reads before one lands.
        """
        self._board_stale = True

    def _board_tick(self) -> None:
        if self._board_stale and not self._board_reads:
            self._board_stale = False
            self.refresh_board()

    @work(group="board", exclusive=True, exit_on_error=False)
    async def refresh_board(self) -> None:
        self._board_reads += 1  # counted inside the worker: one cancelled unstarted never counts
        try:
            last = await self.control.last_event_id()
            everything = bool(self.filter)
            tasks, self.unread = await board_tasks(self.control, everything=everything)
            spent = await self.control.cost_by_task(None if everything else [t.id for t in tasks])
            over = await over_budget(self.control, tasks, spent)
            waiting = await blocked(self.control, tasks)
        finally:
            self._board_reads -= 1
        self.seen_event_id = max(self.seen_event_id, last)
        self.read_everything = everything
        self.cards = cards(tasks, spent, over, waiting)
        self.show_cards()
        if not self.loaded.is_set():
            self.board.focus_first()
        self.loaded.set()

    def show_cards(self) -> None:
        if not self.screen_stack:
            return  # a board read that finished as the cockpit closed
        shown = [c for c in self.cards if self.filter.matches(c.task)]
        selected = self.board.selected() if self.screen is self.screen_stack[0] else None
        self.board.show(shown, self.clock(), {} if self.filter else self.unread)
        if selected and self.board.selected() != selected:
            self.board.focus_task(selected)  # the selection follows its card to a new column
        filed = self.select_next  # a task just filed: selected once the board shows it
        if filed and self.screen is self.screen_stack[0] and self.board.focus_task(filed):
            self.select_next = None
        self.show_status(len(shown))

    def _unconfined(self) -> list[str]:
        """The warning, while this cockpit's own workers would run agents unconfined."""
        from adapters.sandbox import unconfined_reason

        if self.sweeper is None or not unconfined_reason(self.control.config.sandbox.mode):
            return []
        return ["unconfined: agents run as you"]

    def show_status(self, shown: int | None = None) -> None:
        """The top line: tasks, who is waiting, the workers (or the remote link), notes."""
        waiting = sum(1 for c in self.cards if c.human)
        parts = [self._who_works(), *self._filter_note(shown), *self._unconfined()]
        if self.status_note:
            parts.append(self.status_note)
        # Content's plain strings are never read as markup; printable escapes the rest.
        self.query_one("#status", Static).update(
            Content.assemble(
                ("T25", "bold"),
                f" {len(self.cards) + sum(self.unread.values())} tasks · ",
                (f"⚑ {waiting} waiting (i)", "bold yellow") if waiting else "nothing waiting",
                *(f" · {printable(part)}" for part in parts),
            )
        )

    def _who_works(self) -> str:
        """The status line's word on who does the work: the remote link, or the workers."""
        if self.link:
            return self.link()
        workers = self.sweeper.pool.size if self.sweeper and self.sweeper.pool else 0
        return f"{workers} workers" if workers else "workers off"

    def _filter_note(self, shown: int | None) -> list[str]:
        if not self.filter:
            return []
        if shown is None:
            shown = sum(1 for c in self.cards if self.filter.matches(c.task))
        return [f"filter: {self.filter.describe()} ({shown})"]

    @work(group="poll", exclusive=True, exit_on_error=False)
    async def _poll(self) -> None:
        """See what other processes did (a `t25 approve` from another shell), and whether
        t25.yaml changed (core.config.live: read where this process decides; attached, serve
        reads its own)."""
        if (found := self.control.reread_config()) is not None:
            self.status(found.line())
        if await self.control.last_event_id() > self.seen_event_id:
            self.schedule_refresh()
            if self.screen_stack and isinstance(self.screen, Inbox):
                self.screen.task_changed(None)  # what another shell's `t25` asked or decided

    def on_board_opened(self, message: Board.Opened) -> None:
        self.push_screen(TaskDetailScreen(self.control, message.task_id, self.clock))

    # -- bridge messages -----------------------------------------------------------------------

    def on_task_changed(self, message: bridge.TaskChanged) -> None:
        self.seen_event_id = max(self.seen_event_id, message.event.id)
        if not self.screen_stack:
            return  # the cockpit is closing: its screens are gone, events still arrive
        self.schedule_refresh()
        if isinstance(self.screen, T25Screen):
            self.screen.task_changed(message.task_id)

    def on_run_output_arrived(self, message: bridge.RunOutputArrived) -> None:
        self.seen_event_id = max(self.seen_event_id, message.event.id)
        for screen in self.screen_stack:  # a detail under a dialog keeps its log going
            if isinstance(screen, T25Screen):
                screen.run_output(message.event)

    def on_human_needed(self, message: bridge.HumanNeeded) -> None:
        if self.screen_stack and self.screen is self.screen_stack[0]:
            # On the board a toast would cover its cards: the status line says it instead,
            # beside the count of what waits.
            self.status(f"⚑ {printable(message.text)}")
        else:
            self.notify(
                printable(message.text),
                title="a human is needed",
                severity="warning",
                timeout=12,
                markup=False,
            )
        # Away from the terminal (it reported a blur; one that never reports focus counts
        # as focused): the bell, and a desktop notification on the operator's machine.
        if (
            self.control.config.cockpit.notifications
            and not self.app_focus
            and not self.terminal_away
        ):
            self.bell()
            self.write_to_terminal(notification("T25: a human is needed", message.text, os.environ))

    def write_to_terminal(self, sequence: str) -> None:
        """Write an escape sequence straight to the terminal (none when headless)."""
        if not self.is_headless and self._driver is not None:
            self._driver.write(sequence)

    def on_store_resync(self, message: bridge.StoreResync) -> None:
        if self.link and self.loaded.is_set():
            self.show_status()  # a remote link went down or came back
        self.schedule_refresh()
        if self.screen_stack and isinstance(self.screen, T25Screen):
            self.screen.task_changed(None)  # whatever it shows may have changed meanwhile

    # -- navigation --------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (isinstance(self.screen, ModalScreen) and action in HELD_IN_DIALOGS)

    def status(self, note: str) -> None:
        self.status_note = note
        if self.cards or self.loaded.is_set():
            self.show_cards()

    def get_system_commands(self, screen: Screen[Any]) -> Iterator[SystemCommand]:
        """Textual's own, then every command with a title, with the keys in effect."""
        yield from super().get_system_commands(screen)
        for command in COMMANDS:
            if command.title is not None:
                yield SystemCommand(
                    f"T25: {command.title}",
                    f"{command.description} ({self.keymap.shown(command.id)})",
                    lambda action=command.action: self.run_action(action),
                )


HANGUP_EXIT_S = 5.0


def calm_garbage_collector() -> None:
    """Keep Python's cyclic collector from freezing the screen.

    A full collection over the cockpit's ~100 MB of widgets and rendered segments takes
    ~150 ms, and with agents streaming it ran often enough to put keypress-to-repaint p95
    at 160 ms (bench/tui.py). What exists at start-up is frozen out of every collection,
    and the young generation is collected every 50,000 allocations instead of 700: p95
    falls to ~70 ms with 8 agents streaming, for ~10 MB more resident memory. It changes
    the whole process, so only the real `t25 tui` calls it (not tests driving the app).
    """
    import gc

    gc.freeze()
    gc.set_threshold(50_000, 50, 100)


def _mute_terminal(app: App[Any]) -> None:
    """After a hang-up, whatever Textual still writes on its way out goes to /dev/null.

    A write to a hung-up terminal fails with EIO, which ends Textual's writer thread; its
    bounded queue then fills and the next write blocks shutdown forever. So point stdout
    at /dev/null, and if the writer already died, give it a queue that never blocks.
    """
    import os
    import queue
    import sys

    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.__stdout__, sys.__stderr__):
        if stream is None:
            continue
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError, AttributeError):
            pass
    os.close(devnull)
    writer = getattr(app._driver, "_writer_thread", None)
    if writer is not None and not writer.is_alive():
        writer._queue = queue.Queue()
        writer.write = lambda text: None


def make_app(control: Operations, **services: Any) -> T25App:
    """The cockpit with its services injected: sweeper, clock, actor, adapters, timings."""
    return T25App(control, **services)
