"""Recovering from a failure: a retry that tells the agent why, and does not build on the
failed change; a reset that sends a task back to a stage it passed, its branch moved back to
where that stage began and what it held kept. Real repositories, the scripted agent, the
in-process workers."""

from __future__ import annotations

import pytest

from core.domain.decisions import Decision
from core.domain.events import RunStarted
from core.domain.models import ArtifactKind, TaskState
from core.domain.verbs import Verb
from core.errors import InvalidInput, PolicyRefused
from core.workspace.git import git_sync
from t25_tui.api.credentials import local_token
from tests.support.operators import operator_headers

S = TaskState


async def _prompts(control, task_id: str, stage: S) -> list[str]:
    out = []
    for a in await control.store.list_artifacts(task_id=task_id):
        if a.meta.kind is ArtifactKind.PROMPT:
            _, content = await control.store.get_artifact(a.id)
            if content.decode().startswith(f"T25-STAGE: {stage}"):
                out.append(content.decode())
    return out


async def _heads(control, task_id: str, stage: S) -> list[str | None]:
    """The branch head each run of `stage` began from, in order."""
    stages = {r.id: r.stage for r in await control.store.list_runs(task_id=task_id)}
    events = await control.store.events_after(0, task_id=task_id, limit=10_000)
    return [e.head for e in events if isinstance(e, RunStarted) and stages[e.run_id] is stage]


async def test_a_retry_tells_the_agent_why_and_starts_from_where_the_failed_change_began(env):
    control = await env.open(limits={"max_diff_lines": 1})
    task = await env.new(description="scripted: review=changes-once")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.FAILED and "diff limits exceeded" in task.error
    failed_tip = git_sync("rev-parse", task.branch, cwd=env.repo)

    await control.retry(task.id, actor="ana", reason="keep it to one line this time")
    await env.work()

    heads = await _heads(control, task.id, S.IMPLEMENTING)
    assert len(heads) == 3 and heads[2] == heads[1] != failed_tip  # not on the failed change
    archived = git_sync("rev-parse", f"refs/t25/archive/{task.id}/1", cwd=env.repo)
    assert archived == failed_tip  # kept, never lost
    prompt = (await _prompts(control, task.id, S.IMPLEMENTING))[-1]
    assert "## Why this stage runs again" in prompt
    assert "diff limits exceeded" in prompt and "keep it to one line this time" in prompt
    first = (await _prompts(control, task.id, S.IMPLEMENTING))[0]
    assert "## Why this stage runs again" not in first


async def test_a_reset_sends_a_done_task_back_to_implementing_from_where_it_began(env):
    control = await env.open()
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE
    done_tip = git_sync("rev-parse", task.branch, cwd=env.repo)
    began = (await _heads(control, task.id, S.IMPLEMENTING))[0]

    with pytest.raises(InvalidInput, match="a reset names the stage"):
        await control.decide(Decision(verb=Verb.RESET, task=task.id, actor="ana"))
    reset = await control.reset(task.id, S.IMPLEMENTING, actor="ana", reason="wrong approach")
    assert reset.state is S.IMPLEMENTING and reset.rewind_to == began
    assert reset.checks_passed is None and reset.reviewed_head is None
    entry = control.audit.entries()[-1]
    assert (entry.decision, entry.bound_to, entry.reason) == (
        "reset",
        f"commit:{began}",
        "wrong approach",
    )
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE and task.rewind_to is None
    assert git_sync("rev-parse", f"refs/t25/archive/{task.id}/1", cwd=env.repo) == done_tip
    heads = await _heads(control, task.id, S.IMPLEMENTING)
    assert heads[-1] == began  # the new implementation began where the first one did
    assert "wrong approach" in (await _prompts(control, task.id, S.IMPLEMENTING))[-1]
    assert (await control.audit.verify()).ok


async def test_a_reset_goes_back_never_forward_and_not_on_a_merged_task(env):
    control = await env.open()
    task = await env.new()
    await env.work()
    with pytest.raises(PolicyRefused, match="has no run of PR_OPEN that says where it began"):
        await control.reset(task.id, S.PR_OPEN, actor="ana")  # T25's own stage: no agent
    await control.merge(task.id, actor="ana")
    with pytest.raises(PolicyRefused, match="is merged; it cannot be reset"):
        await control.reset(task.id, S.PLAN, actor="ana")
    other = await control.enter(await env.new("Second"), S.SPEC, actor="t25")
    with pytest.raises(PolicyRefused, match="a reset goes back, not forward"):
        await control.reset(other.id, S.QA, actor="ana")
    with pytest.raises(PolicyRefused, match="a task in RECEIVED cannot be reset"):
        await control.reset((await env.new("Third")).id, S.SPEC, actor="ana")


