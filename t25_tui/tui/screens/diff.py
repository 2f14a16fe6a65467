"""A task's diff in the cockpit: the whole change or one implementing attempt's, by file.

Opened from the task detail. The list on the left holds "all files" and each file with
its line counts; the view on the right shows the chosen one, coloured as a diff. `v`
switches between the whole change and an attempt's, `[` `]` move between attempts. The
diff is read through `Operations.diff`, so an attached cockpit reads it from its serve.

The view draws only the lines on screen, styling each the first time it is shown (as
toolong draws a huge log): a diff of thousands of lines opens as fast as a short one. The
screen's keys are one line of text from the command table rather than a `Footer`, which
builds a widget per key again each time the focus moves: on this screen that was most of
the time it took to open.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from core.domain.diffs import FileDiff, TaskDiff
from core.domain.text import printable
from core.ports import Operations
from t25_tui.tui.cards import Clock, literal
from t25_tui.tui.commands import Node, bindings, commands_on
from t25_tui.tui.screens.base import T25Screen, cockpit

ALL = "all"  # the file list's first option: every file at once

# A diff line's style by how it begins, in order: headers before + and -.
_STYLES: tuple[tuple[str, Style], ...] = (
    ("diff --git ", Style(bold=True, color="bright_white", bgcolor="grey23")),
    ("+++ ", Style(bold=True)),
    ("--- ", Style(bold=True)),
    ("@@", Style(color="cyan")),
    ("+", Style(color="green")),
    ("-", Style(color="red")),
    ("rename ", Style(color="yellow")),
    ("new file", Style(color="yellow")),
    ("deleted file", Style(color="yellow")),
    ("Binary files", Style(color="yellow")),
    ("index ", Style(dim=True)),
)
_PLAIN = Style()


def style_of(line: str) -> Style:
    """How a diff line is coloured."""
    return next((style for prefix, style in _STYLES if line.startswith(prefix)), _PLAIN)


class DiffView(ScrollView, can_focus=True):
    """Diff text, drawn a screen's worth of lines at a time."""

    DEFAULT_CSS = "DiffView { height: 1fr; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines: list[str] = []
        self._segments: dict[int, Segment] = {}

    def show(self, text: str) -> None:
        """Show `text` (an agent wrote it: escaped line by line when drawn), from the top."""
        self.lines = text.splitlines()
        self._segments.clear()
        width = max((len(line) for line in self.lines), default=0)
        self.virtual_size = Size(width, len(self.lines))
        self.scroll_to(0, 0, animate=False)
        self.refresh()

    def _segment(self, index: int) -> Segment:
        found = self._segments.get(index)
        if found is None:
            line = self.lines[index]
            text = printable(line.expandtabs(4), multiline=False)
            found = self._segments[index] = Segment(text, style_of(line))
        return found

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if index >= len(self.lines):
            return Strip.blank(width, self.rich_style)
        strip = Strip([self._segment(index)])
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)


