"""Pilot tests: the approval dialog and the merge question show what they decide on — the
spec, the plan's SHA-256, earlier rejections and the estimate; the commits, diff stat,
review rounds, protected paths and reviewed head — read through the control plane."""

from __future__ import annotations

import json

from core.domain.figures import Baseline, Figures
from core.domain.models import ArtifactKind, ArtifactMeta, CheckResult
from t25_tui.tui.screens.detail import TaskDetailScreen
from t25_tui.tui.screens.dialogs import ApprovalDialog, MergeDialog
from tests.support.cockpit import app_for, settle_board, until


async def test_the_approval_dialog_shows_spec_plan_hash_rejections_and_estimate(seeded):
    plan = (await seeded.control.approval_evidence("T-2")).plan_sha256
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-2")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ApprovalDialog))
        spec = str(app.screen.query_one("#spec").render())
        assert "Rotate the session signing key." in spec
        assert "✓ the behaviour is covered by a unit test" in spec
        past = str(app.screen.query_one("#past").render())
        assert plan and plan.startswith("sha256:") and f"plan   {plan}" in past
        assert "rejected keep the previous key for 24 h" in past
        assert "for IMPLEMENTING, QA, REVIEW, DOCS (from 8 past runs)" in past


async def test_the_merge_question_shows_commits_diff_review_and_protected_paths(seeded):
    control = seeded.control
    task = await control.task("T-1")
    await control.update(
        task, actor="t25", checks_passed=True, review_verdict="approve", protected_paths=("a.py",)
    )
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-1")
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, MergeDialog))
        question = str(app.screen.query_one(".dialog-title").render())
        assert "merge feat/T-1 into trunk" in question
        assert "T-1: Add a greeting endpoint" in question  # the commit
        assert "1 file, +1 -0" in question and "changes/T-1.md" in question
        assert "[minor] app.py:2 name the constant" in question  # the review round
        assert "reviewed head" in question
        assert "It touches 1 protected path(s)" in question and "  a.py" in question
        assert "d the diff" in str(app.screen.query_one(".dialog-keys").render())


async def test_the_detail_and_the_merge_question_show_test_figures_beside_the_default_branch(
    seeded,
):
    """T-1's last QA ran pytest: its figures, beside those of the default branch's last
    merge, head its detail and are in the merge question."""
    control = seeded.control
    task = await control.task("T-1")
    skipped = Figures(source="pytest", passed=1, skipped=1)
    check = CheckResult(name="tests", passed=True, exit_code=0, figures=skipped)
    report = {"checks": [check.model_dump(mode="json")], "passed": True, "summary": "ok"}
    json_meta = {"media_type": "application/json", "task_id": "T-1"}
    await control.store.put_artifact(
        json.dumps(report).encode(), ArtifactMeta(kind=ArtifactKind.QA_REPORT, **json_meta)
    )
    trunk = Baseline(
        branch="trunk",
        commit="c0ffee",
        task_id="T-1",
        figures={"tests": Figures(source="junit", passed=2)},
    )
    await control.store.put_artifact(
        trunk.model_dump_json().encode(), ArtifactMeta(kind=ArtifactKind.MERGE_CHECKS, **json_meta)
    )
    await control.update(task, actor="t25", checks_passed=True, review_verdict="approve")
    said = "tests passed (1 passed, 1 skipped — 1 fewer passed, 1 more skipped than on trunk)"
    app = app_for(seeded)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-1")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen) and app.screen.ready)
        assert f"checks: {said}" in str(app.screen.query_one("#detail-head").render())
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, TaskDetailScreen))
        assert app.board.focus_task("T-1")
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, MergeDialog))
        question = str(app.screen.query_one(".dialog-title").render())
        assert f"check          {said.replace('tests passed', 'tests: passed')}" in question
