"""Real git repositories in temp dirs and the real `t25` command line: the helpers, and the
fixtures made of them (`repo`, `t25`, `shop`, `env`; a plugin of tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.workspace.git import git_sync


def make_repo(
    path: Path,
    branch: str = "trunk",
    files: dict[str, str] | None = None,
    *,
    exclude_factory: bool = False,
) -> Path:
    """A real repository with one commit on `branch` (deliberately not always `main`).

    `files` are the committed files (default: a tiny app.py); `exclude_factory` keeps
    `.factory/` out of git as `t25 init` does."""
    path.mkdir(parents=True, exist_ok=True)
    git_sync("init", "--quiet", "--initial-branch", branch, cwd=path)
    git_sync("config", "user.name", "Test Operator", cwd=path)
    git_sync("config", "user.email", "operator@t25.invalid", cwd=path)
    for name, text in (files or {"app.py": "def hello():\n    return 'hi'\n"}).items():
        (path / name).write_text(text)
    git_sync("add", "-A", cwd=path)
    git_sync("commit", "--quiet", "-m", "initial", cwd=path)
    if exclude_factory:
        exclude = path / ".git" / "info" / "exclude"
        exclude.parent.mkdir(exist_ok=True)
        exclude.write_text("/.factory/\n")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def t25(repo: Path):
    """Run the real `t25` command line as a child process in `repo`."""

    def run(
        *args: str,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        timeout_s: float = 120,
    ) -> Result:
        done = subprocess.run(
            [sys.executable, "-m", "t25_tui", *args],
            cwd=cwd or repo,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    return run


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A repository with a passing unit test, as the pipeline tests' sample project."""
    return make_shop(tmp_path)


def make_shop(where: Path) -> Path:
    """The pipeline tests' sample project at `where/shop` (the `shop` fixture; benches too)."""
    repo = make_repo(where / "shop", branch="trunk")
    (repo / "test_app.py").write_text(
        "import unittest\nimport app\n\n\nclass T(unittest.TestCase):\n"
        "    def test_hello(self):\n        self.assertEqual(app.hello(), 'hi')\n"
    )
    git_sync("add", "-A", cwd=repo)
    git_sync("commit", "-q", "-m", "tests", cwd=repo)
    (repo / ".git" / "info" / "exclude").write_text("/.factory/\n/t25.yaml\n")
    return repo


@pytest.fixture
async def env(shop: Path):
    """A factory on `shop` with the scripted agents (tests.support.pipeline.Env), closed after."""
    from tests.support.pipeline import Env

    e = Env(shop)
    yield e
    await e.close()
