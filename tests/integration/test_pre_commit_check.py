"""`pre-commit` works as a QA check: in the check's sandbox, with its private HOME, it keeps
its store in that HOME's cache (XDG_CACHE_HOME) - writable, never the operator's - and runs a
project's local hooks. A real pre-commit, a real repository, bubblewrap, the pipeline."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from adapters.checks import run_check
from adapters.homes import run_homes
from adapters.sandbox import bwrap_problem
from core.config.policy_config import QACheck
from core.domain.agent import CheckSandbox
from core.domain.events import InputRequested
from core.domain.models import ArtifactKind, TaskState
from core.workspace.git import git_sync
from tests.support.pipeline import Env
from tests.support.projects import make_project, shared_dir, tools_venv

S = TaskState

pytestmark = pytest.mark.skipif(
    bool(bwrap_problem()) and os.environ.get("T25_REQUIRE_PG") != "1",
    reason=f"bubblewrap cannot run here: {bwrap_problem()}",
)

# Local hooks only (`language: system`): nothing is fetched. The second proves where
# pre-commit keeps its store: in the check's own HOME.
HOOKS = """\
repos:
  - repo: local
    hooks:
      - id: no-todo
        name: no TODO left
        entry: sh -c '! grep -Hn TODO "$@"' --
        language: system
        files: \\.py$
      - id: store-in-home
        name: the store is in the check's HOME
        entry: sh -c 'echo "home=$HOME"; test -f "$HOME/.cache/pre-commit/db.db"'
        language: system
        pass_filenames: false
        always_run: true
        verbose: true
"""
CHECK = {"name": "hooks", "run": ["pre-commit", "run", "--all-files"]}
TODO = r"scripted: write=src/calc/__init__.py:def add(a, b):\n    return a + b  # TODO\n"
CLEAN = r"scripted: write=src/calc/__init__.py:def add(a, b):\n    return b + a\n"


@pytest.fixture(scope="session")
def tools(tmp_path_factory) -> Path:
    return tools_venv(shared_dir(tmp_path_factory))


@pytest.fixture
def project(tmp_path, tools, monkeypatch) -> Path:
    """The calc project with a pre-commit config; `pre-commit` on PATH, as an operator has it."""
    repo = make_project(tmp_path, tools)
    (repo / ".pre-commit-config.yaml").write_text(HOOKS)
    git_sync("add", "-A", cwd=repo)
    git_sync("commit", "-qm", "pre-commit hooks", cwd=repo)
    monkeypatch.setenv("PATH", f"{tools / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return repo


def _home_of(excerpt: str) -> Path:
    return Path(next(line for line in excerpt.splitlines() if line.startswith("home="))[5:])


async def test_pre_commit_runs_sandboxed_with_its_store_in_the_checks_home(project, tools):
    tree = project / ".factory" / "worktrees" / "T-9"
    git_sync("worktree", "add", "-q", "-b", "feat/T-9", str(tree), cwd=project)
    check = QACheck.model_validate(CHECK)
    confine = CheckSandbox(
        kind="required", hidden=(project / ".factory",), read_paths=(tools,), at_checkout=True
    )
    clean = await run_check(check, tree, asyncio.Event(), confine)
    assert clean.passed and clean.start_error is None, clean.excerpt
    assert "no TODO left" in clean.excerpt and "the store is in the check's HOME" in clean.excerpt
    home = _home_of(clean.excerpt)
    assert home.parent == run_homes() and not home.exists()  # private, and gone with the check

    (tree / "src" / "calc" / "__init__.py").write_text("def add(a, b):\n    return 0  # TODO\n")
    git_sync("commit", "-qam", "todo", cwd=tree)
    found = await run_check(check, tree, asyncio.Event(), confine)
    assert not found.passed and found.start_error is None
    assert "src/calc/__init__.py:2:" in found.excerpt and "Failed" in found.excerpt
    assert git_sync("status", "--porcelain", "--ignored", cwd=tree) == ""  # nothing left behind


async def test_a_qa_stage_runs_pre_commit_and_a_finding_goes_back_to_dev(project, tools):
    factory = Env(project)
    try:
        control = await factory.open(
            qa={"checks": [CHECK]},
            sandbox={"mode": "required", "read_paths": [str(tools)]},
            limits={"max_qa_loops": 0},
        )
        flagged = await control.new_task("Tune add", actor="ana", description=TODO)
        await factory.work()
        flagged = await factory.task(flagged.id)
        assert flagged.state is S.NEEDS_INPUT and flagged.checks_passed is False
        assert "QA sent the task back 0 times" in (await _question(control, flagged.id))

        clean = await control.new_task("Swap add", actor="ana", description=CLEAN)
        await factory.work()
        clean = await factory.task(clean.id)
        assert clean.state is S.DONE and clean.checks_passed, clean.error
        (report,) = await _qa_reports(control, clean.id)
        (hooks,) = report["checks"]
        assert hooks["passed"] and "the store is in the check's HOME" in hooks["excerpt"]
        assert _home_of(hooks["excerpt"]).parent == run_homes()
    finally:
        await factory.close()


async def _question(control, task_id: str) -> str:
    events = await control.store.events_after(0, task_id=task_id, limit=10_000)
    return [e for e in events if isinstance(e, InputRequested)][-1].question


async def _qa_reports(control, task_id: str) -> list[dict]:
    out = []
    for a in await control.store.list_artifacts(task_id=task_id):
        if a.meta.kind is ArtifactKind.QA_REPORT:
            _, content = await control.store.get_artifact(a.id)
            out.append(json.loads(content))
    return out
