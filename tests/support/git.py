"""Git as an agent or a person runs it (no T25 hardening), tasks to give worktrees, a repository
shaped for the worktree tests, planted programs that record whether they ran, and the git
processes T25 starts, counted."""

from __future__ import annotations

import subprocess
from pathlib import Path

from core.domain.models import Task, TaskType, utcnow
from core.workspace import git as git_module
from tests.support.repos import make_repo


def make_task(task_id: str = "T-1", kind: TaskType = TaskType.FEAT) -> Task:
    now = utcnow()
    return Task(
        id=task_id, project="demo", title="a change", type=kind, created_at=now, state_since=now
    )


def git_started(monkeypatch) -> list[tuple[str, ...]]:
    """The git commands T25 starts from now on (core.workspace.git), each as its arguments."""
    seen: list[tuple[str, ...]] = []
    real = git_module._spawn

    async def counted(args, cwd, overrides):
        seen.append(tuple(args))
        return await real(args, cwd, overrides)

    monkeypatch.setattr(git_module, "_spawn", counted)
    return seen


def plain_git(*args: str, cwd: Path, check: bool = True) -> str:
    """git as an agent or a person would run it: no T25 hardening at all."""
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=check,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    ).stdout.strip()


def new_repo(path: Path, branch: str = "trunk") -> Path:
    return make_repo(
        path,
        branch,
        {"app.py": "def hello():\n    return 'hi'\n", ".gitignore": "*.log\n"},
        exclude_factory=True,
    )


class Planted:
    """Programs that record that they ran, then behave harmlessly (pass input through)."""

    def __init__(self, base: Path) -> None:
        self.dir = base / "markers"
        self.dir.mkdir()
        self.bin = base / "planted-bin"
        self.bin.mkdir()

    def program(self, name: str) -> str:
        script = self.bin / name
        script.write_text(
            f"#!/bin/sh\ntouch '{self.dir}/{name}'\n"
            'if [ -f "$1" ]; then cat "$1"; else cat; fi\nexit 0\n'
        )
        script.chmod(0o755)
        return str(script)

    def ran(self) -> list[str]:
        return sorted(p.name for p in self.dir.iterdir())

    def reset(self) -> None:
        for p in self.dir.iterdir():
            p.unlink()


def without_identity(repo: Path, home: Path, monkeypatch) -> None:
    """Nobody named anywhere git looks: not `repo`'s config, not a global one (HOME is
    `home`, empty), not the environment."""
    monkeypatch.setenv("HOME", str(home))
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(var, raising=False)
    plain_git("config", "--unset", "user.name", cwd=repo)
    plain_git("config", "--unset", "user.email", cwd=repo)
