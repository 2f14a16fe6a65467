"""The cockpit takes the tracker's issues in on `j`, as `t25 intake` does: a task per labelled
issue on the fake forge, said on the status line; with no intake configured, a message says
why and what to write."""

from __future__ import annotations

import pytest

from t25_tui.tui.app import make_app
from t25_tui.tui.screens.dialogs import MessageDialog
from tests.support.cockpit import app_for, settle_board, until, until_async
from tests.support.fake_github import TOKEN, fake_github

REPO = "acme/shop"


async def test_j_files_a_task_per_labelled_issue_and_says_so(env, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GH_TOKEN", TOKEN)
    async with fake_github() as (fake, url):
        fake.file_issue(REPO, "Greet in French", labels=("t25",))
        intake = {"repo": REPO, "label": "t25", "host": url}
        control = await env.open(projects=[{"name": "shop", "repo": ".", "intake": intake}])
        app = make_app(control, actor="ana@ops")
        async with app.run_test(size=(120, 36)) as pilot:
            await settle_board(app, pilot)
            await pilot.press("j")

            async def filed() -> bool:
                return len(await control.tasks()) == 1

            await until_async(pilot, filed)
            await until(pilot, lambda: "1 filed, 0 filed before" in app.status_note)
    (task,) = await control.tasks()
    assert task.request_key == "github:acme/shop#1" and task.title == "Greet in French"


async def test_j_without_an_intake_says_what_to_configure(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        await pilot.press("j")
        await until(pilot, lambda: isinstance(app.screen, MessageDialog))
        said = str(app.screen.query_one("#message-body").render())
    assert "no project takes its tasks from a tracker" in said
    assert "intake: {repo: owner/name, label: t25}" in said
