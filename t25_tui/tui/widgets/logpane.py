"""A live per-run log: follows an agent's output as it streams, replays a finished run.

Output is shown as `t25 logs` shows it: rendered by `adapters.transcript` (messages, tool
calls, results, errors), a transcript per stream so an event split across two batches is
read whole. Writing to a `Log` line by line is slow, so output is buffered and written in batches on
a short timer (toolong's habit); `max_lines` bounds memory whatever an agent prints.
A run opens at its end, however long it is: its last few kilobytes (`core.domain.run_tail`),
and scrolling to the top reads the window before, until the run's start or the pane's
`max_lines`. Live events that arrive while the run opens are held and applied after it,
skipping any the opening read already wrote. The screen
that holds the pane hands it live output (`take`) and runs its keys (the task detail's
`log.*` commands).
"""

from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Log, Static

from adapters.transcript import Transcript, as_text
from core.domain.events import Event, RunFinished, RunOutput
from core.domain.run_tail import Window, read_back
from core.ports import Operations
from t25_tui.tui.cards import Clock, literal

FLUSH_S = 0.1
MAX_LINES = 20_000
LINES_PER_TICK = 1_000
STATUS_TICK_S = 1.0  # how often "last output 12 s ago" moves on


def ago(then: datetime, now: datetime) -> str:
    """`12 s`, `4 min`, `2 h`: how long since `then`."""
    seconds = max(int((now - then).total_seconds()), 0)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def _split_lines(text: str, count: int) -> tuple[str, str]:
    """The first `count` lines of `text`, and the rest."""
    cut = -1
    for _ in range(count):
        cut = text.find("\n", cut + 1)
        if cut < 0:
            return text, ""
    return text[: cut + 1], text[cut + 1 :]


class FollowedLog(Log):
    """A Log that keeps its last line in view while it follows. A write scrolls to the end
    of the log as it is laid out then; the screen may lay it out smaller afterwards (a
    task's head filled in, a scrollbar for lines wider than the pane), which left the
    newest lines below the view: it scrolls to the end again once laid out."""

    def on_resize(self) -> None:
        self._keep_end()

    def watch_show_horizontal_scrollbar(self) -> None:
        self._keep_end()

    def _keep_end(self) -> None:
        if self.auto_scroll:
            self.scroll_end(animate=False, x_axis=False)  # after the refresh: laid out


