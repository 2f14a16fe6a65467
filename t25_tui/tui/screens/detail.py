"""A task's detail: history with times and actors, artifacts, runs, and the live log.

Artifacts are highlighted with Rich's Syntax (JSON, diffs, Markdown); the runs table
shows which adapter, CLI version and model played each run and what it cost. Selecting
a run shows its log; the log follows the newest run by default.
"""

from __future__ import annotations

from rich.syntax import Syntax
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label, OptionList, Static, TabbedContent, TabPane
from textual.widgets.option_list import Option

from core.domain.events import DecisionRecorded, TaskTransitioned
from core.domain.models import Artifact, ArtifactKind, Run
from core.domain.text import printable
from core.ports import Operations
from t25_tui.tui.cards import Clock, age, duration, human_needed, literal
from t25_tui.tui.widgets.logpane import LogPane

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


class TaskDetail(Screen):
    """Everything about one task, and its log. Escape returns to where it was opened."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "back", id="detail.back"),
        Binding("1", "tab('history')", "history", id="detail.history"),
        Binding("2", "tab('artifacts')", "artifacts", id="detail.artifacts"),
        Binding("3", "tab('runs')", "runs", id="detail.runs"),
        Binding("4,l", "tab('log')", "log", id="detail.log"),
        Binding("f", "log('toggle_follow')", "follow/pause", id="detail.follow"),
        Binding("slash", "log('search')", "search log", id="detail.search"),
        Binding("n", "log('next_match')", "next match", show=False, id="detail.next"),
    ]

    def __init__(
        self, control: Operations, task_id: str, clock: Clock, *, tab: str = "history"
    ) -> None:
        super().__init__()
        self.control = control
        self.task_id = task_id
        self.clock = clock
        self.first_tab = tab
        self.ready = False  # the first read of the store is on screen
        self.runs: list[Run] = []
        self.artifacts: list[Artifact] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="detail-head")
        with TabbedContent(initial=self.first_tab):
            with TabPane("History", id="history"):
                yield DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
            with TabPane("Artifacts", id="artifacts"), Horizontal():
                yield OptionList(id="artifact-list")
                with VerticalScroll(id="artifact-view"):
                    yield Static("select an artifact", id="artifact-text")
            with TabPane("Runs", id="runs"):
                yield DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
                yield Label("enter on a run shows its log", classes="hint")
            with TabPane("Log", id="log"):
                yield LogPane(self.control, self.task_id, None, id="log-pane")
        yield Footer()

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
        self.reload(first=True)

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        if tab == "log":
            self.query_one(LogPane).output.focus()

    def action_log(self, what: str) -> None:
        """The log's keys work from anywhere in the detail: they show the log first."""
        self.action_tab("log")
        getattr(self.query_one(LogPane), f"action_{what}")()

    @work(group="detail", exclusive=True, exit_on_error=False)
    async def reload(self, first: bool = False) -> None:
        detail = await self.control.detail(self.task_id)
        task, events = detail.task, detail.history
        self.runs = detail.runs
        self.artifacts = [a for a in detail.artifacts if a.meta.kind in SHOWN]
        now = self.clock()
        cost = detail.cost.total_usd
        need = human_needed(task)
        # Content's plain strings are never read as markup; printable escapes the rest.
        head = [
            (task.id, "bold"),
            (
                f"  {printable(task.title)}\n{task.state} for "
                f"{age(task.state_since, now)} · {task.type.value} · {printable(task.branch)}"
                f" · project {printable(task.project)} · loops qa {task.qa_loops} review "
                f"{task.review_loops} · ${cost:.4f}"
            ),
        ]
        if need:
            head += ["\n", (f"⚑ {need}", "bold yellow")]
        if task.error:
            head += ["\n", (f"error: {printable(task.error)}", "red")]
        self.query_one("#detail-head", Static).update(Content.assemble(*head))

        history = self.query_one("#history-table", DataTable)
        history.clear()
        for e in events:
            if isinstance(e, TaskTransitioned):
                history.add_row(
                    f"{e.at:%Y-%m-%d %H:%M:%S}",
                    f"{e.from_state} → {e.to_state}",
                    literal(e.actor),
                    literal(e.reason),
                )
            elif isinstance(e, DecisionRecorded):
                history.add_row(
                    f"{e.at:%Y-%m-%d %H:%M:%S}",
                    literal(f"decision: {e.decision}"),
                    literal(e.actor),
                    literal(e.reason),
                )

        runs = self.query_one("#runs-table", DataTable)
        runs.clear()
        for r in self.runs:
            took = ((r.finished_at or now) - r.started_at).total_seconds() if r.started_at else None
            runs.add_row(
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
                key=r.id,
            )

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
        self.ready = True
        pane = self.query_one(LogPane)
        if (
            self.runs
            and (first or pane.run_id is None or pane.following)
            and pane.run_id != self.runs[-1].id
        ):
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
                text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
            except ValueError:
                pass
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
            self.query_one(LogPane).show_run(event.row_key.value)
            self.action_tab("log")

    def refresh_task(self) -> None:
        """The bridge says this task changed: re-read it."""
        self.reload()
