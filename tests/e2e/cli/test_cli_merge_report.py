"""`t25 merge` says what it does and what landed, and pushes the default branch where the
task's branch went; `t25 task list` marks a merged task."""

from __future__ import annotations

import re
from pathlib import Path

from core.workspace.git import git_sync
from tests.support.pipeline import PIPELINE_CONFIG


def _done_task(t25, repo: Path) -> str:
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(PIPELINE_CONFIG)
    assert t25("task", "new", "Greeting").code == 0
    ran = t25("run")
    assert ran.code == 0, ran.err
    assert "T-1" in t25("task", "list", "--state", "DONE").out
    return git_sync("rev-parse", "--abbrev-ref", "HEAD", cwd=repo)


def test_a_merge_says_its_checks_then_where_it_landed_and_that_nothing_was_pushed(t25, repo):
    default = _done_task(t25, repo)
    assert "merged" not in t25("task", "list").out
    merged = t25("merge", "T-1")
    assert merged.code == 0, merged.err
    lines = merged.out.splitlines()
    assert re.fullmatch(
        r"merging T-1: (running \d+ checks? on the merge result|no checks .*)…", lines[0]
    )
    head = git_sync("rev-parse", default, cwd=repo)
    assert lines[1] == (
        f"merged T-1 into {default} as {head[:7]}; no git remote 'origin' to push {default} to"
    )
    finished = t25("task", "list", "--state", "DONE").out  # merged: finished, only counted
    listed = next(line for line in finished.splitlines() if line.startswith("T-1"))
    assert "DONE merged" in listed
    assert t25("task", "list").out.splitlines()[-1].startswith("and 1 DONE merged")


def test_a_merge_pushes_the_default_branch_where_the_task_branch_was_pushed(t25, repo, tmp_path):
    origin = tmp_path / "origin.git"
    git_sync("init", "--bare", "--quiet", str(origin), cwd=tmp_path)
    git_sync("remote", "add", "origin", str(origin), cwd=repo)
    default = _done_task(t25, repo)
    assert git_sync("rev-parse", "refs/heads/feat/T-1", cwd=origin)  # PR_OPEN pushed it
    merged = t25("merge", "T-1")
    assert merged.code == 0, merged.err
    assert f"; pushed {default} to origin" in merged.out
    assert git_sync("rev-parse", default, cwd=origin) == git_sync("rev-parse", default, cwd=repo)
