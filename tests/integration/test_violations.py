"""What an unconfined run changes outside its worktree, through the whole pipeline, with the
scripted agent (or a QA check) planting what a prompt-injected one would.

In the main checkout, T25 cannot tell the run's doing from the operator's (they work there
too): the git config, hooks, `info/` and refs are put back at once (they would run a program
at the next git call), the changed copy kept, and the run stands - its work kept - while the
task asks "yours?"; merge and retry wait until an operator acknowledges it. A link out of the
worktree, in the run's own tree, is the run's: it fails, the worktree reset. Either way
nothing planted ever runs.

This is the second fence, so it runs unconfined (`sandbox: none`): a confined run cannot
reach the main checkout, and answers for nothing there (tests/integration/test_fence.py)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from core.domain.models import ArtifactKind, TaskState
from core.errors import PolicyRefused
from core.workspace.git import git_sync
from tests.support.pipeline import Env

S = TaskState


def plain_git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """git as the operator runs it in the main checkout: nothing switched off."""
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )


def planting(what: str) -> dict[str, list[dict[str, object]]]:
    return {"dev": [{"adapter": "scripted", "args": ["--misbehave", f"plant:{what}"]}]}


class Unconfined(Env):
    async def open(self, **overrides):
        return await super().open(**{"sandbox": "none", **overrides})


@pytest.fixture
async def env(shop: Path):
    e = Unconfined(shop)
    yield e
    await e.close()


def ran(shop: Path) -> list[str]:
    """What the planted programs wrote when they ran (nothing, if none did)."""
    marker = shop.parent / "planted-ran"
    return marker.read_text().split() if marker.exists() else []


async def evidence(env: Env, task_id: str) -> dict[str, object]:
    control = env.control
    assert control is not None
    found = [
        a
        for a in await control.store.list_artifacts(task_id=task_id)
        if a.meta.kind is ArtifactKind.VIOLATION
    ]
    assert len(found) == 1, found
    _, content = await control.store.get_artifact(found[0].id)
    return json.loads(content)


HELD = "until what changed outside its worktree is acknowledged"


async def acknowledge_and_finish(env: Env, task_id: str) -> None:
    """A failed run: retry and merge wait for the acknowledgement; then the task goes on
    to DONE."""
    control = env.control
    assert control is not None
    with pytest.raises(PolicyRefused, match=HELD):
        await control.retry(task_id, actor="ana")
    with pytest.raises(PolicyRefused, match=HELD):
        await control.merge(task_id, actor="ana")
    with pytest.raises(PolicyRefused, match="needs a reason"):
        await control.acknowledge(task_id, actor="ana", reason=" ")
    task = await control.acknowledge(task_id, actor="ana", reason="checked the planted config")
    assert task.state is S.FAILED and task.violation is None
    with pytest.raises(PolicyRefused, match="no violation to acknowledge"):
        await control.acknowledge(task_id, actor="ana", reason="again")
    await control.retry(task_id, actor="ana")
    await env.work()
    task = await env.task(task_id)
    assert task.state is S.DONE, task.error
    await control.merge(task_id, actor="ana")
    decisions = [(e.decision, e.reason) for e in control.audit.entries()]
    assert decisions[:2] == [("acknowledge", "checked the planted config"), ("retry", "")]


async def acknowledge_and_merge(env: Env, task_id: str) -> None:
    """A run that stood while the checkout changed: the task went on to DONE, and its merge
    waits for the acknowledgement."""
    control = env.control
    assert control is not None
    with pytest.raises(PolicyRefused, match=HELD):
        await control.merge(task_id, actor="ana")
    task = await control.acknowledge(task_id, actor="ana", reason="not mine: checked the change")
    assert task.state is S.DONE and task.violation is None
    assert (await control.merge(task_id, actor="ana")).merged
    decisions = [e.decision for e in control.audit.entries()]
    assert decisions[-2:] == ["acknowledge", "merge"]


CASES = {
    # what is planted: (what the run's error names, what the evidence keeps of it)
    "fsmonitor": (".git/config changed: +core.fsmonitor=echo fsmonitor", ".git/config"),
    "hookspath": (".git/config changed: +core.hookspath=", ".git/config"),
    "hook": ("hook added: pre-commit", ".git/hooks/pre-commit"),
    "attributes": (".git/info/attributes created", ".git/info/attributes"),
    "tag": ("ref refs/tags/planted-tag created", "refs/tags/planted-tag"),
}


@pytest.mark.parametrize("what", sorted(CASES))
async def test_a_plant_in_the_shared_repository_is_put_back_and_the_task_asks(env, shop, what):
    config_before = (shop / ".git" / "config").read_bytes()
    await env.open(roles=planting(what))
    task = await env.new()
    await env.work()

    task = await env.task(task.id)
    named, kept = CASES[what]
    assert task.state is S.DONE, task.error  # the run stood
    assert task.violation is not None
    assert "changed while IMPLEMENTING run" in task.violation and "yours?" in task.violation
    assert named in task.violation and "T25 put back" in task.violation, task.violation
    assert kept in (await evidence(env, task.id))["changed_copies"]

    # Put back: the config byte for byte, no hook, no attributes, no tag; nothing ran.
    assert (shop / ".git" / "config").read_bytes() == config_before
    assert not (shop / ".git" / "hooks" / "pre-commit").exists()
    assert not (shop / ".git" / "info" / "attributes").exists()
    assert "planted-tag" not in git_sync("tag", cwd=shop)
    assert plain_git("status", cwd=shop).returncode == 0
    assert plain_git("commit", "--allow-empty", "-qm", "the operator's", cwd=shop).returncode == 0
    assert ran(shop) == []

    # The agent's work is kept: committed on its branch.
    changes = git_sync("show", "--stat", "--format=", "feat/T-1", cwd=shop)
    assert f"changes/{task.id}.md" in changes

    await acknowledge_and_merge(env, task.id)
    assert ran(shop) == []


async def test_a_link_out_of_the_worktree_is_never_committed(env, shop):
    await env.open(roles=planting("symlink"))
    task = await env.new()
    await env.work()

    task = await env.task(task.id)
    assert task.state is S.FAILED
    assert "symbolic link etc-link -> /etc leads outside the worktree" in task.error
    worktree = shop / ".factory" / "worktrees" / task.id
    assert not os.path.lexists(worktree / "etc-link")
    assert git_sync("log", "--format=%s", "feat/T-1", cwd=shop).splitlines() == [
        "tests",
        "initial",
    ]
    assert (await evidence(env, task.id))["changes"] == [
        "symbolic link etc-link -> /etc leads outside the worktree"
    ]

    await acknowledge_and_finish(env, task.id)
    assert not os.path.lexists(shop / "etc-link")


def qa_check_planting(shop: Path, what: str) -> dict[str, object]:
    """A QA check that runs code the dev agent could have written: it plants, once."""
    script = shop.parent / f"check-{what}.py"
    script.write_text(
        "import subprocess, sys\n"
        "sys.argv = ['t25-scripted-agent', '-p', 'x', '--misbehave', "
        f"'plant:{what}']\n"
        "from adapters.scripted_agent import main\n"
        "main()\n"
    )
    return {
        "checks": [
            {"name": "unit", "run": [sys.executable, "-m", "unittest", "-q"]},
            {"name": "planting", "run": [sys.executable, str(script)], "required": False},
        ]
    }


async def test_a_qa_check_that_plants_is_caught_too(env, shop):
    await env.open(qa=qa_check_planting(shop, "fsmonitor"))
    task = await env.new()
    await env.work()

    task = await env.task(task.id)
    assert task.state is S.DONE and task.violation is not None, task.error
    assert "QA run" in task.violation and "+core.fsmonitor=" in task.violation, task.violation
    assert "fsmonitor" not in plain_git("config", "--local", "--list", cwd=shop).stdout
    await acknowledge_and_merge(env, task.id)
    assert ran(shop) == []


async def test_the_push_goes_to_the_operators_remote_after_a_plant_in_qa(
    env, shop, tmp_path, monkeypatch
):
    origin = tmp_path / "origin.git"
    decoy = tmp_path / "decoy.git"
    for bare in (origin, decoy):
        git_sync("init", "--bare", "--quiet", str(bare), cwd=tmp_path)
    git_sync("remote", "add", "origin", str(origin), cwd=shop)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text("#!/bin/sh\necho https://github.invalid/shop/pull/1\n")
    gh.chmod(gh.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    await env.open(qa=qa_check_planting(shop, "push"))
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE and task.violation is not None, task.error
    assert "+remote.origin.receivepack=" in task.violation, task.violation
    assert "receivepack" not in plain_git("config", "--local", "--list", cwd=shop).stdout
    await acknowledge_and_merge(env, task.id)
    assert git_sync("rev-parse", "refs/heads/feat/T-1", cwd=origin) == git_sync(
        "rev-parse", "feat/T-1", cwd=shop
    )
    assert git_sync("for-each-ref", cwd=decoy) == ""
    assert ran(shop) == []


async def test_the_acknowledgement_is_a_rest_decision_too(env):
    from t25_tui.api.server import make_api

    control = await env.open()
    doc = make_api(control, worker_credential="w", operator_token=None).openapi()
    assert "post" in doc["paths"]["/tasks/{ref}/acknowledge"]
