"""`adapters.github_forge` against a GitHub of the project's own on loopback
(tests/support/fake_github.py): every call the forge port makes, its pages, and GitHub's
everyday faults — a 5xx, a stall, the rate limit — tried again within a bound."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from adapters.github_forge import GitHubForge, api_url, login_token
from core.domain.backoff import Backoff
from core.errors import ForgeError, ForgeUnavailable, MergeRefused
from tests.support.fake_github import TOKEN, fake_github

REPO = "acme/shop"
HEAD = "a" * 40


@pytest.fixture
async def github():
    """The fake forge, and the adapter talking to it: short pauses, and a timeout of 10 s, which
    only a stalled answer reaches on a machine however loaded."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async with fake_github() as (fake, url):
        forge = GitHubForge(
            TOKEN, api=url, backoff=Backoff(0.01, 0.05), timeout_s=10.0, sleep=sleep
        )
        forge.waits = waits  # type: ignore[attr-defined]
        try:
            yield fake, forge
        finally:
            await forge.close()


async def test_a_pull_request_is_opened_once_and_a_retried_stage_finds_it(github):
    fake, forge = github
    fake.push(REPO, "feat/T-1", HEAD)
    opened = await forge.open_pull_request(
        REPO, head="feat/T-1", base="main", title="Add a greeting (T-1)", body="first"
    )
    again = await forge.open_pull_request(
        REPO, head="feat/T-1", base="main", title="Add a greeting (T-1)", body="the evidence"
    )
    assert again.number == opened.number and again.head_sha == HEAD
    assert fake.repo(REPO).pulls[opened.number]["body"] == "the evidence"
    assert (await forge.pull_request(REPO, opened.number)).url.endswith(f"/pull/{opened.number}")


async def test_labelled_issues_are_read_page_by_page_oldest_first_without_pull_requests(github):
    fake, forge = github
    for n in range(250):
        fake.file_issue(REPO, f"issue {n}", labels=("t25",) if n % 2 == 0 else ("later",))
    fake.push(REPO, "feat/T-9", HEAD)
    await forge.open_pull_request(REPO, head="feat/T-9", base="main", title="x", body="")

    labelled = await forge.issues(REPO, labels=["t25"])
    every = await forge.issues(REPO)

    assert [i.title for i in labelled] == [f"issue {n}" for n in range(0, 250, 2)]
    assert len(every) == 250  # the pull request GitHub lists among them is not an issue
    pages = [p for m, p in fake.requests if p == f"/repos/{REPO}/issues"]
    assert len(pages) == 2 + 3  # 125 labelled in 2 pages of 100, then 251 in 3
    fake.file_issue(REPO, "Greet in French")
    found = await forge.issues(REPO, query="french")
    assert [i.title for i in found] == ["Greet in French"]


async def test_a_5xx_a_stall_and_the_rate_limit_are_waited_out_within_a_bound(github):
    fake, forge = github
    fake.file_issue(REPO, "one", labels=("t25",))
    fake.faults = ["5xx", "stall", "rate_limit", "secondary_limit"]
    assert [i.title for i in await forge.issues(REPO, labels=["t25"])] == ["one"]
    assert not fake.faults and len(forge.waits) >= 4  # each fault met, and waited out
    assert max(forge.waits) <= 1.0  # the rate limits' own waits (their reset, `retry-after`)

    fake.faults = ["5xx"] * 5
    with pytest.raises(ForgeUnavailable, match="answered 502"):
        await forge.issue(REPO, 1)
    fake.faults = ["rate_limit_long"]
    with pytest.raises(ForgeUnavailable, match="rate-limiting"):
        await forge.issue(REPO, 1)


async def test_a_refusal_says_what_github_said(github):
    _, forge = github
    with pytest.raises(ForgeError, match="404 Not Found"):
        await forge.issue(REPO, 77)
    outsider = GitHubForge("ghp_not_the_operator", api=str(forge.http.base_url))
    try:
        with pytest.raises(ForgeError, match="401 Bad credentials"):
            await outsider.issues(REPO)
    finally:
        await outsider.close()


async def test_a_failed_checks_log_is_its_last_lines_however_long(github):
    fake, forge = github
    log = "".join(f"step {n}\n" for n in range(20_000)) + "FAILED tests/test_greet.py::test_hi"
    fake.add_check(REPO, HEAD, "lint", "success")
    fake.add_check(REPO, HEAD, "tests", "failure", log=log)
    fake.add_check(REPO, HEAD, "docs", None)

    checks = await forge.checks(REPO, HEAD)

    assert [(c.name, c.failed) for c in checks] == [
        ("lint", False),
        ("tests", True),
        ("docs", False),
    ]
    tail = await forge.check_log(REPO, checks[1], lines=3)
    assert tail.splitlines() == ["step 19998", "step 19999", "FAILED tests/test_greet.py::test_hi"]
    assert await forge.check_log(REPO, checks[0]) == "lint: success"  # no log: its summary


