"""A branch's commit is read once and kept while its ref files stay as they were
(core.workspace.kept_refs): never stale, whoever moves the branch and however."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.workspace import kept_refs, settled_files
from core.workspace.worktrees import Worktrees
from tests.support.git import make_task, plain_git
from tests.support.repos import make_repo
from tests.support.waiting import until


@pytest.fixture
def wt(tmp_path: Path) -> Worktrees:
    repo = make_repo(tmp_path / "repo", "trunk", {"a.txt": "1\n"}, exclude_factory=True)
    plain_git("branch", "feat/T-1", cwd=repo)
    plain_git("commit", "-q", "--allow-empty", "-m", "second", cwd=repo)
    return Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = Worktrees._rev

    async def counted(self: Worktrees, ref: str, cwd: Path | None) -> str | None:
        seen.append(ref)
        return await real(self, ref, cwd)

    monkeypatch.setattr(Worktrees, "_rev", counted)
    return seen


async def settle(wt: Worktrees, ref: str) -> None:
    files = kept_refs._ref_files(await wt.common_dir(), ref)
    assert files is not None
    await until(lambda: settled_files.settled_state(files) is not None, timeout=10)


def sha(wt: Worktrees, rev: str) -> str:
    return plain_git("rev-parse", rev, cwd=wt.repo)


async def test_an_unmoved_branch_is_read_once(wt, reads):
    await settle(wt, "refs/heads/feat/T-1")
    first = await wt.tip(make_task())
    assert await wt.tip(make_task()) == first == sha(wt, "feat/T-1")
    assert len(reads) == 1


@pytest.mark.parametrize("packed", [False, True], ids=["loose", "packed"])
async def test_a_branch_moved_by_plain_git_is_seen(wt, reads, packed):
    if packed:
        plain_git("pack-refs", "--all", cwd=wt.repo)
    await settle(wt, "refs/heads/feat/T-1")
    before = await wt.tip(make_task())

    plain_git("branch", "-f", "feat/T-1", "trunk", cwd=wt.repo)

    assert await wt.tip(make_task()) == sha(wt, "trunk") != before
    assert len(reads) == 2


async def test_a_loose_ref_rewritten_in_place_is_seen(wt, reads):
    ref = wt.repo / ".git" / "refs" / "heads" / "feat" / "T-1"
    await settle(wt, "refs/heads/feat/T-1")
    await wt.tip(make_task())
    with ref.open("r+") as f:  # same inode, same size
        f.write(sha(wt, "trunk") + "\n")

    assert await wt.tip(make_task()) == sha(wt, "trunk")


async def test_a_symbolic_branch_is_read_every_time(wt, reads):
    plain_git("symbolic-ref", "refs/heads/feat/T-1", "refs/heads/trunk", cwd=wt.repo)
    files = kept_refs._ref_files(await wt.common_dir(), "refs/heads/feat/T-1")
    assert files is None
    await wt.tip(make_task())
    plain_git("commit", "-q", "--allow-empty", "-m", "third", cwd=wt.repo)  # trunk moves

    assert await wt.tip(make_task()) == sha(wt, "trunk")
    assert len(reads) == 2


async def test_a_loose_branch_just_moved_is_read_from_its_file(wt, reads):
    """No waiting for the file to settle: the name it holds is the branch's, and each name
    is peeled by git once (moving back costs no git process)."""
    first = await wt.tip(make_task())
    plain_git("branch", "-f", "feat/T-1", "trunk", cwd=wt.repo)
    assert await wt.tip(make_task()) == sha(wt, "trunk")
    plain_git("branch", "-f", "feat/T-1", first, cwd=wt.repo)
    assert await wt.tip(make_task()) == first
    assert await wt.tip(make_task()) == first
    assert reads == [first, sha(wt, "trunk")]


@pytest.mark.parametrize(
    ("target", "expected"), [("tag", "trunk"), ("tree", None)], ids=["annotated-tag", "tree"]
)
async def test_a_loose_branch_naming_no_commit_reads_as_git_peels_it(wt, target, expected):
    """A ref file an agent rewrote to name a tag or a tree: the commit git peels it to, or
    none, exactly as `rev-parse <ref>^{commit}` says."""
    plain_git("tag", "-a", "-m", "t", "v1", "trunk", cwd=wt.repo)
    name = sha(wt, "v1" if target == "tag" else "trunk^{tree}")
    (wt.repo / ".git" / "refs" / "heads" / "feat" / "T-1").write_text(name + "\n")

    got = await wt.tip(make_task())

    assert got == (sha(wt, expected) if expected else None)
