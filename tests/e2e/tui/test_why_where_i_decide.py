"""Where the operator decides, the cockpit shows why: a failing check's last lines as text
in the question dialog and the detail, and the error in the retry question."""

from __future__ import annotations

import json

from core.domain.models import ArtifactKind, ArtifactMeta, CheckResult
from t25_tui.tui.screens.detail import TaskDetailScreen
from t25_tui.tui.screens.dialogs import AnswerDialog, ConfirmDialog
from tests.support.cockpit import app_for, settle_board, until, until_async
from tests.support.screen_text import screen_text

OUTPUT = (
    "collected 3 items\n\ntests/test_pay.py ..F\n"
    "E       assert total(cart) == 30\n"
    "FAILED tests/test_pay.py::test_total - assert 29 == 30\n"
)


async def failing_qa(f, ref: str) -> None:
    """`ref`'s last QA: pytest failed with OUTPUT."""
    check = CheckResult(name="pytest", passed=False, exit_code=1, excerpt=OUTPUT)
    report = {
        "checks": [check.model_dump(mode="json")],
        "passed": False,
        "summary": "",
        "concerns": [],
    }
    meta = ArtifactMeta(kind=ArtifactKind.QA_REPORT, media_type="application/json", task_id=ref)
    await f.store.put_artifact(json.dumps(report).encode(), meta)
    await f.update(await f.task(ref), actor="t25", checks_passed=False)


def _text(widget) -> str:
    return str(widget.render())


async def test_the_question_dialog_and_the_detail_show_the_failing_checks_as_lines(seeded):
    f = seeded.control
    await failing_qa(f, "T-4")
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-4")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AnswerDialog))
        await until(pilot, lambda: app.focused is not None and app.focused.id == "answer")
        shown = _text(app.screen.query_one("#failing"))
        assert "✗ pytest (exit 1)" in shown
        assert "FAILED tests/test_pay.py::test_total - assert 29 == 30" in shown.splitlines()[-1]
        assert "\\n" not in shown
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.screen_stack[0])
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen) and app.screen.ready)
        box = app.screen.query_one("#detail-failing")
        await until(pilot, lambda: box.display)
        lines = _text(app.screen.query_one("#detail-failing-text")).splitlines()
        assert "    E       assert total(cart) == 30" in lines
        assert lines[0] == "failing checks"
        await pilot.press("2")  # the newest artifact: the QA report, its failing checks first
        await until(pilot, lambda: "// failing checks" in screen_text(app))
        assert "    E       assert total(cart) == 30" in screen_text(app)


async def test_the_retry_question_shows_the_error(seeded):
    f = seeded.control
    failed = (await f.task("T-5")).error
    assert failed
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-5")
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        assert f"error: {failed}" in _text(app.screen.query_one("#about"))
        await pilot.press("escape")
        await until_async(pilot, lambda: _still_failed(f))


async def _still_failed(f) -> bool:
    return (await f.task("T-5")).error is not None


async def test_a_task_just_filed_is_the_one_selected(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-2")
        await pilot.press("n")
        await until(pilot, lambda: type(app.screen).__name__ == "NewTaskDialog")
        await pilot.press(*"Log slow queries", "enter")
        made = None

        async def filed() -> bool:
            nonlocal made
            made = next(
                (t for t in await seeded.control.tasks() if t.title == "Log slow queries"), None
            )
            return made is not None

        await until_async(pilot, filed)
        await until(pilot, lambda: app.board.selected() == made.id)
