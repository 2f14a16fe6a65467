"""T25 reads its own t25.yaml from the operator's checkout, never from a task's worktree: an
agent that commits a t25.yaml on its task branch (another `qa.checks` command, say) does not
choose what the next run executes, even when `t25` is started from inside that worktree."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from core.config.schema import find_config, load_config, task_tree_of
from core.domain.models import Task, TaskType, utcnow
from core.errors import ConfigError
from core.workspace.git import git_sync
from core.workspace.worktrees import Worktrees
from t25_tui.cli.context import config_of
from tests.support.repos import make_repo


def config_text(check: list[str]) -> str:
    return yaml.safe_dump(
        {
            "projects": [{"name": "shop", "repo": "."}],
            "qa": {"checks": [{"name": "unit", "run": check}]},
        }
    )


OPERATORS = ["python3", "-m", "unittest", "-q"]
AGENTS = ["sh", "-c", "touch /tmp/t25-planted-qa-ran"]


@pytest.fixture
async def task_tree(tmp_path: Path) -> tuple[Path, Path]:
    """The operator's checkout with its committed t25.yaml, and a task worktree whose branch
    carries an agent's commit of a different one."""
    repo = make_repo(
        tmp_path / "shop", files={"t25.yaml": config_text(OPERATORS)}, exclude_factory=True
    )
    now = utcnow()
    task = Task(
        id="T-1", project="shop", title="x", type=TaskType.FEAT, created_at=now, state_since=now
    )
    tree = await Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="i").ensure(task)
    (tree / "t25.yaml").write_text(config_text(AGENTS))
    (tree / "src").mkdir()
    git_sync("commit", "-q", "-am", "tune QA", cwd=tree)
    return repo, tree


async def test_from_inside_a_task_worktree_the_operators_t25_yaml_is_used(task_tree, monkeypatch):
    repo, tree = task_tree
    assert task_tree_of(tree / "src") == tree and task_tree_of(repo) is None
    for start in (tree, tree / "src"):
        assert find_config(start) == repo / "t25.yaml"
    monkeypatch.chdir(tree / "src")
    config = config_of(argparse.Namespace(config=None))  # what `t25 run` there would load
    assert config.path == repo / "t25.yaml"
    assert [c.run for c in config.qa.checks] == [OPERATORS]
    # The task branch's version is really there, and really different.
    assert [c.run for c in load_config(tree / "t25.yaml").qa.checks] == [AGENTS]


async def test_a_task_worktrees_t25_yaml_is_refused_even_when_named(task_tree):
    _, tree = task_tree
    with pytest.raises(ConfigError, match="task T-1's worktree"):
        find_config(Path("/"), tree / "t25.yaml")


def test_a_worktree_t25_did_not_make_is_an_ordinary_checkout(tmp_path):
    """A linked worktree of the operator's own (no ownership record beside it) is theirs."""
    repo = make_repo(tmp_path / "shop", files={"t25.yaml": config_text(OPERATORS)})
    git_sync("worktree", "add", "-q", str(tmp_path / "mine"), cwd=repo)
    assert task_tree_of(tmp_path / "mine") is None
    assert find_config(tmp_path / "mine") == tmp_path / "mine" / "t25.yaml"
