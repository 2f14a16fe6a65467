"""From issue to merged pull request, through the real `t25 serve` with its workers and the
scripted agents, against a GitHub of the tests' own on loopback backed by a real bare
repository: a labelled issue becomes a task; its pull request's CI fails once and a reviewer
requests changes once, each fed back to the dev agent; the operator merges through the forge;
and serve started again on the same store files the issue no second time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.workspace.git import git_sync
from tests.support.fake_github import TOKEN, bare_origin, fake_github, merge_in
from tests.support.pipeline import write_config
from tests.support.serve_process import serve_process
from tests.support.waiting import until

REPO = "acme/shop"


async def test_a_labelled_issue_goes_through_ci_and_review_feedback_to_a_forge_merge(
    shop: Path, tmp_path: Path
):
    origin = bare_origin(shop, tmp_path)
    async with fake_github() as (fake, url):
        forge = fake.repo(REPO)
        forge.git = origin
        forge.required_checks = {"tests"}
        heads: list[str] = []

        def ci(repo: str, sha: str) -> list[tuple[str, str, str]]:
            heads.append(sha)  # the first head pushed fails its tests; the others pass
            failed = len(heads) == 1
            return [("tests", "failure" if failed else "success", "FAILED test_hello\n")]

        def reviewer(repo: str, pull: dict[str, Any]) -> None:
            if len(heads) == 2 and not forge.reviews.get(pull["number"]):  # the second head
                fake.review(
                    REPO, pull["number"], "CHANGES_REQUESTED", comments=(("app.py", 1, "Tidy"),)
                )

        fake.ci, fake.reviewer = ci, reviewer
        fake.on_merge = lambda r, pull: merge_in(origin, pull)
        fake.file_issue(REPO, "Greet in French", "Say bonjour.", labels=("t25",))
        watch = {"repo": REPO, "host": url, "poll_s": 0.1, "settle_s": 1}
        intake = {"repo": REPO, "label": "t25", "host": url, "every_s": 10}
        project = {"name": "shop", "repo": ".", "intake": intake, "pull_request": watch}
        write_config(shop, projects=[project], merge={"via": "forge"})
        env = {"GH_TOKEN": TOKEN}

        async with serve_process(shop, tmp_path, "--workers", "2", env=env) as serve:

            async def tasks() -> list[dict]:
                return (await serve.client.get("/tasks")).json()

            async def finished() -> bool:
                found = await tasks()
                return bool(found) and found[0]["state"] in ("DONE", "FAILED", "NEEDS_INPUT")

            await until(finished, timeout=240, what="the issue's task through the pipeline")
            (task,) = await tasks()
            assert task["state"] == "DONE", task
            merged = await serve.client.post(f"/tasks/{task['id']}/merge", json={}, timeout=120)
            assert merged.status_code == 200, merged.text
            shown = (await serve.client.get(f"/tasks/{task['id']}")).json()
        listed = len([r for r in fake.requests if r == ("GET", f"/repos/{REPO}/issues")])

        async with serve_process(shop, tmp_path, "--workers", "0", env=env) as serve:

            async def looked_again() -> bool:
                seen = [r for r in fake.requests if r == ("GET", f"/repos/{REPO}/issues")]
                return len(seen) > listed

            await until(looked_again, what="serve, started again, taking issues in")
            again = (await serve.client.get("/tasks", params={"all": "true"})).json()

    assert task["request_key"] == "github:acme/shop#1"
    moves = [(e["from_state"], e["to_state"]) for e in shown["history"] if "to_state" in e]
    assert moves.count(("PR_OPEN", "IMPLEMENTING")) == 2  # the CI failure, then the review
    reasons = [e["reason"] for e in shown["history"] if e.get("from_state") == "PR_OPEN"]
    assert reasons[:2] == [
        "CI failed on pull request #2 (tests)",
        "changes requested on pull request #2 by bo",
    ]
    assert shown["task"]["merged"] is True
    pull = forge.pulls[2]
    assert pull["merged"] is True and "Closes #1." in pull["body"]
    tip = git_sync("rev-parse", "refs/heads/trunk", cwd=origin)
    parents = git_sync("rev-list", "--parents", "-n1", tip, cwd=origin).split()[1:]
    assert parents[1] == shown["task"]["reviewed_head"]
    assert len(again) == 1  # the issue is still open, and filed once
    filed = [c for c in forge.comments[1] if "T25 filed this issue" in c["body"]]
    assert len(filed) == 1