class DiffScreen(T25Screen):
    """One task's diff, the whole change or an attempt's, a file or all files at once."""

    BINDINGS = bindings(Node.DIFF)
    DEFAULT_CSS = """
    DiffScreen #diff-head { height: auto; padding: 0 1; }
    DiffScreen #diff-body { height: 1fr; }
    DiffScreen #diff-files { width: 30%; max-width: 48; height: 1fr; }
    DiffScreen #diff-keys { height: 1; background: $footer-background; }
    """

    def __init__(
        self, control: Operations, task_id: str, clock: Clock, *, attempt: int | None = None
    ) -> None:
        super().__init__(control, clock)
        self.task_id = task_id
        self.attempt = attempt  # None: the whole change
        self.last_attempt: int | None = attempt  # what `v` goes back to
        self.diff: TaskDiff | None = None
        self.chosen = ALL
        self._shown: tuple[TaskDiff, str] | None = None  # what the view holds

    def compose(self) -> ComposeResult:
        yield Static("", id="diff-head")
        with Horizontal(id="diff-body"):
            yield OptionList(id="diff-files")
            yield DiffView(id="diff-view")
        yield Static(self._key_line(), id="diff-keys")

    def _key_line(self) -> Text:
        """The screen's keys as they are in effect, and help's."""
        keymap = cockpit(self).keymap
        line = Text(" ")
        for command in (
            *commands_on(Node.DIFF),
            *(c for c in commands_on(Node.APP) if c.id == "help"),
        ):
            line.append(keymap.shown(command.id), style="bold")
            line.append(f" {command.label}   ")
        return line

    def on_mount(self) -> None:
        if self.diff is not None:  # read before the screen was pushed: drawn in one pass
            self._display(self.diff)
        else:
            self.load()

    @property
    def selected_task(self) -> str | None:
        return self.task_id

    @work(group="diff", exclusive=True, exit_on_error=False)
    async def load(self) -> None:
        self._display(await self.control.diff(self.task_id, attempt=self.attempt))

    def _display(self, diff: TaskDiff) -> None:
        self.diff = diff
        self._show_head(diff)
        files = self.query_one("#diff-files", OptionList)
        files.clear_options()
        files.add_options(
            [
                Option(literal(f"all files ({len(diff.files)})"), id=ALL),
                *(Option(_file_label(f), id=str(i)) for i, f in enumerate(diff.files)),
            ]
        )
        chosen = self.chosen if self.chosen == ALL or int(self.chosen) < len(diff.files) else ALL
        files.highlighted = 0 if chosen == ALL else int(chosen) + 1
        self._show(chosen)
        self.ready = True

    def _show_head(self, diff: TaskDiff) -> None:
        if diff.attempt is None:
            what = "the whole change against the default branch"
        else:
            what = f"attempt {diff.attempt} of {diff.attempts} ({diff.run_id})"
        facts = (
            f" · {what} · {len(diff.files)} file{'' if len(diff.files) == 1 else 's'} "
            f"+{diff.insertions} −{diff.deletions}"
            f"  ({self._keys_hint(diff)})"
        )
        head: list[str | tuple[str, str]] = [(diff.task_id, "bold"), facts]
        if diff.note:
            head += ["\n", (printable(diff.note), "yellow")]
        if diff.truncated:
            head += ["\n", ("cut short: the diff is over the size a read carries", "yellow")]
        self.query_one("#diff-head", Static).update(Content.assemble(*head))

    def _keys_hint(self, diff: TaskDiff) -> str:
        keymap = cockpit(self).keymap
        toggle = keymap.first("diff.view")
        if diff.attempts == 0:
            return "no implementing attempt yet"
        other = "an attempt" if diff.attempt is None else "the whole change"
        steps = f"{keymap.first('diff.previous_attempt')} {keymap.first('diff.next_attempt')}"
        return f"{toggle}: {other}" + ("" if diff.attempt is None else f", {steps}: other attempts")

    def _show(self, chosen: str) -> None:
        diff = self.diff
        if diff is None or (self._shown and self._shown[0] is diff and self._shown[1] == chosen):
            return  # the view holds it already
        self.chosen = chosen
        self._shown = (diff, chosen)
        view = self.query_one(DiffView)
        if chosen == ALL:
            view.show(diff.text or "(no change)")
        else:
            view.show(diff.files[int(chosen)].text)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id is not None and self.diff is not None:
            self._show(event.option.id)

    # -- keys ------------------------------------------------------------------------------

    def action_toggle_view(self) -> None:
        """The whole change, or the attempt last looked at (the newest at first)."""
        if self.attempt is not None:
            self.last_attempt, self.attempt = self.attempt, None
        elif self.diff is not None and self.diff.attempts:
            self.attempt = self.last_attempt or self.diff.attempts
        else:
            self.notify("no implementing attempt yet", severity="warning")
            return
        self.load()

    def action_attempt(self, step: int) -> None:
        """The previous or next attempt (from the whole change: the newest or the first)."""
        total = self.diff.attempts if self.diff else 0
        if not total:
            self.notify("no implementing attempt yet", severity="warning")
            return
        if self.attempt is None:
            wanted = total if step < 0 else 1
        else:
            wanted = min(max(self.attempt + step, 1), total)
        if wanted != self.attempt:
            self.attempt = wanted
            self.load()


async def diff_screen(
    control: Operations, task_id: str, clock: Clock, *, attempt: int | None = None
) -> DiffScreen:
    """A diff screen with its diff already read. Pushed, it lays out once, with the text in
    it: reading while the new screen is laid out would wait on that layout."""
    screen = DiffScreen(control, task_id, clock, attempt=attempt)
    screen.diff = await control.diff(task_id, attempt=attempt)
    return screen


def _file_label(f: FileDiff) -> Text:
    name = f"{f.old_path} → {f.path}" if f.old_path else f.path
    counts = "binary" if f.binary else f"+{f.insertions} −{f.deletions}"
    return literal(f"{name}  {counts}")
