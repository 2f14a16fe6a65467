"""Read-only panes: cost, audit, agent profiles and policies.

Each reads the store (or the audit file, off the UI loop) when shown and on `r`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime, time

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static
from textual.worker import Worker

from core.config.config_section import ROLES
from core.config.schema import Config
from core.domain.audit import AuditEntry, Verdict
from core.domain.cost import COSTLIEST, CostSummary, TaskCost
from core.ports import AgentAdapter, Operations
from t25_tui.tui.cards import Clock, literal
from t25_tui.tui.commands import Node, bindings
from t25_tui.tui.readiness import binary_of
from t25_tui.tui.screens.base import T25Screen
from t25_tui.tui.widgets.footer import KeysFooter
from t25_tui.tui.widgets.table import MeasuredTable

BAR = 12


def bars(title: str, values: Mapping[str, float], *, money: bool = True) -> Table:
    """A horizontal bar chart: reads better than a column of figures when shares matter."""
    table = Table(
        title=title, title_justify="left", show_header=False, box=None, expand=False, padding=(0, 1)
    )
    top = max(values.values(), default=0.0) or 1.0
    for name, value in values.items():
        filled = round(BAR * value / top)
        table.add_row(
            literal(name),
            Text("█" * filled + "·" * (BAR - filled), style="cyan"),
            f"${value:.4f}" if money else str(value),
        )
    if not values:
        table.add_row("(no runs yet)", "", "")
    return table


class _Pane(T25Screen):
    """A read-only pane: read when shown and on reload."""

    BINDINGS = bindings(Node.PANES)

    def reload(self) -> Worker[None]:
        """Read what the pane shows, and show it (a worker in each pane)."""
        raise NotImplementedError

    def action_reload(self) -> None:
        self.reload()


class CostPane(_Pane):
    """Estimated spend per task, role, adapter and model, today and in total, with the rates;
    and the tokens of each stage beside its dollars."""

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("", id="cost-summary", classes="pane-title")
            yield Static("", id="cost-chart")
            yield MeasuredTable(id="cost-stages", zebra_stripes=True)
            yield MeasuredTable(id="cost-groups", zebra_stripes=True)
            yield MeasuredTable(id="cost-tasks", zebra_stripes=True)
            yield Static("", id="cost-rates")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#cost-stages", DataTable).add_columns(
            "stage", "runs", "requests", "input", "cached input", "output", "cost"
        )
        self.query_one("#cost-groups", DataTable).add_columns("by", "name", "today", "total")
        self.query_one("#cost-tasks", DataTable).add_columns("task", "runs", "tokens", "cost")
        self.reload()

    @work(group="pane", exclusive=True, exit_on_error=False)
    async def reload(self) -> None:
        now = self.clock()
        midnight = datetime.combine(now.date(), time(), tzinfo=now.tzinfo)
        total = await self.control.cost()
        day = await self.control.cost(since=midnight)
        self._show_summary(total, day)
        self._show_stages(total)
        self._show_groups(total, day)
        self._show_tasks(await self.control.costliest_tasks(COSTLIEST))
        self.query_one("#cost-rates", Static).update(
            literal("\n".join(rate_lines(self.control.config)), multiline=True)
        )
        self.ready = True

    def _show_summary(self, total: CostSummary, day: CostSummary) -> None:
        tokens = total.usage.input_tokens + total.usage.output_tokens
        self.query_one("#cost-summary", Static).update(
            f"Cost (estimate): today ${day.total_usd:.4f} · total ${total.total_usd:.4f} "
            f"over {total.runs} runs, {tokens:,} tokens"
        )
        chart = Table.grid(padding=(0, 4))
        chart.add_row(bars("by role", total.by_role), bars("by model", total.by_model))
        self.query_one("#cost-chart", Static).update(chart)

    def _show_stages(self, total: CostSummary) -> None:
        """Tokens per stage: input not read from a cache, input read from one, output."""
        stages = self.query_one("#cost-stages", DataTable)
        stages.clear()
        for stage, s in total.by_stage.items():
            stages.add_row(
                stage,
                str(s.runs),
                f"{s.requests:,}",
                f"{s.input_tokens:,}",
                f"{s.cached_input_tokens:,}",
                f"{s.output_tokens:,}",
                f"${s.usd:.4f}",
            )

    def _show_groups(self, total: CostSummary, day: CostSummary) -> None:
        groups = self.query_one("#cost-groups", DataTable)
        groups.clear()
        for label, of_total, of_day in (
            ("role", total.by_role, day.by_role),
            ("adapter", total.by_adapter, day.by_adapter),
            ("model", total.by_model, day.by_model),
        ):
            for name, usd in of_total.items():
                groups.add_row(label, literal(name), f"${of_day.get(name, 0.0):.4f}", f"${usd:.4f}")

    def _show_tasks(self, costliest: list[TaskCost]) -> None:
        tasks = self.query_one("#cost-tasks", DataTable)
        tasks.clear()
        for task in costliest:
            tasks.add_row(task.task_id, str(task.runs), f"{task.tokens:,}", f"${task.usd:.4f}")


def rate_lines(config: Config) -> list[str]:
    """The cost rates in use, one model a line."""
    lines = ["Rates in use (USD per million tokens: input / output / cache read / cache write):"]
    lines += [
        f"  {model}: {r.input} / {r.output} / {r.cache_read} / {r.cache_write}"
        for model, r in config.cost.rates.items()
    ] or ["  none configured: every run costs $0"]
    return lines


class AuditPane(_Pane):
    """Every operator decision — actor, time, decision, reason — and whether the chain
    verifies: the newest `page` lines first, older ones read as the cursor reaches the last."""

    page = 500  # lines read at a time: the pane's cost follows what it shows, not the log
    oldest = 0  # the oldest line shown; the lines before it are read on the way down

    def compose(self) -> ComposeResult:
        yield Static("verifying…", id="audit-status", classes="pane-title")
        yield MeasuredTable(id="audit-table", cursor_type="row", zebra_stripes=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("#", "time", "actor", "task", "decision", "reason")
        self.reload()

    @work(group="pane", exclusive=True, exit_on_error=False)
    async def reload(self) -> None:
        verdict = (await self.control.audit_trail(limit=0)).verdict
        head = verdict.head.seq if verdict.ok and verdict.head else None
        if head is None:  # a chain that does not verify is read whole, to show where
            entries = (await self.control.audit_trail()).entries
        else:
            after = max(0, head - self.page)
            entries = (await self.control.audit_trail(after=after, limit=self.page)).entries
        self.oldest = entries[0].seq if entries else 0
        table = self.query_one(DataTable)
        table.clear()
        self._add(entries)
        self._say(verdict)
        self.ready = True

    def _say(self, verdict: Verdict) -> None:
        status = self.query_one("#audit-status", Static)
        if not verdict.ok:
            status.update(
                literal(
                    f"✗ chain broken at line {verdict.bad_line}: {verdict.message}",
                    style="bold red",
                )
            )
            return
        said = f"✓ chain verified: {verdict.lines} lines — {verdict.message}"
        if self.oldest > 1:
            said += f" · lines {self.oldest}–{verdict.lines} shown, older ones below as you go"
        status.update(literal(said, style="bold green"))

    def _add(self, entries: list[AuditEntry]) -> None:
        """Rows below those shown, newest first."""
        table = self.query_one(DataTable)
        for e in reversed(entries):
            table.add_row(
                str(e.seq),
                f"{e.ts:%Y-%m-%d %H:%M:%S}",
                literal(e.actor),
                literal(e.task or "-"),
                literal(e.decision),
                literal(e.reason),
            )

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.oldest > 1 and event.cursor_row == event.data_table.row_count - 1:
            self.older()

    @work(group="older", exclusive=True, exit_on_error=False)
    async def older(self) -> None:
        """The page of lines before the oldest shown, below it."""
        oldest = self.oldest
        after = max(0, oldest - 1 - self.page)
        trail = await self.control.audit_trail(after=after, limit=oldest - 1 - after)
        if self.oldest != oldest:  # reloaded meanwhile
            return
        entries = [e for e in trail.entries if e.seq < oldest]
        self.oldest = entries[0].seq if entries else 1
        self._add(entries)
        self._say(trail.verdict)


class ProfilesPane(_Pane):
    """Per project: each role's adapter chain with the binary found (or not), and the policies."""

    def __init__(
        self, control: Operations, clock: Clock, adapters: Mapping[str, AgentAdapter]
    ) -> None:
        super().__init__(control, clock)
        self.adapters = adapters

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("", id="profiles-projects", classes="pane-title")
            yield MeasuredTable(id="profiles-table", zebra_stripes=True)
            yield Static("", id="profiles-policy")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("role", "#", "adapter", "model", "binary", "version")
        self.reload()

    @work(group="pane", exclusive=True, exit_on_error=False)
    async def reload(self) -> None:
        config = self.control.config
        projects = [
            f"project {p.name}: {p.repo} (default branch {p.default_branch or 'from git'})"
            for p in config.projects
        ]
        self.query_one("#profiles-projects", Static).update(
            literal(
                "\n".join(projects) + "\nroles apply to every project; first usable adapter plays",
                multiline=True,
            )
        )
        table = self.query_one(DataTable)
        table.clear()
        for role in ROLES:
            for row in await self._chain_rows(config, role):
                table.add_row(*row)
        self.query_one("#profiles-policy", Static).update(
            literal("\n".join(policy_lines(config)), multiline=True)
        )
        self.ready = True

    async def _chain_rows(self, config: Config, role: str) -> list[tuple[str | Text, ...]]:
        """A role's fallback chain: each profile, and the binary it would run (or not)."""
        chain = config.roles.chain(role)
        if not chain:
            return [(role, "-", "(not configured)", "", "", "")]
        rows: list[tuple[str | Text, ...]] = []
        for i, profile in enumerate(chain, 1):
            found, version = await self._binary(profile.adapter)
            rows.append(
                (
                    role if i == 1 else "",
                    str(i),
                    literal(profile.adapter),
                    literal(profile.model or "(default)"),
                    literal(found),
                    literal(version),
                )
            )
        return rows

    async def _binary(self, name: str) -> tuple[str, str]:
        """Where adapter `name`'s CLI is on this host, and its version."""
        adapter = self.adapters.get(name)
        if not self.adapters:  # attached to a remote control plane
            return "(on the worker hosts)", "-"
        if adapter is None:
            return f"no adapter {name!r}", "-"
        path = await asyncio.to_thread(adapter.locate)
        if not path:
            return f"not found ({binary_of(adapter)})", "-"
        return path, await adapter.version() or "?"