class LogPane(Vertical):
    """One run's output, followed or paused, and searched."""

    def __init__(
        self,
        control: Operations,
        task_id: str,
        run_id: str | None,
        *,
        max_lines: int = MAX_LINES,
        flush_s: float = FLUSH_S,
        clock: Clock | None = None,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id, classes="logpane")
        self.control = control
        self.task_id = task_id
        self.run_id = run_id
        self.max_lines = max_lines
        self.flush_s = flush_s
        self.following = True
        self.replayed = False
        self.cursor = 0  # the last event id written (replay and live)
        self._held: list[RunOutput] = []
        self._buffer: list[str] = []
        self.written = 0  # characters written, for tests and the benchmark
        self._query = ""
        self._match_line = -1
        self._transcripts: dict[str, Transcript] = {}  # by stream, of the run shown
        self.clock = clock  # with one, the status line says how long ago the run last wrote
        self.last_output_at: datetime | None = None
        self.chosen = False  # the operator opened this run: a newer one does not replace it
        self._note = ""
        self._older: int | None = None  # output older than this id is not read yet
        self._heads: dict[str, str] = {}  # by stream: the line begun in that older output
        self._full = False  # the pane holds `max_lines`: older output is for `t25 logs`
        self._reading_older = False

    def compose(self) -> ComposeResult:
        yield Static(self._status(), classes="log-status")
        yield Input(placeholder="search this log, enter to find", classes="log-search")
        yield FollowedLog(max_lines=self.max_lines, highlight=False, auto_scroll=True)

    @property
    def output(self) -> Log:
        return self.query_one(Log)

    def _status(self, extra: str | None = None) -> Text:
        if extra is not None:
            self._note = extra
        what = self.run_id or "no run yet"
        mode = "following" if self.following else "paused (f to follow)"
        parts = [f"log {what}", mode]
        if self.clock is not None and self.last_output_at is not None:
            parts.append(f"last output {ago(self.last_output_at, self.clock())} ago")
        if self._full:
            parts.append(f"older output: t25 logs {self.run_id}")
        elif self._older is not None:
            parts.append("older output above")
        if self._note:
            parts.append(self._note)
        return literal(" · ".join(parts))

    def show_status(self) -> None:
        """The status line again: the time since the last output moves on."""
        self.query_one(".log-status", Static).update(self._status())

    def show_status_note(self, note: str) -> None:
        self.query_one(".log-status", Static).update(self._status(note))

    def on_mount(self) -> None:
        self.query_one(".log-search").display = False
        self.set_interval(self.flush_s, self.flush)
        if self.clock is not None:
            self.set_interval(STATUS_TICK_S, self.show_status)
        self.watch(self.output, "scroll_y", self._scrolled, init=False)
        if self.run_id:
            self.replay()

    def show_run(self, run_id: str, *, chosen: bool = False) -> None:
        """Switch to another run: clear and replay it. One the operator `chosen` stays
        shown when a newer run starts."""
        self.run_id = run_id
        self.chosen = chosen
        self.last_output_at = None
        self._note = ""
        self.cursor = 0
        self._buffer.clear()
        self._held.clear()
        self._transcripts.clear()
        self._older, self._heads, self._full = None, {}, False
        self.replayed = False
        self.output.clear()
        self.query_one(".log-status", Static).update(self._status())
        self.replay()

    @work(group="log-newest", exclusive=True, exit_on_error=False)
    async def open_newest(self) -> None:
        """Show the task's newest run, found by the pane itself: its tail is read beside
        the screen's own reads, not after them, so the log is not the last thing drawn."""
        runs = await self.control.runs(task=self.task_id)
        if runs and self.run_id is None:
            self.show_run(runs[-1].id)

    def shown(self, event: RunOutput) -> str:
        """A batch of agent output as the log shows it: the lines it completes, rendered
        (everything an agent wrote is escaped there, so no ESC reaches the terminal)."""
        if self.last_output_at is None or event.at > self.last_output_at:
            self.last_output_at = event.at
        transcript = self._transcripts.setdefault(event.stream, Transcript(event.stream))
        return "".join(as_text(entry) + "\n" for entry in transcript.feed(event.text))

    def _finished(self) -> None:
        """The run ended: the last lines it left unfinished."""
        for transcript in self._transcripts.values():
            self._buffer.extend(as_text(entry) + "\n" for entry in transcript.close())
        self._transcripts.clear()

    def take(self, event: RunOutput) -> None:
        """A live batch of output from the bridge: buffer it for the next flush."""
        if event.run_id != self.run_id:
            return
        if not self.replayed:
            self._held.append(event)
        elif event.id > self.cursor:
            self.cursor = event.id
            self._buffer.append(self.shown(event))

    async def _read_back(self, run_id: str, before: int | None) -> Window:
        async def read(below: int | None, limit: int) -> list[Event]:
            return await self.control.run_events(run_id, before=below, limit=limit)

        return await read_back(read, before)

    @work(group="log-replay", exclusive=True, exit_on_error=False)
    async def replay(self) -> None:
        """Open the run at its end: its newest output, then what arrived meanwhile."""
        run_id = self.run_id
        if run_id is None:
            return
        window = await self._read_back(run_id, None)
        if run_id != self.run_id:
            return
        self._older, self._heads = window.older, window.heads
        for e in window.events:
            if isinstance(e, RunOutput):
                self._buffer.append(self.shown(e))
            elif isinstance(e, RunFinished):
                self._finished()
        self.cursor = window.newest
        for e in self._held:
            if e.id > self.cursor:
                self.cursor = e.id
                self._buffer.append(self.shown(e))
        self._held.clear()
        self.replayed = True
        self.flush()
        self.show_status()
        self.call_after_refresh(self._fill)

    def _scrolled(self, y: float) -> None:
        """The operator scrolled to the top: the output before it, if there is some."""
        if y <= 0 and self.output.max_scroll_y > 0:
            self._older_wanted()

    def _fill(self) -> None:
        """A log too short to scroll is filled from older output, if there is some."""
        if self.output.max_scroll_y <= 0:
            self._older_wanted()

    def _older_wanted(self) -> None:
        if self._older is not None and self.replayed and not self._reading_older:
            self._reading_older = True
            self.read_older()

    @work(group="log-older", exclusive=True, exit_on_error=False)
    async def read_older(self) -> None:
        """The window before the oldest output shown, put above it; the view stays put."""
        try:
            await self._put_older()
        finally:
            self._reading_older = False

    async def _put_older(self) -> None:
        run_id, older = self.run_id, self._older
        if run_id is None or older is None:
            return
        window = await self._read_back(run_id, older)
        if run_id != self.run_id or older != self._older:
            return
        transcripts: dict[str, Transcript] = {}
        entries = []
        for e in window.events:
            if isinstance(e, RunOutput):
                transcript = transcripts.setdefault(e.stream, Transcript(e.stream))
                entries += transcript.feed(e.text)
        for stream, head in self._heads.items():  # the lines the newer window began within
            transcript = transcripts.setdefault(stream, Transcript(stream))
            entries += [*transcript.feed(head), *transcript.close()]
        lines = [as_text(entry) for entry in entries]
        shown = list(self.output.lines)
        room = self.max_lines - len(shown)
        if len(lines) >= room:
            lines, self._full = lines[len(lines) - room :] if room > 0 else [], True
        self._older, self._heads = (None, {}) if self._full else (window.older, window.heads)
        log = self.output
        log.clear()  # the open last line ("" after a newline) stays open
        log.write("".join(line + "\n" for line in lines) + "\n".join(shown), scroll_end=False)
        self.written += sum(len(line) + 1 for line in lines)
        log.scroll_to(y=len(lines), animate=False)
        self.show_status()
        self.call_after_refresh(self._fill)

    def flush(self) -> None:
        """Write what arrived since the last tick, in one call, at most LINES_PER_TICK
        lines a tick so a flood never stalls the UI; lines that `max_lines` would drop
        anyway are dropped before they are drawn."""
        if not self._buffer:
            return
        text = "".join(self._buffer)
        self._buffer.clear()
        if text.count("\n") > self.max_lines:
            self.written += len(text)
            cut = len(text)
            for _ in range(self.max_lines + 1):
                cut = text.rfind("\n", 0, cut)
            self.written -= len(text) - (cut + 1)
            text = text[cut + 1 :]
            self.output.clear()
            if self._older is not None:  # what is dropped was never shown: no older to add
                self._older, self._heads, self._full = None, {}, True
        head, rest = _split_lines(text, LINES_PER_TICK)
        if rest:
            self._buffer.append(rest)
        self.written += len(head)
        self.output.write(head, scroll_end=self.following)
        if self._older is not None and self.output.line_count >= self.max_lines:
            self._older, self._heads, self._full = None, {}, True  # the oldest lines go next

    def action_toggle_follow(self) -> None:
        self.following = not self.following
        self.output.auto_scroll = self.following
        if self.following:
            self.output.scroll_end(animate=False)
        self.query_one(".log-status", Static).update(self._status())

    def action_search(self) -> None:
        search = self.query_one(".log-search", Input)
        search.display = True
        search.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._query = event.value.strip()
        self._match_line = -1
        event.input.display = False
        self.output.focus()
        self.action_next_match()

    def action_next_match(self) -> None:
        if not self._query:
            return
        lines = self.output.lines
        needle = self._query.lower()
        start = self._match_line + 1
        order = list(range(start, len(lines))) + list(range(start))
        hit = next((i for i in order if needle in lines[i].lower()), None)
        if hit is None:
            self.query_one(".log-status", Static).update(self._status(f"“{self._query}” not found"))
            return
        self._match_line = hit
        if self.following:
            self.action_toggle_follow()  # looking at a match: stop following
        self.output.scroll_to(y=max(hit - 2, 0), animate=False)
        count = sum(needle in line.lower() for line in lines)
        self.query_one(".log-status", Static).update(
            self._status(f"“{self._query}” line {hit + 1} ({count} matches, n for next)")
        )
