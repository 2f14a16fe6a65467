"""One `git status --porcelain=v2 --branch` says what four git processes said before
(core.workspace.status_v2): on real repositories, each path's porcelain v1 code, what is
staged, HEAD's branch and commit."""

from __future__ import annotations

from pathlib import Path

from core.workspace.git import status_entries
from core.workspace.status_v2 import read_status
from tests.support.git import plain_git
from tests.support.repos import make_repo

V2 = ("status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all", "--no-renames")
V1 = ("status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")


def both(repo: Path):
    v2 = read_status(raw(repo, *V2))
    v1 = {path: xy for xy, path in status_entries(raw(repo, *V1))}
    return v2, v1


def raw(repo: Path, *args: str) -> bytes:
    import subprocess

    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout


def test_each_path_has_its_v1_code_and_the_staged_ones_their_index_entry(tmp_path):
    files = {"kept.py": "1\n", "edited.py": "1\n", "staged.py": "1\n", "gone.py": "1\n"}
    repo = make_repo(tmp_path / "repo", "trunk", files)
    (repo / "edited.py").write_text("2\n")
    (repo / "staged.py").write_text("2\n")
    plain_git("add", "staged.py", cwd=repo)
    (repo / "staged.py").write_text("3\n")  # staged, then changed again
    (repo / "gone.py").unlink()
    plain_git("rm", "-q", "--cached", "kept.py", cwd=repo)  # staged deletion, file kept
    (repo / "dir with space").mkdir()
    (repo / "dir with space" / "new file.txt").write_text("x\n")
    (repo / "added.py").write_text("a\n")
    plain_git("add", "added.py", cwd=repo)

    v2, v1 = both(repo)

    assert v2.status == v1 and len(v1) == 6  # kept.py: staged deleted, and untracked
    assert set(v2.staged) == {"staged.py", "kept.py", "added.py"}
    sha = plain_git("rev-parse", ":staged.py", cwd=repo)
    assert v2.staged["staged.py"].split()[3] == sha
    assert v2.head_ref == "refs/heads/trunk"
    assert v2.head_sha == plain_git("rev-parse", "HEAD", cwd=repo)


def test_a_conflict_a_detached_head_and_an_unborn_branch(tmp_path):
    repo = make_repo(tmp_path / "repo", "trunk", {"a.txt": "base\n"})
    plain_git("checkout", "-q", "-b", "other", cwd=repo)
    (repo / "a.txt").write_text("other\n")
    plain_git("commit", "-qam", "other", cwd=repo)
    plain_git("checkout", "-q", "trunk", cwd=repo)
    (repo / "a.txt").write_text("trunk\n")
    plain_git("commit", "-qam", "trunk", cwd=repo)
    plain_git("merge", "-q", "other", cwd=repo, check=False)

    v2, v1 = both(repo)
    assert v2.status == v1 == {"a.txt": "UU"}
    assert v2.staged["a.txt"].startswith("unmerged ")

    plain_git("merge", "--abort", cwd=repo)
    plain_git("checkout", "-q", "--detach", cwd=repo)
    detached, _ = both(repo)
    assert detached.head_ref is None and detached.head_sha == v2.head_sha

    empty = tmp_path / "empty"
    empty.mkdir()
    plain_git("init", "-q", "-b", "fresh", cwd=empty)
    (empty / "x").write_text("x\n")
    unborn, v1 = both(empty)
    assert (unborn.head_ref, unborn.head_sha) == ("refs/heads/fresh", None)
    assert unborn.status == v1 == {"x": "??"}
