"""A task's detail: history with times and actors, artifacts, runs, and the live log.

Artifacts are highlighted with Rich's Syntax (JSON, diffs, Markdown); the runs table
shows which adapter, CLI version and model played each run and what it cost. Selecting
a run shows its log; the log follows the newest run by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from rich.syntax import Syntax
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.widgets import DataTable, Label, OptionList, Static, TabbedContent, TabPane
from textual.widgets.option_list import Option

from core.domain.check_text import failing_checks
from core.domain.cost import Spend
from core.domain.detail import TaskDetail as Detail
from core.domain.events import DecisionRecorded, Event, RunOutput, TaskTransitioned
from core.domain.models import Artifact, ArtifactKind, CheckResult, Run, Task
from core.domain.network import ConnectionTally
from core.domain.text import printable
from core.ports import Operations
from t25_tui.tui.cards import Clock, age, duration, human_needed, literal
from t25_tui.tui.commands import Node, bindings
from t25_tui.tui.screens.base import T25Screen
from t25_tui.tui.widgets.footer import KeysFooter
from t25_tui.tui.widgets.logpane import LogPane
from t25_tui.tui.widgets.table import MeasuredTable

LEXERS = {"application/json": "json", "text/x-diff": "diff", "text/markdown": "markdown"}
SHOWN = (
    ArtifactKind.SPEC,
    ArtifactKind.PLAN,
    ArtifactKind.QA_REPORT,
    ArtifactKind.REVIEW,
    ArtifactKind.DIFF,
    ArtifactKind.DOCS,
)


def lexer_for(artifact: Artifact, text: str) -> str:
    if artifact.meta.kind is ArtifactKind.DIFF or text.startswith("diff --git"):
        return "diff"
    if artifact.meta.media_type in LEXERS:
        return LEXERS[artifact.meta.media_type]
    return "json" if text.lstrip().startswith("{") else "text"


AGE_TICK_S = 1.0  # how often the head's "IMPLEMENTING for 3m" moves on
# What each tab opens with focused: its keys work at once (not a hidden failing-checks box's).
FOCUSED = {
    "history": "#history-table",
    "artifacts": "#artifact-list",
    "runs": "#runs-table",
    "log": "#log-pane Log",
}


class TaskDetailScreen(T25Screen):
    """Everything about one task, and its log. Escape returns to where it was opened."""

    BINDINGS = bindings(Node.DETAIL)
    AUTO_FOCUS = None  # its first tab's widget, on mount (FOCUSED)

    def __init__(
        self, control: Operations, task_id: str, clock: Clock, *, tab: str = "history"
    ) -> None:
        super().__init__(control, clock)
        self.task_id = task_id
        self.first_tab = tab
        self.runs: list[Run] = []
        self.artifacts: list[Artifact] = []
        self.blockers: tuple[str, ...] = ()  # the tasks it waits for: a change to one is news
        self._head: tuple[Task, Spend, Sequence[str], str] | None = None  # as last read

    def compose(self) -> ComposeResult:
        yield Static("", id="detail-head")
        yield Static("", id="detail-network")
        yield VerticalScroll(Static("", id="detail-failing-text"), id="detail-failing")
        with TabbedContent(initial=self.first_tab, id="detail-tabs"):
            with TabPane("History", id="history"):
                yield MeasuredTable(id="history-table", cursor_type="row", zebra_stripes=True)
            with TabPane("Artifacts", id="artifacts"), Horizontal():
                yield OptionList(id="artifact-list")
                with VerticalScroll(id="artifact-view"):
                    yield Static("select an artifact", id="artifact-text")
            with TabPane("Runs", id="runs"):
                yield MeasuredTable(id="runs-table", cursor_type="row", zebra_stripes=True)
                yield Label("enter on a run shows its log", classes="hint")
            with TabPane("Log", id="log"):
                yield LogPane(self.control, self.task_id, None, clock=self.clock, id="log-pane")
        yield KeysFooter()

    def on_mount(self) -> None:
        history = self.query_one("#history-table", DataTable)
        history.add_columns("time", "change", "actor", "reason")
        runs = self.query_one("#runs-table", DataTable)
        runs.add_columns(
            "run",
            "stage",
            "role",
            "status",
            "adapter",
            "cli",
            "model",
            "took",
            "exit",
            "tokens in/out",
            "cost",
        )
        if self.first_tab in FOCUSED:
            self.query_one(FOCUSED[self.first_tab]).focus()
        self.query_one(LogPane).open_newest()  # its own read: the log need not wait for ours
        self.reload(first=True)
        self.set_interval(AGE_TICK_S, self._tick)

    def _tick(self) -> None:
        """The head again with the time now: its age moves on while an agent works."""
        if self._head is not None:
            task, spend, blockers, figures = self._head
            self._show_head(task, self.clock(), spend, blockers, figures)

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        if tab == "log":
            self.query_one(LogPane).output.focus()

    # The log's keys work from anywhere in the detail: they show the log first.

    def action_follow_log(self) -> None:
        self.action_tab("log")
        self.query_one(LogPane).action_toggle_follow()

    def action_search_log(self) -> None:
        self.action_tab("log")
        self.query_one(LogPane).action_search()

    def action_next_match(self) -> None:
        self.action_tab("log")
        self.query_one(LogPane).action_next_match()

    @work(group="diff", exclusive=True, exit_on_error=False)
    async def action_diff(self) -> None:
        """Its diff, on a screen of its own, pushed once the diff is read."""
        from t25_tui.tui.screens.diff import diff_screen

        self.app.push_screen(await diff_screen(self.control, self.task_id, self.clock))

    @work(group="detail", exclusive=True, exit_on_error=False)
    async def reload(self, first: bool = False) -> None:
        detail = await self.control.detail(self.task_id)
        task, events = detail.task, detail.history
        self.runs = detail.runs
        self.artifacts = [a for a in detail.artifacts if a.meta.kind in SHOWN]
        self.blockers = detail.blockers
        now = self.clock()
        self._head = (task, detail.spend, detail.blockers, _figures(detail))
        self._show_head(task, now, *self._head[1:])
        failing = failing_checks(detail.checks) if task.checks_passed is False else []
        self.query_one("#detail-failing").display = bool(failing)
        self.query_one("#detail-failing-text", Static).update(
            Content.assemble(("failing checks\n", "bold red"), "\n".join(failing))
        )
        self._show_denied(detail.network)
        self._show_history(events)
        self._show_runs(now)
        self._show_artifacts()
        self.ready = True
        self._follow_newest_run(first)

    def _show_head(
        self, task: Task, now: datetime, spend: Spend, blockers: Sequence[str], figures: str
    ) -> None:
        need = human_needed(task)
        # Content's plain strings are never read as markup; printable escapes the rest.
        facts = (
            f"  {printable(task.title)}\n{task.state} for "
            f"{age(task.state_since, now)} · {task.type.value} · {printable(task.branch)}"
            f" · project {printable(task.project)} · loops qa {task.qa_loops} review "
            f"{task.review_loops}\nspent {printable(spend.line())}"
        )
        head: list[str | tuple[str, str]] = [(task.id, "bold"), facts]
        if spend.reached:
            head.append((" · budget reached", "bold red"))
        if need:
            head += ["\n", (f"⚑ {need}", "bold yellow")]
        if blockers:
            each = "it is" if len(blockers) == 1 else "each is"
            waits = f"⧗ waits for {', '.join(blockers)}: it starts once {each} merged"
            head += ["\n", (waits, "bold magenta")]
        if figures:
            head += ["\n", f"checks: {figures}"]
        if task.error:
            head += ["\n", (f"error: {printable(task.error)}", "red")]
        if task.protected_paths:
            paths = ", ".join(printable(p) for p in task.protected_paths)
            head += ["\n", (f"protected paths touched (a merge names each): {paths}", "yellow")]
        self.query_one("#detail-head", Static).update(Content.assemble(*head))

    def _show_denied(self, network: Sequence[ConnectionTally]) -> None:
        """What its runs tried to reach and T25's proxy refused, under the head."""
        denied = [t for t in network if not t.allowed]
        shown = "; ".join(printable(f"{t.run_id} {t.line()}") for t in denied[:3])
        more = f" and {len(denied) - 3} more (t25 task show)" if len(denied) > 3 else ""
        line = self.query_one("#detail-network", Static)
        line.display = bool(denied)
        line.update(Content.assemble(("network: ", "bold red"), shown + more))

    def _show_history(self, events: Sequence[Event]) -> None:
        history = self.query_one("#history-table", DataTable)
        history.clear()
        for e in events:
            if isinstance(e, TaskTransitioned):
                change: str | Text = f"{e.from_state} → {e.to_state}"
            elif isinstance(e, DecisionRecorded):
                change = literal(f"decision: {e.decision}")
            else:
                continue
            history.add_row(
                f"{e.at:%Y-%m-%d %H:%M:%S}", change, literal(e.actor), literal(e.reason)
            )

    def _show_runs(self, now: datetime) -> None:
        runs = self.query_one("#runs-table", DataTable)
        runs.clear()
        for r in self.runs:
            runs.add_row(*run_row(r, now), key=r.id)

    def _show_artifacts(self) -> None:
        listing = self.query_one("#artifact-list", OptionList)
        highlighted = listing.highlighted
        listing.clear_options()
        listing.add_options(
            [
                Option(literal(f"{a.meta.kind.value} {a.id} ({a.meta.run_id or '-'})"), id=a.id)
                for a in self.artifacts
            ]
        )
        if self.artifacts:
            listing.highlighted = (
                highlighted if highlighted is not None else len(self.artifacts) - 1
            )

    def _follow_newest_run(self, first: bool) -> None:
        """The log shows the newest run, unless the operator opened another (from Runs) or
        stopped following."""
        pane = self.query_one(LogPane)
        if not self.runs or pane.run_id == self.runs[-1].id:
            return
        if pane.chosen and not first:  # the run the operator opened stays
            pane.show_status_note(f"a newer run {self.runs[-1].id} started: Runs has it")
            return
        if first or pane.run_id is None or pane.following:
            pane.show_run(self.runs[-1].id)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id == "artifact-list" and event.option.id:
            self.show_artifact(event.option.id)

    @work(group="artifact", exclusive=True, exit_on_error=False)
    async def show_artifact(self, artifact_id: str) -> None:
        artifact, content = await self.control.artifact(artifact_id)
        text = content.decode(errors="replace")
        if artifact.meta.media_type == "application/json":
            import json

            try:
                parsed = json.loads(text)
                text = json.dumps(parsed, indent=2, ensure_ascii=False)
            except ValueError:
                parsed = None
            if artifact.meta.kind is ArtifactKind.QA_REPORT and isinstance(parsed, dict):
                text = qa_report_text(parsed) + text  # its failing checks first, as lines
        meta = artifact.meta
        title = (
            f"{meta.kind.value} · sha256:{artifact.sha256[:12]} · {artifact.size} B · "
            f"{meta.role or '-'} via {meta.adapter or '-'} {meta.cli_version or ''}"
        )
        self.query_one("#artifact-view").border_title = literal(title)
        text = printable(text, multiline=True)  # an agent wrote it: escaped before it is shown
        self.query_one("#artifact-text", Static).update(
            Syntax(text, lexer_for(artifact, text), word_wrap=True, theme="ansi_dark")
        )

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "runs-table" and event.row_key.value:
            self.query_one(LogPane).show_run(event.row_key.value, chosen=True)
            self.action_tab("log")

    # -- what the app calls ----------------------------------------------------------------

    @property
    def selected_task(self) -> str | None:
        return self.task_id

    def task_changed(self, task_id: str | None) -> None:
        if task_id is None or task_id == self.task_id or task_id in self.blockers:
            self.reload()

    def run_output(self, event: RunOutput) -> None:
        for pane in self.query(LogPane):
            pane.take(event)


