"""Pilot tests: the board reads what it draws, not the history. It reads the tasks not
finished — a DONE task filed long ago and still waiting for its merge included — and the
newest hundred finished of each finished state; the older finished ones are counted in their
lane, not read; a filter searches every task, the oldest too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.control import task_lists
from core.domain.events import TaskTransitioned
from core.domain.models import NewTask, TaskState
from t25_tui.api.cockpit_client import attach
from t25_tui.api.server import make_api
from t25_tui.tui.cards import CARDS_PER_COLUMN, board_tasks
from t25_tui.tui.sample_data import walk
from t25_tui.tui.widgets.board import Column
from tests.support.cockpit import TOKEN, app_for, settle_board, until
from tests.support.screen_text import screen_text
from tests.support.serving import serving

S = TaskState
HISTORY = CARDS_PER_COLUMN + 30  # merged tasks: thirty more than a lane draws


async def merged_history(control, count: int) -> list[str]:
    """`count` tasks filed and recorded DONE and merged, through the store (as a long
    history left them); their ids, oldest first."""
    project = control.config.projects[0].name
    ids = []
    for n in range(count):
        task, _ = await control.store.create_task(
            NewTask(project=project, title=f"Old change {n:03}"), actor="t25"
        )
        done = TaskTransitioned(
            task_id=task.id, from_state=S.RECEIVED, to_state=S.DONE, actor="t25"
        )
        await control.store.apply_transition(task.id, S.RECEIVED, done, {"merged": True})
        ids.append(task.id)
    return ids


async def test_the_board_reads_the_unfinished_tasks_and_the_newest_finished(seeded):
    f = seeded.control
    waiting = await walk(f, await f.new_task("Merge me at last", actor="ana@ops"), S.DONE)
    history = await merged_history(f, HISTORY)
    merged = sum(1 for t in await f.tasks() if t.state is S.DONE and t.merged)
    app = app_for(seeded)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle_board(app, pilot)
        read = {c.task.id for c in app.cards}
        assert waiting.id in read  # filed before the whole history, and not finished
        assert set(history[-CARDS_PER_COLUMN:]) <= read
        assert not read & set(history[: HISTORY - CARDS_PER_COLUMN])  # counted, never read
        assert app.unread == {S.DONE: merged - CARDS_PER_COLUMN}
        done_lane = app.board.query_one("#col-DONE", Column)
        lane_total = sum(1 for c in app.cards if c.task.state in (S.DONE, S.CANCELLED))
        await until(pilot, lambda: waiting.id in app.board.shown_ids())
        text = screen_text(app)
        assert f"DONE {lane_total + sum(app.unread.values())}" in text
        assert done_lane.shown[0][0] == waiting.id  # ready to merge: first in its lane


async def test_a_filter_finds_a_finished_task_the_board_did_not_read(seeded):
    history = await merged_history(seeded.control, HISTORY)
    oldest = history[0]
    app = app_for(seeded)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle_board(app, pilot)
        assert oldest not in {c.task.id for c in app.cards}
        app.set_filter("Old change 000")
        await until(pilot, lambda: app.board.shown_ids() == {oldest})
        app.set_filter("")
        await until(pilot, lambda: oldest not in {c.task.id for c in app.cards})


async def test_a_cockpit_attached_to_serve_reads_the_same_tasks_counts_and_costs(seeded):
    """Every read the board and the cost pane make, once on the control plane and once over
    REST."""
    local = seeded.control
    waiting = await walk(local, await local.new_task("Merge me at last", actor="ana@ops"), S.DONE)
    await merged_history(local, 12)
    api = make_api(local, worker_credential=None, operator_token=TOKEN)
    async with serving(api) as url, attach(url, TOKEN) as remote:
        for ops in (local, remote):
            assert waiting.id in [t.id for t in await task_lists.unfinished(ops)]
        for read in (
            lambda ops: task_lists.unfinished(ops),
            lambda ops: task_lists.unfinished(ops, after="T-3", limit=2),
            lambda ops: task_lists.newest_finished(ops, 5),
            lambda ops: task_lists.finished_counts(ops),
            lambda ops: ops.tasks(states=[], limit=3),
            lambda ops: ops.tasks(newest_first=True, limit=4, after="T-12"),
        ):
            assert await read(remote) == await read(local)
        tasks, _ = await board_tasks(local, everything=False)
        named = [t.id for t in tasks]
        assert await remote.cost_by_task(named) == await local.cost_by_task(named)
        assert await remote.cost_by_task([]) == {}
        assert await remote.tokens_by_task(named) == await local.tokens_by_task(named)
        assert await remote.tokens_by_task([]) == {} and await local.tokens_by_task(named)
        hour_ago, later = datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC) + timedelta(1)
        for cost in (
            lambda ops: ops.cost(),
            lambda ops: ops.cost(since=hour_ago),
            lambda ops: ops.cost(since=later),
            lambda ops: ops.costliest_tasks(),
            lambda ops: ops.costliest_tasks(2),
        ):
            assert await cost(remote) == await cost(local)
        assert (await remote.cost()).runs > 0 and (await remote.cost(since=later)).runs == 0
