"""The branch under review is the branch T25 made, and a lost attempt changes nothing.

A real repository, the scripted agents and one in-process worker taken a run at a time, so
the test acts between two stages: it deletes the task branch, resets it to the default
branch, removes the worktree's directory, or leaves on the branch the commit of an attempt
whose lease was lost. Before, a deleted branch was recreated from the default branch (QA and
review approved "0 files, +0 -0"), a branch reset to main had DOCS commit the leftover file
as documentation, a removed directory failed every retry until `git worktree prune`, and a
second attempt built on the lost one's commit (the change twice).
"""

from __future__ import annotations

import shutil

import pytest

from core.domain.events import RunStarted
from core.domain.models import Lease, TaskState
from core.workspace.git import git_sync
from tests.support.pipeline import Env
from tests.support.waiting import until


async def _to(env: Env, ref: str, stage: TaskState):
    """The task run a stage at a time by one worker until it is in `stage` (its run queued)."""
    sweeper = env.sweeper(workers=1)
    worker = sweeper.pool.workers[0]
    for _ in range(20):
        await sweeper.sweep()
        task = await env.task(ref)
        if task.state is stage:
            return task, sweeper, worker
        assert await worker.run_once(), f"nothing to run in {task.state}: {task.error}"
    raise AssertionError(f"{ref} never reached {stage}")


async def _run_one(sweeper, worker) -> None:
    await sweeper.sweep()
    assert await worker.run_once()


def _changes(env: Env, branch: str) -> list[str]:
    """The lines the task's change adds, as the branch holds them against trunk."""
    diff = git_sync("diff", "--no-ext-diff", f"trunk...{branch}", cwd=env.repo)
    return [line for line in diff.splitlines() if line.startswith("+- ")]


@pytest.fixture
async def at_qa(env: Env):
    await env.open()
    task = await env.new()
    task, sweeper, worker = await _to(env, task.id, TaskState.QA)
    assert task.branch_head == git_sync("rev-parse", task.branch, cwd=env.repo)
    return task, sweeper, worker


async def test_a_deleted_task_branch_fails_the_next_run_and_is_not_made_anew(env, at_qa):
    task, sweeper, worker = at_qa
    git_sync("update-ref", "-d", f"refs/heads/{task.branch}", cwd=env.repo)
    await _run_one(sweeper, worker)
    failed = await env.task(task.id)
    assert failed.state is TaskState.FAILED
    assert failed.error.endswith(
        f"failed: {task.branch} was deleted outside T25: expected {task.branch_head[:12]}"
    )
    assert git_sync("branch", "--list", task.branch, cwd=env.repo) == ""


async def test_a_branch_reset_to_main_fails_the_next_run_naming_what_was_found(env, at_qa):
    task, sweeper, worker = at_qa
    trunk = git_sync("rev-parse", "trunk", cwd=env.repo)
    git_sync("reset", "-q", "--hard", "trunk", cwd=env.repo / ".factory" / "worktrees" / task.id)
    await _run_one(sweeper, worker)
    failed = await env.task(task.id)
    assert failed.state is TaskState.FAILED
    assert failed.error.endswith(
        f"failed: {task.branch} was moved outside T25: expected {task.branch_head[:12]}, "
        f"found {trunk[:12]} (trunk's head)"
    )


async def test_commits_added_on_top_by_the_operator_are_kept(env, at_qa):
    task, sweeper, worker = at_qa
    tree = env.repo / ".factory" / "worktrees" / task.id
    (tree / "NOTE.md").write_text("the operator's note\n")
    git_sync("add", "NOTE.md", cwd=tree)
    git_sync("commit", "-q", "-m", "operator's note", cwd=tree)
    head = git_sync("rev-parse", "HEAD", cwd=tree)
    await _run_one(sweeper, worker)
    moved = await env.task(task.id)
    assert moved.state is TaskState.REVIEW, moved.error
    assert moved.branch_head == head


async def test_a_removed_worktree_directory_is_made_again_from_its_branch(env, at_qa):
    task, sweeper, worker = at_qa
    shutil.rmtree(env.repo / ".factory" / "worktrees" / task.id)
    await _run_one(sweeper, worker)
    moved = await env.task(task.id)
    assert moved.state is TaskState.REVIEW, moved.error
    assert git_sync("rev-parse", task.branch, cwd=env.repo) == task.branch_head
    assert len(_changes(env, task.branch)) == 1


async def test_a_second_attempt_starts_where_t25_left_the_branch_not_on_a_lost_commit(env):
    """The first attempt of IMPLEMENTING committed and lost its lease before completing:
    the second sets that commit aside under refs/t25/archive/ and makes the change once."""
    control = await env.open()
    task = await env.new()
    task, sweeper, worker = await _to(env, task.id, TaskState.IMPLEMENTING)
    lease = await control.store.claim_run("lost", 0.05)  # the lost attempt's lease
    assert lease is not None
    started = RunStarted(task_id=task.id, run_id=lease.run_id, worker="lost", attempt=1)
    await control.record(started)  # its agent started, as its worker recorded
    tree = env.repo / ".factory" / "worktrees" / task.id
    (tree / "CHANGES.md").write_text("- the lost attempt's change\n")
    git_sync("add", "-A", cwd=tree)
    git_sync("commit", "-q", "-m", f"{task.id}: lost\n\nT25 run {lease.run_id}", cwd=tree)
    lost = git_sync("rev-parse", "HEAD", cwd=tree)
    await _expired(control, lease)
    await sweeper.sweep()  # the lapsed lease back to the queue, after a short delay

    async def second_attempt() -> bool:
        return await worker.run_once()

    await until(second_attempt, timeout=20, what="the second attempt claimed")
    moved = await env.task(task.id)
    assert moved.state is TaskState.QA, moved.error
    run = await control.run(lease.run_id)
    assert run.attempts == 2
    log = git_sync("log", "--format=%H", f"trunk..{task.branch}", cwd=env.repo).split()
    assert lost not in log and len(log) == 1
    archived = git_sync("for-each-ref", "--format=%(objectname)", "refs/t25/archive/", cwd=env.repo)
    assert lost in archived.split()


async def _expired(control, lease: Lease) -> None:
    """Until the store's clock is past the lease (bounded)."""

    async def past() -> bool:
        return await control.store.now() > lease.expires_at

    await until(past, timeout=10, what="the lost lease expired")
