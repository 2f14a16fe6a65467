"""`t25 merge --dry-run` tries the merge with nothing touched (`git merge-tree`): it names the
files a merge would conflict in, says when the branch adds nothing to the default branch,
and otherwise how the merge would be made. Real repositories, the scripted agent, the real
`t25` command line."""

from __future__ import annotations

from core.domain.models import TaskState
from core.workspace.git import git_sync


async def test_a_dry_run_names_conflicts_and_a_branch_that_adds_nothing(env, t25):
    await env.open()
    task = await env.new(description="a change")
    await env.work()
    task = await env.task(task.id)
    assert task.state is TaskState.DONE
    await env.close()
    repo = env.repo
    changed = git_sync("diff", "--name-only", f"trunk...{task.branch}", cwd=repo).splitlines()
    assert changed
    start = git_sync("rev-parse", "trunk", cwd=repo)

    clean = t25("merge", task.id, "--dry-run", cwd=repo)
    assert clean.code == 0, clean.err
    assert f"would be       merged as a merge commit onto trunk at {start[:12]}" in clean.out

    for name in changed:  # the default branch changes the same files its own way
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("trunk's own version\n")
    git_sync("add", "-A", cwd=repo)
    git_sync("commit", "-q", "-m", "trunk moves on", cwd=repo)
    conflicting = t25("merge", task.id, "--dry-run", cwd=repo)
    assert conflicting.code == 1
    assert f"would be       refused: conflicts in {', '.join(sorted(changed))}" in conflicting.out
    assert git_sync("status", "--porcelain", cwd=repo) == ""  # nothing touched

    git_sync("reset", "-q", "--hard", start, cwd=repo)
    git_sync("merge", "-q", "--squash", task.branch, cwd=repo)  # taken in by hand
    git_sync("commit", "-q", "-m", "squashed", cwd=repo)
    empty = t25("merge", task.id, "--dry-run", cwd=repo)
    assert empty.code == 1
    assert f"refused: nothing to merge: {task.branch} adds nothing to trunk" in empty.out
