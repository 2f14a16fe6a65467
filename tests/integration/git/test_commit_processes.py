"""A task's commit starts only the git processes it needs: the branch's merge base found
once for each pair of commits (core.workspace.merge_bases), none on a branch's first
commit, the new commit read from the branch's ref file, an index without submodules seen
without `git ls-files`, a branch that does not exist yet without `git rev-parse`; and each
answer is git's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.workspace import merge_bases, submodules
from core.workspace.worktrees import Worktrees
from tests.support.git import git_started, make_task, plain_git
from tests.support.repos import make_repo


@pytest.fixture
def wt(tmp_path: Path) -> Worktrees:
    merge_bases.forget()
    repo = make_repo(tmp_path / "repo", "trunk", {"app.py": "x = 1\n"}, exclude_factory=True)
    return Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    return git_started(monkeypatch)


def named(started: list[tuple[str, ...]], command: str) -> list[tuple[str, ...]]:
    return [args for args in started if args[0] == command]


async def test_a_branchs_first_commit_asks_for_no_merge_base_and_reads_its_id_from_the_ref(
    wt, started
):
    task = make_task()
    tree = await wt.ensure(task)
    (tree / "new.py").write_text("y = 2\n")
    started.clear()

    commit = await wt.history.commit_all(task, "first")

    assert commit == plain_git("rev-parse", "feat/T-1", cwd=wt.repo)
    assert named(started, "merge-base") == [] and named(started, "rev-parse") == []
    assert len(named(started, "diff")) == 1  # what the index stages: read once, used twice
    assert named(started, "ls-files") == []  # no submodule in the index


async def test_a_merge_base_is_asked_of_git_once_for_each_pair_and_is_gits(wt, started):
    task = make_task()
    tree = await wt.ensure(task)
    (tree / "new.py").write_text("y = 2\n")
    await wt.history.commit_all(task, "first")
    plain_git("commit", "-q", "--allow-empty", "-m", "trunk moves on", cwd=wt.repo)
    started.clear()

    base, tip = await wt.changes.span(task)
    (tree / "more.py").write_text("z = 3\n")
    await wt.history.commit_all(task, "second")  # its check of the links it adds
    again = await wt.changes.span(task)
    await wt.changes.span(task)

    assert base == plain_git("merge-base", "trunk", tip, cwd=wt.repo)
    assert again[0] == plain_git("merge-base", "trunk", again[1], cwd=wt.repo) == base
    # (trunk, first commit) for the span and the second commit's check; (trunk, second).
    assert len(named(started, "merge-base")) == 2


async def test_a_shallow_repository_asks_for_its_merge_base_every_time(tmp_path):
    merge_bases.forget()
    common = tmp_path / "git"
    (common).mkdir()
    (common / "shallow").write_text("")
    asked = []

    async def find() -> str:
        asked.append(1)
        return "c" * 40

    for _ in range(2):
        assert await merge_bases.merge_base(common, "a" * 40, "b" * 40, find) == "c" * 40
    assert len(asked) == 2  # a fetch that deepens it may change the answer


async def test_a_branch_that_does_not_exist_is_known_absent_without_git(wt, started):
    plain_git("branch", "packed", cwd=wt.repo)
    plain_git("pack-refs", "--all", cwd=wt.repo)
    started.clear()

    assert await wt.rev("refs/heads/feat/T-9") is None
    assert await wt.rev("refs/heads/packed") == plain_git("rev-parse", "trunk", cwd=wt.repo)

    assert [
        args for args in named(started, "rev-parse") if "refs/heads/feat/T-9^{commit}" in args
    ] == []


@pytest.mark.parametrize("split", [False, True], ids=["index", "split-index"])
async def test_the_submodules_of_an_index_are_gits_listing_and_none_needs_no_process(
    tmp_path, started, split
):
    repo = make_repo(tmp_path / "repo", "trunk", {"app.py": "x = 1\n"})
    if split:
        plain_git("config", "core.splitIndex", "true", cwd=repo)
        plain_git("update-index", "--split-index", cwd=repo)
    started.clear()

    assert await submodules.gitlinks(repo) == ()
    assert named(started, "ls-files") == ([("ls-files", "--stage", "-z")] if split else [])

    other = make_repo(tmp_path / "other", "trunk", {"b.txt": "b\n"})
    commit = plain_git("rev-parse", "HEAD", cwd=other)
    plain_git("update-index", "--add", "--cacheinfo", f"160000,{commit},vendor/other", cwd=repo)

    assert await submodules.gitlinks(repo) == ("vendor/other",)  # listed by git, as ever
