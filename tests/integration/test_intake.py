"""Tasks from the tracker (core.control.intake) against a GitHub of the tests' own on loopback:
each labelled issue one task, however often intake runs and however many run at once; an
issue closed or unlabelled before its task started cancels it, as intake's audited decision;
and `t25 intake` does it from the command line."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from adapters.github_forge import GitHubForge
from core.control.intake import take_in
from core.domain.events import TaskCreated
from core.domain.models import TaskState, TaskType
from tests.support.fake_github import TOKEN, fake_github

REPO = "acme/shop"


def _projects(url: str) -> list[dict]:
    intake = {
        "repo": REPO,
        "label": "t25",
        "host": url,
        "types": {"bug": "fix"},
        "priorities": {"urgent": 10},
    }
    return [{"name": "shop", "repo": ".", "intake": intake}]


async def test_each_labelled_issue_becomes_one_task_however_often_intake_runs(env):
    async with fake_github() as (fake, url):
        control = await env.open(projects=_projects(url))
        fake.file_issue(REPO, "Greet in French", "Say bonjour.", labels=("t25", "bug", "urgent"))
        fake.file_issue(REPO, "Not for T25", labels=("later",))
        fake.file_issue(REPO, "\x1b]52;c;cm0gLXJmIH4=\x07Sneaky", "body \x1b[31m", labels=("t25",))
        forge = GitHubForge(TOKEN, api=url)
        intake = control.config.projects[0].intake
        try:
            first = await take_in(control, forge, "shop", intake)
            again = await take_in(control, forge, "shop", intake)
        finally:
            await forge.close()

    assert [t.title for t in first.filed] == [
        "Greet in French",
        "\\x1b]52;c;cm0gLXJmIH4=\\x07Sneaky",  # escaped: nothing of it acts on a terminal
    ]
    assert again.filed == [] and again.known == 2
    greet = first.filed[0]
    assert (greet.type, greet.priority, greet.request_key) == (
        TaskType.FIX,
        10,
        "github:acme/shop#1",
    )
    assert greet.description.startswith("Say bonjour.")
    assert "(from https://github.example/acme/shop/issues/1, by ana)" in greet.description
    assert "\\x1b[31m" in first.filed[1].description
    said = fake.repo(REPO).comments[1]
    assert len(said) == 1 and f"task {greet.id}" in said[0]["body"]
    created = [e for e in await control.store.events_after(0) if isinstance(e, TaskCreated)]
    assert [e.actor for e in created] == ["intake", "intake"]


async def test_two_intakes_at_once_file_one_task_per_issue(env):
    async with fake_github() as (fake, url):
        control = await env.open(projects=_projects(url))
        for n in range(5):
            fake.file_issue(REPO, f"Change {n}", labels=("t25",))
        forges = [GitHubForge(TOKEN, api=url) for _ in range(2)]
        intake = control.config.projects[0].intake
        try:
            both = await asyncio.gather(*(take_in(control, f, "shop", intake) for f in forges))
        finally:
            for forge in forges:
                await forge.close()

    tasks = await control.tasks()
    assert sorted(t.request_key for t in tasks) == [f"github:acme/shop#{n}" for n in range(1, 6)]
    filed = [t.id for done in both for t in done.filed]
    assert sorted(set(filed)) == sorted(t.id for t in tasks)  # what each filed is one of those


async def test_an_issue_closed_or_unlabelled_cancels_its_task_until_it_implements(env):
    async with fake_github() as (fake, url):
        control = await env.open(projects=_projects(url))
        for title in ("Closed soon", "Unlabelled soon", "Started already"):
            fake.file_issue(REPO, title, labels=("t25",))
        forge = GitHubForge(TOKEN, api=url)
        intake = control.config.projects[0].intake
        try:
            closed, unlabelled, started = (await take_in(control, forge, "shop", intake)).filed
            await control.transition(started, TaskState.SPEC, actor="t25", reason="picked up")
            started = await control.task(started.id)
            moved = await control.transition(started, TaskState.PLAN, actor="t25", reason="spec")
            await control.transition(moved, TaskState.IMPLEMENTING, actor="t25", reason="plan")
            issues = fake.repo(REPO).issues
            issues[1]["state"] = "closed"
            issues[2]["labels"] = []
            issues[3]["state"] = "closed"
            done = await take_in(control, forge, "shop", intake)
        finally:
            await forge.close()

    assert sorted(t.id for t in done.cancelled) == [closed.id, unlabelled.id]
    assert (await control.task(started.id)).state is TaskState.IMPLEMENTING
    lines = [(e.actor, e.task, e.decision, e.reason) for e in control.audit.entries()]
    assert ("intake", closed.id, "cancel", "issue acme/shop#1 was closed") in lines
    assert (
        "intake",
        unlabelled.id,
        "cancel",
        "issue acme/shop#2 was no longer labelled t25",
    ) in lines
    assert "T25 cancelled" in fake.repo(REPO).comments[1][-1]["body"]


async def test_t25_intake_files_from_the_command_line_with_the_operators_login(env, shop):
    async with fake_github() as (fake, url):
        await env.open(projects=_projects(url))  # writes t25.yaml
        fake.file_issue(REPO, "Greet in French", labels=("t25",))
        run = [sys.executable, "-m", "t25_tui", "intake"]
        login = {**os.environ, "GH_TOKEN": TOKEN}
        done = await asyncio.to_thread(
            subprocess.run, run, cwd=shop, env=login, capture_output=True, text=True, timeout=120
        )
        again = await asyncio.to_thread(
            subprocess.run, run, cwd=shop, env=login, capture_output=True, text=True, timeout=120
        )
        refused = await asyncio.to_thread(
            subprocess.run,
            run,
            cwd=shop,
            env={**login, "GH_TOKEN": "ghp_someone_else"},
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert done.returncode == 0, done.stderr
    assert "filed T-1 from github:acme/shop#1: Greet in French" in done.stdout
    assert "shop (acme/shop): 1 filed, 0 filed before, 0 cancelled" in done.stdout
    assert "0 filed, 1 filed before" in again.stdout
    assert refused.returncode == 1 and "401 Bad credentials" in refused.stderr


async def test_the_issue_is_told_once_of_each_state_its_task_enters_that_intake_announces(env):
    async with fake_github() as (fake, url):
        control = await env.open(projects=_projects(url))
        fake.file_issue(REPO, "Rotate the keys", "scripted: risk=high", labels=("t25",))
        forge = GitHubForge(TOKEN, api=url)
        intake = control.config.projects[0].intake
        try:
            (task,) = (await take_in(control, forge, "shop", intake)).filed
            await env.work()  # its plan waits for an approval
            for _ in range(2):
                await take_in(control, forge, "shop", intake)
        finally:
            await forge.close()

    assert (await control.task(task.id)).state is TaskState.AWAITING_APPROVAL
    said = [c["body"] for c in fake.repo(REPO).comments[1]]
    assert len(said) == 2  # the task it became, then the one state, once
    assert said[1].endswith(f"T25: task {task.id} has a plan waiting for approval.")
    assert said[1].startswith(f"<!-- t25:{task.id}:AWAITING_APPROVAL:")
