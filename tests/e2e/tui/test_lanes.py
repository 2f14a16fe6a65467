"""Pilot tests: from 100 columns the board's six lanes fit the terminal, every task that
needs the operator is on screen, the arrows and h/l move the selection between lanes, and
the selection stays on screen when the terminal changes size."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from core.domain.models import Task, TaskState, TaskType
from t25_tui.tui.cards import BoardFilter, Card, human_needed
from t25_tui.tui.lanes import LANE_OF, LANES, by_lane, chip_of
from t25_tui.tui.sample_data import walk
from t25_tui.tui.widgets.board import Column
from tests.support.cockpit import app_for, settle_board, until
from tests.support.screen_text import screen_text

S = TaskState


async def more_work_for_the_operator(seeded) -> None:
    """Four more tasks that need the operator, eight in all: two ready to merge, a question,
    a failure."""
    f = seeded.control
    for title in ("Paginate the orders", "Trim the logs"):
        await walk(f, await f.new_task(title, actor="ana@ops"), S.DONE)
    asking = await walk(f, await f.new_task("Name the queue", actor="ana@ops"), S.SPEC)
    await f.transition(asking, S.NEEDS_INPUT, actor="t25", reason="which queue?")
    failing = await walk(f, await f.new_task("Bump the parser", actor="ana@ops"), S.SPEC)
    await f.transition(failing, S.FAILED, actor="t25", reason="SPEC run failed", error="exit 1")


def on_screen(app, task_id: str) -> bool:
    """Whether the task's id is drawn on the screen as it is now (not merely laid out)."""
    return re.search(rf"(?<![\w-]){re.escape(task_id)}(?!\d)", screen_text(app)) is not None


@pytest.mark.parametrize("width", [100, 160, 240])
async def test_every_task_that_needs_you_is_on_screen_and_the_arrows_cross_lanes(seeded, width):
    await more_work_for_the_operator(seeded)
    needing = [t.id for t in await seeded.control.tasks() if human_needed(t)]
    assert len(needing) == 8
    app = app_for(seeded)
    async with app.run_test(size=(width, 36)) as pilot:
        await settle_board(app, pilot)
        board = app.board
        await until(pilot, lambda: board.shown_ids() >= set(needing))
        assert not board.compact
        for lane in LANES:  # every lane within the screen: nothing off to the side
            region = board.query_one(f"#col-{lane.key}", Column).region
            assert app.screen.region.contains_region(region), (lane.key, region)
        await until(pilot, lambda: all(on_screen(app, tid) for tid in needing))

        # Right from the first lane visits a card in each lane that has one, then wraps.
        lanes_with_cards = [lane for lane, cards in by_lane(app.cards).items() if cards]
        first = board.selected()
        assert first is not None
        visited = [first]
        for key in ("right",) * (len(lanes_with_cards) - 1) + ("l",):
            await pilot.press(key)
            selected = board.selected()
            assert selected is not None and selected != visited[-1]
            visited.append(selected)
        assert visited[-1] == first  # round the board, back where it began
        states = [next(c.task.state for c in app.cards if c.id == t) for t in visited[:-1]]
        assert [LANE_OF[s] for s in states] == lanes_with_cards
        await pilot.press("left", "h")
        assert board.selected() == visited[-3]

        # Select a task that needs the operator; it stays selected and on screen at any size.
        board.focus_task("T-5")
        for size in ((width + 40, 30), (100, 20), (width, 36)):
            await pilot.resize_terminal(*size)
            await until(pilot, lambda size=size: app.size == size and not board.compact)
            assert board.selected() == "T-5"
            await until(pilot, lambda: on_screen(app, "T-5"))


async def test_an_empty_lane_shrinks_to_its_header(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(160, 36)) as pilot:
        await settle_board(app, pilot)
        app.filter = BoardFilter.parse("Rotate")  # T-2 alone, awaiting approval
        app.show_cards()
        approve = app.board.column(S.AWAITING_APPROVAL)
        await until(pilot, lambda: [i for i, _ in approve.shown] == ["T-2"])
        await until(pilot, lambda: approve.size.width > 60)  # the room the others left
        for lane in LANES:
            if lane is not LANE_OF[S.AWAITING_APPROVAL]:
                assert app.board.query_one(f"#col-{lane.key}", Column).size.width <= 16


def test_each_state_has_one_lane_and_those_that_need_you_come_first():
    assert sorted(LANE_OF) == sorted(TaskState) and sum(len(x.states) for x in LANES) == 13
    needing = {s for lane in LANES if lane.needs_you for s in lane.states}
    assert {S.AWAITING_APPROVAL, S.NEEDS_INPUT, S.FAILED, S.DONE} <= needing
    base = datetime(2026, 1, 1, tzinfo=UTC)

    def card(tid: str, state: TaskState, minutes: int, *, merged: bool = False) -> Card:
        task = Task(
            id=tid,
            project="shop",
            title=tid,
            type=TaskType.FEAT,
            state=state,
            created_at=base,
            state_since=base + timedelta(minutes=minutes),
            merged=merged,
        )
        return Card(task, 0.0, human_needed(task))

    done = by_lane(
        [
            card("T-1", S.DONE, 1, merged=True),
            card("T-2", S.DONE, 0),
            card("T-3", S.CANCELLED, 2),
            card("T-4", S.DONE, 3, merged=True),
        ]
    )[LANE_OF[S.DONE]]
    assert [c.id for c in done] == ["T-2", "T-4", "T-3", "T-1"]  # to merge first, then newest
    assert [chip_of(c) for c in done] == ["done", "merged", "cancelled", "merged"]
