"""The diff screen: opened from the task detail and from the merge question, a file or all
files, the whole change and an attempt's one key apart, and a long diff drawn a screen at a
time."""

from __future__ import annotations

import pytest

from core.domain.diffs import TaskDiff, files_of
from t25_tui.tui.screens.detail import TaskDetailScreen
from t25_tui.tui.screens.dialogs import MergeDialog
from t25_tui.tui.screens.diff import DiffScreen, DiffView
from tests.support.cockpit import app_for, landed, settle_board, until, until_async
from tests.support.sealed import passed_review, tip


async def _diff_of(app, pilot, task: str) -> DiffScreen:
    await settle_board(app, pilot)
    app.board.focus_task(task)
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen) and app.screen.ready)
    await pilot.press("d")
    await until(pilot, lambda: isinstance(app.screen, DiffScreen) and app.screen.ready)
    screen = app.screen
    assert isinstance(screen, DiffScreen)
    return screen


async def test_d_in_the_detail_opens_the_whole_change_and_v_one_attempts(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await _diff_of(app, pilot, "T-1")
        diff = screen.diff
        assert diff is not None and diff.attempt is None and diff.source == "git"
        assert [f.path for f in diff.files] == ["changes/T-1.md"]
        view = screen.query_one(DiffView)
        assert view.lines[0].startswith("diff --git a/changes/T-1.md")
        assert "the whole change" in str(screen.query_one("#diff-head").render())

        await pilot.press("v")  # the newest attempt: its run's reported diff here
        await until(pilot, lambda: screen.diff is not None and screen.diff.attempt == 1)
        assert screen.diff.run_id and "attempt 1 of 1" in str(
            screen.query_one("#diff-head").render()
        )
        await pilot.press("v")
        await until(pilot, lambda: screen.diff is not None and screen.diff.attempt is None)
        await pilot.press("left_square_bracket")  # from the whole change: the newest attempt
        await until(pilot, lambda: screen.diff is not None and screen.diff.attempt == 1)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen))
        await pilot.pause()


@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
async def test_the_merge_question_opens_the_diff_and_leaving_it_asks_again(seeded, size):
    control = seeded.control
    task = await control.task("T-1")
    await passed_review(control, task, await tip(control, task))
    app = app_for(seeded)
    async with app.run_test(size=size) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-1")
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, MergeDialog))
        question = app.screen
        assert "d the diff" in str(question.query_one(".dialog-keys").render())
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, DiffScreen) and app.screen.ready)
        screen = app.screen
        assert screen.task_id == "T-1" and screen.diff is not None
        assert [f.path for f in screen.diff.files] == ["changes/T-1.md"]
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is question)
        await pilot.press("y")
        await until_async(pilot, lambda: landed(control, "T-1"))


async def test_a_file_or_all_files_and_a_long_diff_scrolls(seeded):
    text = "".join(
        f"diff --git a/f{n}.py b/f{n}.py\n--- a/f{n}.py\n+++ b/f{n}.py\n@@ -1,2 +1,2 @@\n"
        f" keep\n-old {n}\n+new {n}\n"
        for n in range(700)
    )  # 4,900 lines
    big = TaskDiff(task_id="T-1", attempts=1, source="git", files=files_of(text), text=text)

    async def diff(ref, *, attempt=None, stat=False):
        return big

    seeded.control.diff = diff  # the read, replaced: what the screen draws is the point
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        app.push_screen(DiffScreen(seeded.control, "T-1", seeded.clock))
        await until(pilot, lambda: isinstance(app.screen, DiffScreen) and app.screen.ready)
        # How fast it opens is bench/tui.py's to measure (≤ 0.3 s on a quiet machine).
        screen = app.screen
        view = screen.query_one(DiffView)
        assert len(view.lines) == 4900 and view.virtual_size.height == 4900
        view.focus()
        await pilot.press("end")
        await until(pilot, lambda: view.scroll_offset.y > 4800)
        files = screen.query_one("#diff-files")
        files.focus()
        await pilot.press("down", "down")  # "all files", then f0, then f1
        await until(pilot, lambda: screen.chosen == "1")
        assert view.lines == text.splitlines()[7:14]
        await pilot.pause()


async def test_the_attached_cockpit_reads_the_diff_from_its_serve(seeded):
    from t25_tui.api.cockpit_client import attach
    from t25_tui.api.server import make_api
    from t25_tui.tui.app import make_app
    from tests.support.serving import serving

    local = await seeded.control.diff("T-1")
    api = make_api(seeded.control, worker_credential=None, operator_token="op-7")
    async with serving(api) as url, attach(url, "op-7") as remote:
        app = make_app(remote, clock=seeded.clock, actor="ana@remote", link=remote.link)
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _diff_of(app, pilot, "T-1")
            assert screen.diff == local
            assert screen.query_one(DiffView).lines == local.text.splitlines()
            await pilot.press("v")
            await until(pilot, lambda: screen.diff is not None and screen.diff.attempt == 1)
            await pilot.pause()


async def test_the_log_pane_shows_agent_events_as_readable_text(seeded):
    import json

    from core.domain.events import RunOutput
    from core.domain.models import RunStatus
    from t25_tui.tui.widgets.logpane import LogPane

    f = seeded.control
    run = [r for r in await f.store.list_runs(task_id="T-3") if r.status is RunStatus.RUNNING][-1]
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
        call = {
            "type": "assistant",
            "message": {
                "content": [{"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}]
            },
        }
        line = json.dumps(call) + "\n"
        for part in (line[:20], line[20:]):  # one event, split across two batches
            await f.record(RunOutput(task_id="T-3", run_id=run.id, stream="stdout", text=part))
        await until(pilot, lambda: "→ Bash(command='ls')" in pane.output.lines)
        assert not any(line.startswith('{"type"') for line in pane.output.lines)
