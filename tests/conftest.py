"""Shared fixtures: real git repositories in temp dirs, and the real `t25` command; and which
tests are `slow`."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.workspace.git import git_sync

# -- slow tests ----------------------------------------------------------------------------
#
# A test is `slow` when it starts whole programs: the `t25` binary, `t25 serve` or a remote
# worker, an agent (the scripted agent or a real CLI), a Postgres cluster of its own, a
# terminal, the cockpit, or many git processes on real repositories (worktrees, the
# fingerprint, the undo, the push). `pytest -m "not slow"` is then the unit tests and the
# store's contract suite on both backends (real SQLite, a Postgres clone per test), in
# about half a minute; plain `pytest` and .ci/run still run everything. The marks are
# given here, from what a test uses and where it lives, so that no test module has to carry
# one and a new test that uses one of these fixtures is marked by itself.

SLOW_FIXTURES = frozenset(
    {
        "t25",  # the real binary
        "shop",  # the pipeline's sample project: the scripted agent runs in it
        "pg_cluster",  # a throwaway Postgres cluster, stopped and started for real
        "fake",  # the fake model server, for the real agent CLIs
    }
)
SLOW_MODULES = (
    "real_clis/",  # the real agent CLIs
    "tui/",  # the cockpit under Pilot (its workers run the scripted agent), and in a terminal
    "test_serve",  # a real uvicorn
    "test_web_cockpit.py",  # the cockpit in a real headless Chromium
    "test_rest_text.py",
    "test_remote_faults.py",
    "test_frozen_run.py",  # two `t25 run`s, one stopped past its lease
    "test_branch_guard.py",  # the pipeline a stage at a time, the branch moved between
    "test_merge_record.py",  # Postgres stopped under a merge
    "test_pipeline.py",  # tasks through the pipeline, with the scripted agent as a child process
    "test_figures_beside_the_default_branch.py",
    "test_check_figures.py",  # real pytest runs, read
    "test_sweeper.py",
    "test_decisions.py",
    "test_cli",  # the `t25` binary
    "test_startup.py",
    "test_audit_full_disk.py",
    "test_prompt_files.py",
    "test_stopped_children.py",  # agents that leave children behind
    "test_import_hygiene.py",  # fresh interpreters and lint-imports
    "test_held_secrets.py",  # the binary, and interpreters run as another user
    "test_wall_unprivileged.py",  # the wall's modules again, as another user
    "test_markers.py",  # pytest itself, collecting
    "adapters/test_adapter_process.py",  # agent processes under supervision
    "adapters/test_adapter_cli.py",
    "adapters/test_adapter_checks.py",
    "adapters/test_adapter_scripted_agent.py",
    "adapters/test_doctor.py",
    "store/test_store_faults.py",  # servers stopped, backends terminated
    "store/test_decisions_across_processes.py",
    "store/test_audit_across_processes.py",  # deciders killed, serves and the binary deciding
    # real repositories, worked by T25's git as a run would
    "test_worktrees.py",
    "test_git.py",
    "test_fingerprint.py",
    "test_watch.py",
    "test_publish.py",
    "test_repo_shapes.py",  # LFS, submodules, sparse checkouts: worktrees and the pipeline
    # a real project with its own virtual environment, its suite run by the checks
    "test_checks_see_the_change.py",
    "test_harness_is_protected.py",
)
TESTS = Path(__file__).parent


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`pytest -n auto` runs twice as many test processes as there are cores, at most eight:
    a test spends most of its time waiting on the programs it starts (a serve, workers, agent
    CLIs, git), so two cores keep four busy: on two cores the whole suite took 30 min in one
    process, 21 in three and 17 in four."""
    return min(8, 2 * (os.cpu_count() or 1))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        where = item.path.relative_to(TESTS).as_posix()
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())) or where.startswith(
            SLOW_MODULES
        ):
            item.add_marker(pytest.mark.slow)
    # Slow tests first, each group in its own order: run side by side (`-n`), the last tests
    # handed out are then quick ones, and no process is left alone with a minute-long test.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


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

    def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
        done = subprocess.run(
            [sys.executable, "-m", "t25_tui", *args],
            cwd=cwd or repo,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
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
    """A factory on `shop` with the scripted agents (tests.test_pipeline.Env), closed after."""
    from tests.test_pipeline import Env

    e = Env(shop)
    yield e
    await e.close()