def qa_report_text(report: dict[str, object]) -> str:
    """A QA report's failing checks as lines, above its JSON (where a check's output is one
    string full of `\\n`)."""
    raw = report.get("checks")
    try:
        checks = [CheckResult.model_validate(c) for c in raw] if isinstance(raw, list) else []
    except ValueError:  # pydantic's ValidationError: a report T25 did not write
        checks = []
    failing = failing_checks(checks)
    return (
        "\n".join(["// failing checks — the last lines of each", *failing, "", ""])
        if failing
        else ""
    )


def _figures(detail: Detail) -> str:
    """The last QA's checks whose runner T25 knows, beside the default branch's figures:
    `tests passed (41 passed, 3 skipped — 3 more skipped than on main)`; "" when none."""
    counted = [c for c in detail.checks if c.figures is not None]
    return "; ".join(f"{printable(c.name)} {c.outcome(detail.baseline)}" for c in counted)


def run_row(r: Run, now: datetime) -> tuple[str | Text, ...]:
    """A run as the runs table shows it."""
    took = ((r.finished_at or now) - r.started_at).total_seconds() if r.started_at else None
    return (
        r.id,
        r.stage.value,
        literal(r.role),
        r.status.value,
        literal(r.adapter or "-"),
        literal(r.cli_version or "-"),
        literal(r.model or r.usage.model or "-"),
        duration(took),
        "-" if r.exit_code is None else str(r.exit_code),
        f"{r.usage.input_tokens}/{r.usage.output_tokens}",
        f"${r.cost_usd:.4f}",
    )