async def test_a_reset_over_rest_and_from_the_command_line_is_the_same_decision(env, t25):
    import httpx

    from t25_tui.api.cockpit_client import attach
    from t25_tui.api.server import make_api
    from tests.support.serving import CREDENTIAL, serving

    control = await env.open()
    await env.new()
    await env.new("Second")
    await env.work()
    app = make_api(control, worker_credential=CREDENTIAL, operator_token=None)
    async with (
        serving(app) as url,
        httpx.AsyncClient(
            base_url=url, timeout=30, headers=operator_headers(control.config.root)
        ) as client,
    ):
        bad = await client.post("/tasks/T-1/reset", json={"to": "DONE", "actor": "ana"})
        assert bad.status_code == 422
        done = await client.post(
            "/tasks/T-1/reset", json={"to": "QA", "actor": "ana", "reason": "check it again"}
        )
        assert done.status_code == 200 and done.json()["state"] == "QA"
        forward = await client.post("/tasks/T-1/reset", json={"to": "DOCS", "actor": "ana"})
        assert forward.status_code == 409 and "goes back, not forward" in forward.json()["error"]
        async with attach(url, local_token(control.config.root)) as remote:
            decision = Decision(verb=Verb.RESET, task="T-2", actor="bo", stage=S.REVIEW)
            assert (await remote.decide(decision)).state is S.REVIEW
    await env.close()
    shown = t25("reset", "T-2", "--to", "plan", "--reason", "rethink it", cwd=env.repo)
    assert shown.code == 0, shown.err
    assert shown.out.startswith("T-2  PLAN") and "recorded on commit:" in shown.out
    refused = t25("reset", "T-2", "--to", "merged", cwd=env.repo)
    assert refused.code == 2 and "invalid choice" in refused.err


async def test_cleanup_removes_what_a_merge_kept_and_what_landed_by_patch(env, t25):
    control = await env.open()
    for title in ("Kept at merge", "Squashed upstream", "Still open"):
        await env.new(title)
    await env.work()
    kept = control.worktrees("shop").path_for("T-1")
    (kept / "notes.txt").write_text("mine\n")  # untracked: the merge keeps the tree
    await control.merge("T-1", actor="ana")
    assert kept.exists()
    branch = (await env.task("T-2")).branch  # landed upstream by a squash merge
    git_sync("merge", "--squash", "-q", branch, cwd=env.repo)
    git_sync("commit", "-q", "-m", "squash T-2", cwd=env.repo)
    await env.close()

    dry = t25("cleanup", "--dry-run", cwd=env.repo)
    assert dry.code == 1, dry.err  # as the cleanup itself: one is kept
    trees = env.repo / ".factory" / "worktrees"
    assert dry.out.splitlines() == [
        (
            f"T-1  merged: would keep {trees / 'T-1'}: 1 untracked file(s): notes.txt; "
            "commit, move or delete them, then clean up again"
        ),
        (
            "T-2  feat/T-2's change is already in trunk (squash- or rebase-merged: merging it "
            f"would change nothing): would remove {trees / 'T-2'}"
        ),
    ]
    refused = t25("cleanup", cwd=env.repo)
    assert refused.code == 1 and "T-1  merged: kept" in refused.out and "notes.txt" in refused.out
    assert "T-2  feat/T-2's change is already in trunk" in refused.out and "removed" in refused.out
    (kept / "notes.txt").unlink()
    again = t25("cleanup", "T-1", cwd=env.repo)
    assert again.code == 0 and again.out.startswith("T-1  merged: removed"), again.out
    assert not kept.exists()
    snapshot = git_sync("rev-parse", "refs/t25/snapshots/T-1/1", cwd=env.repo)
    assert snapshot == git_sync("rev-parse", "feat/T-1", cwd=env.repo)
    assert t25("cleanup", cwd=env.repo).out == "nothing to clean up\n"
    assert (env.repo / ".factory" / "worktrees" / "T-3").exists()  # DONE, not landed: stays
