"""What an operator sees before deciding: the approval's spec, plan and hash, earlier
rejections and answers and the cost left; the merge's commits, diff, checks, review rounds
and protected paths. Real repositories, the scripted agent, the real `t25` command line."""

from __future__ import annotations

import json

from core.domain.models import ArtifactKind, TaskState
from core.workspace.git import git_sync

S = TaskState
EVERY_RISK = {"require_for_risk": ["low", "medium", "high"]}


async def test_the_approval_shows_the_spec_the_plan_its_hash_the_past_and_the_cost_left(env, t25):
    control = await env.open()
    await env.new("Done before")  # past runs to estimate from
    await env.work()
    await env.close()
    control = await env.open(approval=EVERY_RISK)
    task = await env.new("Add a greeting")
    await env.work()
    assert (await env.task(task.id)).state is S.AWAITING_APPROVAL
    await control.reject(task.id, actor="ana", reason="smaller steps, please")
    await env.work()

    found = await control.approval_evidence(task.id)
    plans = [
        a
        for a in await control.store.list_artifacts(task_id=task.id)
        if a.meta.kind is ArtifactKind.PLAN
    ]
    assert found.plan_sha256 == f"sha256:{plans[-1].sha256}"
    assert found.spec is not None and found.spec.acceptance_criteria
    assert found.plan is not None and found.plan.steps
    assert found.rejections == ("smaller steps, please",)
    assert [e.stage for e in found.estimate] == ["IMPLEMENTING", "QA", "REVIEW", "DOCS"]
    assert all(e.runs >= 1 and e.priced for e in found.estimate)
    assert found.estimate_line().startswith("$")
    await env.close()

    shown = t25("task", "show", task.id, cwd=env.repo)
    assert shown.code == 0, shown.err
    assert "approval" in shown.out and "rejected   smaller steps, please" in shown.out
    assert f"t25 approve {task.id} --plan {found.plan_sha256}" in shown.out


async def test_the_estimate_counts_the_loops_a_past_task_went_through(env):
    """A past task sent back once by review ran dev twice: the dearest end of the range is
    its two runs, the cheapest a task that ran dev once."""
    control = await env.open()
    await env.new("Went straight through")
    await env.new(description="scripted: review=changes-once")
    await env.work()
    dev = [r for r in await control.store.list_runs() if r.role == "dev"]
    assert len(dev) == 3 and all(r.cost_usd > 0 for r in dev)
    by_task = {r.task_id: [d.cost_usd for d in dev if d.task_id == r.task_id] for r in dev}
    waiting = await env.new("Next")
    implementing = (await control.approval_evidence(waiting.id)).estimate[0]
    assert implementing.stage == "IMPLEMENTING" and implementing.runs == 3
    assert implementing.high_usd == max(sum(costs) for costs in by_task.values())
    assert implementing.low_usd == min(sum(costs) for costs in by_task.values())
    assert implementing.high_usd > max(r.cost_usd for r in dev)
    await env.close()


async def test_the_merge_shows_what_it_takes_and_a_dry_run_merges_nothing(env, t25):
    control = await env.open(policies={"protected_paths": ["package.json"]})
    task = await env.new(description="scripted: review=changes-once scripted: touch=package.json")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE
    found = await control.merge_evidence(task.id)
    assert found.reviewed_head == task.reviewed_head and found.default_branch == "trunk"
    assert found.commits and all(len(c.split(" ", 1)[0]) >= 7 for c in found.commits)
    assert found.diff_stat is not None and "package.json" in found.diff_stat.files
    assert [c.name for c in found.checks] == ["unit"] and found.checks[0].passed
    assert [r.outcome for r in found.rounds] == ["sent back to the dev agent", "approved"]
    assert found.protected_paths == ("package.json",) and found.refusal is None
    await env.close()
    before = git_sync("rev-parse", "trunk", cwd=env.repo)

    dry = t25("merge", task.id, "--dry-run", cwd=env.repo)
    assert dry.code == 0, dry.err
    assert dry.out.startswith(f"merge {task.branch} into trunk")
    assert "review 1" in dry.out and "sent back to the dev agent" in dry.out
    assert "protected      package.json (name each: --allow-path)" in dry.out
    as_json = json.loads(t25("merge", task.id, "--dry-run", "--json", cwd=env.repo).out)
    assert as_json["reviewed_head"] == task.reviewed_head and as_json["refusal"] is None
    assert git_sync("rev-parse", "trunk", cwd=env.repo) == before  # nothing merged

    path = env.repo / ".factory" / "worktrees" / task.id
    git_sync("commit", "--allow-empty", "-q", "-m", "after review", cwd=path)
    moved = t25("merge", task.id, "--dry-run", cwd=env.repo)
    assert moved.code == 1 and "has moved since review approved" in moved.out