async def test_reviews_come_with_their_comments_on_lines_and_the_conversation_after_an_id(github):
    fake, forge = github
    fake.push(REPO, "feat/T-1", HEAD)
    pull = await forge.open_pull_request(REPO, head="feat/T-1", base="main", title="t", body="")
    fake.review(REPO, pull.number, "COMMENTED", "looks fine")
    asked = fake.review(
        REPO,
        pull.number,
        "CHANGES_REQUESTED",
        "two things",
        comments=(("src/greet.py", 3, "say hello, not hi"), ("README.md", 10, "document it")),
    )
    first = fake.say(REPO, pull.number, "@t25 also log the greeting")

    reviews = await forge.reviews(REPO, pull.number)

    assert [r.state for r in reviews] == ["COMMENTED", "CHANGES_REQUESTED"]
    assert reviews[1].id == asked["id"] and reviews[1].commit == HEAD
    assert [(c.path, c.line, c.body) for c in reviews[1].comments] == [
        ("src/greet.py", 3, "say hello, not hi"),
        ("README.md", 10, "document it"),
    ]
    said = await forge.comment(REPO, pull.number, "T-1 is back in IMPLEMENTING")
    assert [c.body for c in await forge.comments(REPO, pull.number)] == [
        "@t25 also log the greeting",
        "T-1 is back in IMPLEMENTING",
    ]
    assert [c.id for c in await forge.comments(REPO, pull.number, after=first["id"])] == [said.id]


async def test_a_merge_is_bound_to_the_head_reviewed_and_waits_for_required_checks(github):
    fake, forge = github
    fake.push(REPO, "feat/T-1", HEAD)
    pull = await forge.open_pull_request(REPO, head="feat/T-1", base="main", title="t", body="")
    fake.repo(REPO).required_checks = {"tests"}
    fake.add_check(REPO, HEAD, "tests", "failure")
    with pytest.raises(MergeRefused, match="Required status check"):
        await forge.merge(REPO, pull.number, head=HEAD, title="Merge T-1", message="")
    fake.repo(REPO).check_runs[HEAD][0]["conclusion"] = "success"

    fake.push(REPO, "feat/T-1", "b" * 40)  # someone pushed after the review
    with pytest.raises(MergeRefused, match="Head branch was modified"):
        await forge.merge(REPO, pull.number, head=HEAD, title="Merge T-1", message="")
    assert not fake.repo(REPO).pulls[pull.number]["merged"]

    fake.push(REPO, "feat/T-1", HEAD)
    merged = await forge.merge(REPO, pull.number, head=HEAD, title="Merge T-1", message="ok")
    assert merged == "m" * 40 and fake.repo(REPO).pulls[pull.number]["merged"]


async def test_labels_are_added_once(github):
    fake, forge = github
    fake.file_issue(REPO, "one", labels=("t25",))
    await forge.add_labels(REPO, 1, ["t25", "t25:T-4"])
    assert (await forge.issue(REPO, 1)).labels == ("t25", "t25:T-4")


def test_the_login_is_the_operators_own_env_first_then_gh(tmp_path: Path):
    assert api_url(None) == api_url("github.com") == "https://api.github.com"
    assert api_url("git.acme.example") == "https://git.acme.example/api/v3"
    assert login_token("https://api.github.com", env={"GITHUB_TOKEN": "t1"}) == "t1"
    both = {"GH_TOKEN": "t2", "GITHUB_TOKEN": "t1"}
    assert login_token("https://api.github.com", env=both) == "t2"
    enterprise = {"GH_ENTERPRISE_TOKEN": "e1", "GH_TOKEN": "t2"}
    assert login_token("https://git.acme.example/api/v3", env=enterprise) == "e1"

    gh = tmp_path / "gh"
    gh.write_text('#!/bin/sh\n[ "$1 $2 $3 $4" = "auth token --hostname github.com" ] && echo t3\n')
    gh.chmod(gh.stat().st_mode | stat.S_IXUSR)
    on_path = {"PATH": f"{tmp_path}:{os.environ['PATH']}"}
    assert login_token("https://api.github.com", env=on_path) == "t3"
    with pytest.raises(ForgeError, match=r"no GitHub login for github\.com"):
        login_token("https://api.github.com", env={"PATH": "/nonexistent"})