def policy_lines(config: Config) -> list[str]:
    """The policies in force, as t25.yaml names them."""
    lim, appr = config.limits, config.approval
    checks = ", ".join(f"{c.name}{'' if c.required else ' (optional)'}" for c in config.qa.checks)
    return [
        "Policies in force:",
        f"  limits.max_files_changed {lim.max_files_changed} · max_diff_lines {lim.max_diff_lines}",
        f"  limits.max_qa_loops {lim.max_qa_loops} · max_review_loops {lim.max_review_loops}",
        "  limits.max_new_dependencies "
        + ("(no budget)" if lim.max_new_dependencies is None else f"{lim.max_new_dependencies}"),
        f"  limits.run_timeout_s {lim.run_timeout_s} · workers {lim.workers}",
        f"  approval.require_for_risk {', '.join(appr.require_for_risk) or '(none)'}",
        f"  qa.checks {checks or '(none)'}",
        f"  policies.protected_paths {len(config.policies.protected)} patterns "
        f"({', '.join(config.policies.protected[:4])}, …)"
        if len(config.policies.protected) > 4
        else f"  policies.protected_paths {', '.join(config.policies.protected) or '(none)'}",
        f"  policies.reviewer_differs_from_author {config.policies.reviewer_differs_from_author}",
        "  merge: a human, after the required checks pass and review approves,",
        "         naming each protected path the change touches",
        *(
            line
            for project in config.projects
            if (own := project.overrides())
            for line in (
                f"Project {project.name}, in place of the above:",
                *(f"  {o}" for o in own),
            )
        ),
    ]
