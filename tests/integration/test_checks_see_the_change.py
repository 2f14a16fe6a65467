"""QA's checks, and the merge's trial checks, test the change: on a project developed the
usual way - a virtual environment in the checkout with the project installed editable - a
check sees the task's tree at the checkout's own path, so `import calc` is the change's."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from adapters.checks import run_check
from core.config.policy_config import QACheck
from core.domain.agent import CheckSandbox
from core.domain.models import TaskState
from core.errors import MergeRefused
from core.workspace.git import git_sync
from tests.support.pipeline import Env, trunk_log
from tests.support.projects import FEATURE, make_project, needs_bwrap, shared_dir, tools_venv

S = TaskState

pytestmark = needs_bwrap

BROKEN = r"scripted: write=src/calc/__init__.py:def add(a, b):\n    raise RuntimeError('broken')\n"


@pytest.fixture(scope="session")
def tools(tmp_path_factory) -> Path:
    return tools_venv(shared_dir(tmp_path_factory))


@pytest.fixture
def project(tmp_path, tools) -> Path:
    return make_project(tmp_path, tools)


@pytest.fixture
async def factory(project, tools):
    e = Env(project)
    yield e
    await e.close()


def suite(project: Path) -> list[dict[str, object]]:
    """The project's own suite, run by the checkout's environment, as the project runs it."""
    python = str(project / ".venv" / "bin" / "python")
    return [{"name": "tests", "run": [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]}]


async def open_factory(factory: Env, tools: Path, *, tree_at: str = "checkout", **kw):
    return await factory.open(
        qa={"checks": suite(factory.repo), "tree_at": tree_at},
        sandbox={"mode": "required", "read_paths": [str(tools)]},
        **kw,
    )


def broken_worktree(project: Path) -> Path:
    """A worktree of the project on a branch whose `add` raises."""
    tree = project / ".factory" / "worktrees" / "T-9"
    git_sync("worktree", "add", "-q", "-b", "feat/T-9", str(tree), cwd=project)
    (tree / "src" / "calc" / "__init__.py").write_text("def add(a, b):\n    raise RuntimeError\n")
    git_sync("commit", "-qam", "break add", cwd=tree)
    return tree


async def test_a_check_run_in_the_worktree_imports_the_checkouts_code_through_the_venv(
    project, tools
):
    """What `qa.tree_at: worktree` does, and what every check did before: the false green."""
    tree = broken_worktree(project)
    check = QACheck.model_validate(suite(project)[0])
    confine = CheckSandbox(kind="required", hidden=(project / ".factory",), read_paths=(tools,))
    done = await run_check(check, tree, asyncio.Event(), confine)
    assert done.passed, done.excerpt  # the main checkout's add, through the editable install


async def test_a_check_sees_the_task_tree_at_the_checkouts_path(project, tools):
    tree = broken_worktree(project)
    check = QACheck.model_validate(suite(project)[0])
    confine = CheckSandbox(
        kind="required", hidden=(project / ".factory",), read_paths=(tools,), at_checkout=True
    )
    done = await run_check(check, tree, asyncio.Event(), confine)
    assert not done.passed
    assert "RuntimeError" in done.excerpt and "1 failed" in done.excerpt

    # git inside sees the task's branch, clean; and no mount point is left in the tree
    look = QACheck(
        name="git", run=["sh", "-c", "pwd; git status --porcelain; git log -1 --format=%s"]
    )
    seen = await run_check(look, tree, asyncio.Event(), confine)
    assert seen.passed, seen.excerpt
    assert seen.excerpt.split() == [str(project), "break", "add"]
    assert not (tree / ".venv").exists()
    assert git_sync("status", "--porcelain", "--ignored", cwd=tree) == ""


async def test_a_broken_change_fails_qa(factory, tools):
    control = await open_factory(factory, tools, limits={"max_qa_loops": 0})
    task = await control.new_task("Tune add", actor="ana", description=BROKEN)
    await factory.work()
    task = await factory.task(task.id)
    assert task.checks_passed is False, (task.state, task.error)
    assert task.state is S.NEEDS_INPUT, task.state
    # the main checkout's own suite still passes: it was never the code under test
    main_suite = suite(factory.repo)[0]["run"]
    done = await asyncio.to_thread(subprocess.run, main_suite, cwd=factory.repo)
    assert done.returncode == 0


async def test_a_new_feature_with_its_new_test_passes_qa_and_the_trial_merge(factory, tools):
    control = await open_factory(factory, tools)
    task = await control.new_task("Multiply", actor="ana", description=FEATURE)
    await factory.work()
    task = await factory.task(task.id)
    assert task.state is S.DONE and task.checks_passed, task.error
    task = await control.merge(task.id, actor="ana")
    assert task.merged and trunk_log(factory.repo)[0].startswith("Merge feat/T-1")
    main_suite = suite(factory.repo)[0]["run"]
    done = await asyncio.to_thread(
        subprocess.run, main_suite, cwd=factory.repo, capture_output=True
    )
    assert b"2 passed" in done.stdout


async def test_a_broken_change_fails_the_trial_merge(factory, tools):
    """The task reached DONE with no checks configured; the merge's trial checks, run on the
    merge commit seen at the checkout's path, refuse it."""
    control = await factory.open(qa={"checks": []})
    task = await control.new_task("Tune add", actor="ana", description=BROKEN)
    await factory.work()
    assert (await factory.task(task.id)).state is S.DONE
    await factory.close()
    control = await open_factory(factory, tools)
    with pytest.raises(MergeRefused, match="fails the required QA check tests"):
        await control.merge(task.id, actor="ana")
    assert not (await factory.task(task.id)).merged
    assert "raise RuntimeError" not in (factory.repo / "src" / "calc" / "__init__.py").read_text()


async def test_a_dev_agent_running_the_projects_tests_tests_its_own_change(factory, tools):
    """The dev agent sees its worktree at the checkout's path too (`sandbox.tree_at`), so
    the suite it runs through the checkout's environment imports what it just wrote."""
    python = factory.repo / ".venv" / "bin" / "python"
    run = f"scripted: run={python} -m pytest -q -p no:cacheprovider\n"
    control = await open_factory(factory, tools, limits={"max_qa_loops": 0})
    task = await control.new_task("Tune add", actor="ana", description=BROKEN + "\n" + run)
    await factory.work()
    task = await factory.task(task.id)
    ran = git_sync("show", f"{task.branch}:ran.txt", cwd=factory.repo).splitlines()
    assert ran[0] == str(factory.repo) and ran[1] == "1", ran  # where it ran, and it failed
    assert "1 failed" in ran[2]


async def test_with_tree_at_worktree_a_dev_agent_tests_the_checkouts_code(factory, tools):
    python = factory.repo / ".venv" / "bin" / "python"
    run = f"scripted: run={python} -m pytest -q -p no:cacheprovider\n"
    control = await factory.open(
        qa={"checks": suite(factory.repo)},
        sandbox={"mode": "required", "read_paths": [str(tools)], "tree_at": "worktree"},
        limits={"max_qa_loops": 0},
    )
    task = await control.new_task("Tune add", actor="ana", description=BROKEN + "\n" + run)
    await factory.work()
    task = await factory.task(task.id)
    ran = git_sync("show", f"{task.branch}:ran.txt", cwd=factory.repo).splitlines()
    assert ran[0] != str(factory.repo) and ran[1] == "0", ran  # the old code passed
