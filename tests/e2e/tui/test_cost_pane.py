"""Pilot test: the cost pane shows what every run cost, today and in total, and the costliest
tasks, from sums the store makes; it reads no run."""

from __future__ import annotations

from datetime import timedelta

from textual.widgets import DataTable, Static

from core.control.cost import summarize
from t25_tui.tui.app import make_app
from t25_tui.tui.sample_data import Seeded
from t25_tui.tui.screens.panes import CostPane
from tests.support.cockpit import settle_board, until


async def cost_pane(seeded: Seeded, *, days_later: int) -> tuple[str, list[str]]:
    """The pane's summary line and the first three of its costliest tasks, in a cockpit
    whose clock reads `days_later` days after the sample's."""
    app = make_app(
        seeded.control, clock=lambda: seeded.now + timedelta(days=days_later), actor="ana@ops"
    )
    async with app.run_test(size=(160, 60)) as pilot:
        await settle_board(app, pilot)
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, CostPane) and app.screen.ready)
        summary = str(app.screen.query_one("#cost-summary", Static).render())
        tasks = app.screen.query_one("#cost-tasks", DataTable)
        return summary, [str(tasks.get_row_at(n)[0]) for n in range(min(3, tasks.row_count))]


async def test_the_cost_pane_shows_the_stores_sums_and_reads_no_run(seeded, monkeypatch):
    runs = await seeded.control.store.list_runs()
    total = summarize(runs)
    assert total.runs > 0 and all((r.finished_at or r.enqueued_at) <= seeded.now for r in runs)
    ranked: dict[str, float] = {}
    for run in runs:
        ranked[run.task_id] = ranked.get(run.task_id, 0.0) + run.cost_usd
    costliest = sorted(ranked, key=lambda task: -ranked[task])[:3]

    async def no_run_read(**_kw):
        raise AssertionError("the cost pane read runs")

    monkeypatch.setattr(seeded.control.store, "list_runs", no_run_read)
    for days_later, spent_today in ((0, total.total_usd), (1, 0.0)):
        summary, shown = await cost_pane(seeded, days_later=days_later)
        assert f"today ${spent_today:.4f} · total ${total.total_usd:.4f}" in summary
        assert f"over {total.runs} runs" in summary
        assert shown == costliest
