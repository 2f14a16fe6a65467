"""Pilot tests: the board filters and moves live; a log follows a streaming run, and shows
where its stream was truncated."""

from __future__ import annotations

from core.domain.events import RunOutput
from core.domain.models import RunStatus, TaskState
from core.domain.network import NETWORK_STREAM, Connection
from core.domain.output import truncation_marker
from core.worker.output import OutputBudget, OutputStream
from t25_tui.tui.screens.detail import TaskDetailScreen
from t25_tui.tui.widgets.logpane import LogPane
from tests.support.cockpit import app_for, settle_board, until


def last_line(pane) -> str:
    lines = [line for line in pane.output.lines if line]
    return lines[-1] if lines else ""


def visible_ids(app) -> set[str]:
    return app.board.shown_ids()


async def test_filter_the_board(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        assert {"T-1", "T-3", "T-9"} <= visible_ids(app)
        await pilot.press("slash", *"type:fix", "enter")
        await until(pilot, lambda: visible_ids(app) == {"T-3", "T-9"})
        await pilot.press("slash")
        app.query_one("#filter").value = ""
        await pilot.press(*"greeting", "enter")
        await until(pilot, lambda: visible_ids(app) == {"T-1"})
        await pilot.press("escape")
        await until(pilot, lambda: "T-9" in visible_ids(app))


async def test_cards_move_live_and_escapes_are_visible(seeded):
    f = seeded.control
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        for state, tid in ((TaskState.NEEDS_INPUT, "T-4"), (TaskState.FAILED, "T-5")):
            assert app.board.column(state).cards.get_option_at_index(0).id == tid
        # DONE's lane: the task ready to merge first, then the cancelled one
        assert [i for i, _ in app.board.column(TaskState.CANCELLED).shown] == ["T-1", "T-6"]
        task = await f.task("T-9")
        await f.transition(task, TaskState.SPEC, actor="t25", reason="picked up")
        spec = app.board.column(TaskState.SPEC).cards
        await until(
            pilot,
            lambda: "T-9" in {spec.get_option_at_index(i).id for i in range(spec.option_count)},
        )


async def test_follow_a_live_log(seeded):
    f = seeded.control
    running = [r for r in await f.store.list_runs(task_id="T-3") if r.status is RunStatus.RUNNING]
    run = running[-1]
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-3")
        await pilot.press("w")  # the log (l moves between lanes on the board)
        await until(
            pilot,
            lambda: (
                isinstance(app.screen, TaskDetailScreen) and app.screen.query_one(LogPane).replayed
            ),
        )
        pane = app.screen.query_one(LogPane)
        assert pane.run_id == run.id
        await until(pilot, lambda: any("hunk 8" in line for line in pane.output.lines))
        for i in range(200):  # the agent keeps streaming
            await f.record(
                RunOutput(
                    task_id="T-3", run_id=run.id, stream="stdout", text=f"reviewer: finding {i}\n"
                )
            )
        await until(pilot, lambda: last_line(pane) == "reviewer: finding 199")
        assert pane.following and pane.output.is_vertical_scroll_end
        await pilot.press("f")  # pause following
        assert not pane.following
        await f.record(RunOutput(task_id="T-3", run_id=run.id, stream="stdout", text="later\n"))
        await until(pilot, lambda: last_line(pane) == "later")
        await pilot.press("slash", *"finding 42", "enter")
        await until(pilot, lambda: "line" in str(pane.query_one(".log-status").render()))
        await pilot.press("f")
        assert pane.following
        assert sum(1 for line in pane.output.lines if line.startswith("reviewer: finding")) == 200


async def test_a_truncated_stream_shows_its_marker_line_as_it_arrives(seeded):
    f = seeded.control
    running = [r for r in await f.store.list_runs(task_id="T-3") if r.status is RunStatus.RUNNING]
    run = running[-1]
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-3")
        await pilot.press("w")  # the log (l moves between lanes on the board)
        await until(
            pilot,
            lambda: (
                isinstance(app.screen, TaskDetailScreen) and app.screen.query_one(LogPane).replayed
            ),
        )
        pane = app.screen.query_one(LogPane)
        # the worker's own stream, its budget 1,000 bytes: the agent prints 3,000 without end
        budget = OutputBudget(1000, 4096)
        async with OutputStream(f.record, "T-3", run.id, budget) as stream:
            for _ in range(30):
                await stream.write("stdout", "y" * 99 + "\n")
        marker = truncation_marker(1000, 4096).strip()
        await until(pilot, lambda: last_line(pane) == marker)
        assert marker == (
            "[t25: output truncated after 1000 bytes; the log artifact keeps the first 4096 bytes]"
        )
        streamed = [line for line in pane.output.lines if line and set(line) == {"y"}]
        assert len(streamed) == 10 and sum(map(len, streamed)) == 990  # and their newlines


async def test_a_card_is_two_lines_whatever_its_title(seeded):
    """A title wider than its lane is cut with an ellipsis; the card stays two lines."""
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        cards = app.board.column(TaskState.AWAITING_APPROVAL).cards  # T-2 alone
        assert cards.option_count == 1 and cards.virtual_size.height == 2
        assert str(cards.get_option("T-2").prompt).endswith("Rotate the session signing key")
        await until(
            pilot,
            lambda: any(
                line.startswith("Rotate the") and line.rstrip().endswith("…")
                for line in _lines_of(cards).splitlines()
            ),
        )


def _lines_of(widget) -> str:
    return "\n".join(strip.text for strip in widget.render_lines(widget.region.reset_offset))


async def test_a_refused_connection_shows_in_the_log_and_atop_the_detail(seeded):
    f = seeded.control
    running = [r for r in await f.store.list_runs(task_id="T-3") if r.status is RunStatus.RUNNING]
    run = running[-1]
    denied = Connection("127.0.0.1", 5432, False, "not on the allowlist", "connect")
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-3")
        await pilot.press("w")  # the log (l moves between lanes on the board)
        await until(
            pilot,
            lambda: (
                isinstance(app.screen, TaskDetailScreen) and app.screen.query_one(LogPane).replayed
            ),
        )
        pane = app.screen.query_one(LogPane)
        # as the worker's stream records it, beside the agent's output
        async with OutputStream(f.record, "T-3", run.id, OutputBudget(10**6, 10**6)) as stream:
            await stream.write(NETWORK_STREAM, denied.to_text())
        line = "✗ network: denied 127.0.0.1:5432 (not on the allowlist)"
        await until(pilot, lambda: last_line(pane) == line)
        app.screen.reload()
        head = app.screen.query_one("#detail-network")
        await until(pilot, lambda: head.display and "denied" in str(head.render()))
        assert f"{run.id} denied   127.0.0.1:5432 (not on the allowlist)" in str(head.render())
