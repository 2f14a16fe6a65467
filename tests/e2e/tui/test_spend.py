"""Pilot tests: a card whose task has spent its budget is marked, and the task's detail
shows its spend against its budget, tokens beside dollars."""

from __future__ import annotations

from textual.widgets import DataTable

from t25_tui.tui.screens.detail import TaskDetailScreen
from t25_tui.tui.screens.panes import CostPane
from t25_tui.tui.widgets.board import OVER_BUDGET
from tests.support.cockpit import app_for, settle_board, until
from tests.support.screen_text import screen_text


def with_limits(seeded, **limits) -> None:
    config = seeded.control.config
    seeded.control.config = config.model_copy(
        update={"limits": config.limits.model_copy(update=limits)}
    )


def marked(app) -> set[str]:
    return {c.id for c in app.cards if c.over_budget}


async def test_cards_over_a_dollar_budget_are_marked_and_settled_ones_are_not(seeded):
    with_limits(seeded, max_cost_usd=0.05)  # T-2 spent $0.05, T-8 $0.06, T-1 (DONE) $0.10
    app = app_for(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        assert {"T-2", "T-8"} <= marked(app) and "T-1" not in marked(app)
        assert "T-7" not in marked(app)  # nothing spent
        await until(pilot, lambda: f"{OVER_BUDGET}T-2 feat" in screen_text(app))


async def test_a_token_budget_marks_cards_too(seeded):
    with_limits(seeded, max_tokens=1)
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert "T-8" in marked(app)


async def test_the_detail_shows_spend_against_the_budget(seeded):
    with_limits(seeded, max_cost_usd=0.05, max_tokens=1_000_000)
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        app.board.focus_task("T-8")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen) and app.screen.ready)
        spend = (await seeded.control.detail("T-8")).spend
        text = screen_text(app)
        assert spend.line() in text and "of 1,000,000 tokens" in text
        assert "budget reached" in text


async def test_the_cost_pane_shows_each_stages_tokens_beside_its_dollars(seeded):
    runs = await seeded.control.runs()
    implementing = [r for r in runs if r.stage.value == "IMPLEMENTING"]
    app = app_for(seeded)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle_board(app, pilot)
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, CostPane) and app.screen.ready)
        table = app.screen.query_one("#cost-stages", DataTable)
        rows = {str(table.get_row_at(n)[0]): table.get_row_at(n) for n in range(table.row_count)}
        assert [str(c) for c in rows["IMPLEMENTING"]] == [
            "IMPLEMENTING",
            str(len(implementing)),
            f"{sum(len(r.requests) for r in implementing):,}",
            f"{sum(r.usage.input_tokens for r in implementing):,}",
            "0",
            f"{sum(r.usage.output_tokens for r in implementing):,}",
            f"${sum(r.cost_usd for r in implementing):.4f}",
        ]


async def test_token_budgets_are_checked_from_one_read_of_the_tasks_tokens(seeded):
    """However many cards have a token budget, a board read asks for their tokens once, for
    all of them (never a request per card, attached to a serve), and reads no run (a read of
    every run grew with the whole history)."""
    with_limits(seeded, max_tokens=1)
    control = seeded.control
    asked: list[list[str]] = []
    tokens_by_task = control.tokens_by_task

    async def counted(tasks):
        asked.append(list(tasks))
        return await tokens_by_task(tasks)

    async def no_run_read(**_kw):
        raise AssertionError("the board read runs")

    control.tokens_by_task = counted
    control.runs = no_run_read
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert {"T-2", "T-3", "T-8"} <= marked(app)
        assert asked and all({"T-2", "T-3", "T-8"} <= set(named) for named in asked)
