"""`t25 shell ID`: the operator's shell, or editor, runs in the task's worktree, and a task
with no worktree here is refused, saying so."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from core.errors import WorktreeRefused
from t25_tui.tui.workspace import REMOTE, editor_argv, worktree_of
from tests.support.shell import recorder


@pytest.fixture
def one_worktree(t25, repo: Path) -> Path:
    """T-1 with its worktree (made as a worker makes it: on the task's branch), T-2 without."""
    assert t25("init").code == 0
    assert t25("task", "new", "One").code == 0
    assert t25("task", "new", "Two").code == 0
    path = repo / ".factory" / "worktrees" / "T-1"
    subprocess.run(
        ["git", "worktree", "add", "-q", "-b", "feat/T-1", str(path)], cwd=repo, check=True
    )
    return path.resolve()


def test_the_shell_runs_in_the_worktree_and_its_status_is_t25s(t25, one_worktree, tmp_path):
    shell, record = recorder(tmp_path, "shell", status=3)
    done = t25("shell", "T-1", env={"SHELL": str(shell)})
    assert done.code == 3, done.err
    assert record.read_text().splitlines()[0] == str(one_worktree)
    assert "exit it to come back" in done.err


def test_the_editor_opens_the_worktree_with_its_own_arguments(t25, one_worktree, tmp_path):
    editor, record = recorder(tmp_path, "editor")
    done = t25("shell", "1", "--editor", env={"EDITOR": f"{editor} --wait", "VISUAL": ""})
    assert done.code == 0, done.err
    assert record.read_text().splitlines() == [str(one_worktree), "--wait ."]


def test_a_task_without_a_worktree_is_refused(t25, one_worktree, tmp_path):
    shell, record = recorder(tmp_path, "shell")
    done = t25("shell", "T-2", env={"SHELL": str(shell)})
    assert done.code == 1
    assert "T-2 has no worktree" in done.err and not record.exists()


async def test_attached_to_a_remote_serve_the_worktree_is_elsewhere():
    class Remote:  # any face that is not this host's control plane
        pass

    with pytest.raises(WorktreeRefused, match=REMOTE):
        await worktree_of(Remote(), "T-1")  # type: ignore[arg-type]


def test_the_editor_is_visual_then_editor_then_vi():
    assert editor_argv({"VISUAL": "nvim", "EDITOR": "nano"}) == ["nvim", "."]
    assert editor_argv({"EDITOR": "code --wait"}) == ["code", "--wait", "."]
    assert editor_argv({}) == ["vi", "."]
