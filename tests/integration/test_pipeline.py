"""The whole pipeline, end to end: real git repositories, real agent processes (the
scripted agent), the real SQLite store, the in-process lease workers."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from core.control.service import ControlPlane
from core.domain.decisions import Decision
from core.domain.events import ApprovalRequested, InputRequested, RunStarted, TaskTransitioned
from core.domain.models import ArtifactKind, RunStatus, TaskState, TaskType
from core.domain.verbs import Verb
from core.errors import PolicyRefused
from core.workspace.git import git_sync
from tests.support.pipeline import (
    REVIEWING,
    ROLES,
    SCRIPTED,
    Env,
    review_prompt,
    trunk_log,
    working_in,
)
from tests.support.repos import make_repo

S = TaskState


async def test_a_task_goes_from_received_to_done_and_a_human_merges_it(env):
    control = await env.open()
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE, task.error
    assert await env.history(task.id) == [
        S.SPEC,
        S.PLAN,
        S.IMPLEMENTING,
        S.QA,
        S.REVIEW,
        S.PR_OPEN,
        S.DOCS,
        S.DONE,
    ]
    assert task.checks_passed is True and task.review_verdict == "approve"

    kinds = {a.meta.kind for a in await control.store.list_artifacts(task_id=task.id)}
    assert {
        ArtifactKind.SPEC,
        ArtifactKind.PLAN,
        ArtifactKind.DIFF,
        ArtifactKind.QA_REPORT,
        ArtifactKind.REVIEW,
        ArtifactKind.DOCS,
        ArtifactKind.LOG,
        ArtifactKind.PROMPT,
    } <= kinds
    runs = await control.store.list_runs(task_id=task.id)
    assert {r.role for r in runs} == {"spec", "planner", "dev", "qa", "reviewer", "pr", "docs"}
    assert all(r.status is RunStatus.SUCCEEDED for r in runs)
    agent_runs = [r for r in runs if r.role != "pr"]
    assert all(
        r.adapter == "scripted" and r.cli_version and r.usage.input_tokens > 0 for r in agent_runs
    )
    assert all(r.cost_usd > 0 for r in agent_runs)
    # each run keeps the tokens of its model requests as the agent reported them
    assert all(r.requests == (r.usage,) for r in agent_runs)

    # the agent worked in the task's own worktree, on its own branch
    worktree = env.repo / ".factory" / "worktrees" / task.id
    assert git_sync("branch", "--show-current", cwd=worktree) == "feat/T-1"
    assert not (env.repo / "changes").exists()

    task = await control.merge(task.id, actor="ana")
    assert task.merged
    assert (env.repo / "changes" / "T-1.md").read_text().startswith("- T-1")
    assert trunk_log(env.repo)[0].startswith("Merge feat/T-1")
    assert not worktree.exists()  # clean after the merge: removed, never forced
    assert [e.decision for e in control.audit.entries()] == ["merge"]
    assert (await control.audit.verify()).ok


async def test_a_high_risk_plan_waits_for_approval_and_the_approval_records_its_hash(env):
    control = await env.open()
    task = await env.new(description="Touches auth.\nscripted: risk=high")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.AWAITING_APPROVAL
    requested = [
        e
        for e in await control.store.events_after(0, task_id=task.id)
        if isinstance(e, ApprovalRequested)
    ]
    assert len(requested) == 1 and requested[0].risk == "high"

    with pytest.raises(PolicyRefused, match="a merge needs DONE"):
        await control.merge(task.id, actor="ana")

    task = await control.approve(task.id, actor="ana", reason="looks right")
    assert task.state is S.IMPLEMENTING
    assert task.approved_plan_sha == requested[0].plan_sha256
    await env.work()
    assert (await env.task(task.id)).state is S.DONE
    entry = control.audit.entries()[0]
    assert (entry.decision, entry.actor, entry.reason) == ("approve", "ana", "looks right")


async def test_a_rejected_plan_goes_back_to_plan_with_the_reason_in_the_next_prompt(env):
    control = await env.open()
    task = await env.new(description="scripted: risk=high")
    await env.work()
    with pytest.raises(PolicyRefused, match="needs a reason"):
        await control.reject(task.id, actor="ana", reason=" ")
    task = await control.reject(task.id, actor="ana", reason="Split the migration out")
    assert task.state is S.PLAN
    await env.work()
    prompts = [
        a
        for a in await control.store.list_artifacts(task_id=task.id)
        if a.meta.kind is ArtifactKind.PROMPT and a.meta.role == "planner"
    ]
    _, latest = await control.store.get_artifact(prompts[-1].id)
    assert "Split the migration out" in latest.decode()


async def test_review_sends_the_task_back_once_with_its_findings_then_passes(env):
    control = await env.open()
    task = await env.new(description="scripted: review=changes-once")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE, task.error
    assert task.review_loops == 1
    assert await env.history(task.id) == [
        S.SPEC,
        S.PLAN,
        S.IMPLEMENTING,
        S.QA,
        S.REVIEW,
        S.IMPLEMENTING,
        S.QA,
        S.REVIEW,
        S.PR_OPEN,
        S.DOCS,
        S.DONE,
    ]
    dev_prompts = [
        a
        for a in await control.store.list_artifacts(task_id=task.id)
        if a.meta.kind is ArtifactKind.PROMPT and a.meta.role == "dev"
    ]
    _, second = await control.store.get_artifact(dev_prompts[1].id)
    assert "The change needs another round." in second.decode()


async def test_the_diff_limit_stops_the_task_with_the_numbers(env):
    # Each implementation round adds one line; the second round crosses a one-line limit.
    await env.open(limits={"max_diff_lines": 1})
    task = await env.new(description="scripted: review=changes-once")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.FAILED
    assert "diff limits exceeded" in task.error and "2 lines (limit 1)" in task.error
    assert task.resume_state is S.IMPLEMENTING


async def test_a_failing_check_loops_back_then_asks_a_human(env):
    checks = {
        "checks": [{"name": "always-fails", "run": [sys.executable, "-c", "raise SystemExit(3)"]}]
    }
    control = await env.open(qa=checks)
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.NEEDS_INPUT and task.resume_state is S.IMPLEMENTING
    assert task.qa_loops == 1 and task.checks_passed is False
    with pytest.raises(PolicyRefused, match="a merge needs DONE"):
        await control.merge(task.id, actor="ana")
    # The answer grants one more round: the dev agent, with the answer, then QA again.
    await control.answer(task.id, "skip the flaky network test", actor="ana")
    assert (await env.task(task.id)).state is S.IMPLEMENTING
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.NEEDS_INPUT and task.qa_loops == 1  # it failed again: asks again
    runs = await control.store.list_runs(task_id=task.id)
    assert [r.stage for r in runs if r.stage in (S.IMPLEMENTING, S.QA)] == [
        S.IMPLEMENTING,
        S.QA,
        S.IMPLEMENTING,
        S.QA,
        S.IMPLEMENTING,
        S.QA,
    ]
    prompts = [
        content.decode()
        for a in await control.store.list_artifacts(task_id=task.id)
        if a.meta.kind is ArtifactKind.PROMPT
        for _, content in [await control.store.get_artifact(a.id)]
    ]
    dev_prompts = [p for p in prompts if p.startswith("T25-STAGE: IMPLEMENTING")]
    assert "skip the flaky network test" in dev_prompts[-1]
    assert "skip the flaky network test" not in dev_prompts[-2]


async def test_an_unparseable_answer_fails_the_task_and_keeps_the_raw_output(env):
    control = await env.open(
        roles={"planner": [{"adapter": "scripted", "args": ["--misbehave", "garbage"]}]}
    )
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.FAILED
    plan_run = next(
        r for r in await control.store.list_runs(task_id=task.id) if r.role == "planner"
    )
    assert task.error.startswith(f"PLAN run {plan_run.id}: the answer did not parse")
    assert "no JSON object" in task.error
    logs = [
        a
        for a in await control.store.list_artifacts(task_id=task.id)
        if a.meta.kind is ArtifactKind.LOG and a.meta.run_id == plan_run.id
    ]
    _, raw = await control.store.get_artifact(logs[0].id)
    assert b"I will not say which" in raw
    # not retried silently: exactly one planner run
    assert sum(r.role == "planner" for r in await control.store.list_runs(task_id=task.id)) == 1


@pytest.mark.parametrize("sandbox", ["none", "auto"])
async def test_a_hung_agent_is_killed_at_its_timeout_with_everything_it_started(env, sandbox):
    hang = {"adapter": "scripted", "args": ["--misbehave", "hang"], "timeout_s": 2}
    control = await env.open(roles={"dev": [hang]}, sandbox=sandbox)
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.FAILED and "timed out after 2" in task.error
    dev = next(r for r in await control.store.list_runs(task_id=task.id) if r.role == "dev")
    log = await _log(control, dev.id)
    child = next(json.loads(line)["pid"] for line in log.splitlines() if '"spawned"' in line)
    if sandbox == "none":
        assert not _alive(child)
    # Sandboxed, the pid is the namespace's own: no process is left working in the tree.
    assert not working_in(control.config.worktrees.root)


async def test_quota_on_the_first_adapter_falls_back_to_the_second(env):
    quota = [{"adapter": "scripted", "args": ["--misbehave", "quota"]}, {"adapter": "scripted-b"}]
    chains = {role: [SCRIPTED, {"adapter": "scripted-b"}] for role in ROLES}
    # Every adapter but the exhausted one wrote the change: only the quota is under test here.
    control = await env.open(
        roles={**chains, "spec": quota}, policies={"reviewer_differs_from_author": "off"}
    )
    task = await env.new()
    await env.work()
    assert (await env.task(task.id)).state is S.DONE
    runs = await control.store.list_runs(task_id=task.id)
    spec = next(r for r in runs if r.role == "spec")
    assert spec.adapter == "scripted-b"
    assert "scripted: quota exhausted" in spec.adapter_reason
    # the exhausted adapter is skipped until its reset, by every role
    plan = next(r for r in runs if r.role == "planner")
    assert plan.adapter == "scripted-b" and "scripted: quota exhausted until" in plan.adapter_reason
    started = [
        e
        for e in await control.store.events_after(0, task_id=task.id)
        if isinstance(e, RunStarted) and e.run_id == spec.id
    ]
    assert [e.adapter for e in started] == ["scripted", "scripted-b"]


@pytest.mark.parametrize("sandbox", ["none", "auto"])
async def test_an_agent_writing_outside_its_worktree_is_refused_or_asked_about(env, sandbox):
    control = await env.open(
        roles={"dev": [{"adapter": "scripted", "args": ["--misbehave", "escape"]}]},
        sandbox={"mode": sandbox, "tree_at": "worktree"},
    )
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    dev = next(r for r in await control.store.list_runs(task_id=task.id) if r.role == "dev")
    if sandbox == "none":  # the second fence: the fingerprint; whose write, T25 cannot tell
        assert task.state is S.DONE and dev.status is RunStatus.SUCCEEDED, task.error
        assert "yours? new file ESCAPED_BY_AGENT.txt" in (task.violation or ""), task.violation
        with pytest.raises(PolicyRefused, match="until what changed outside its worktree"):
            await control.merge(task.id, actor="ana")
    else:  # the first: the write never happens
        assert task.state is S.FAILED and dev.status is RunStatus.FAILED
        assert "ESCAPED_BY_AGENT.txt" in task.error
        assert "Read-only file system" in task.error
        assert not (env.repo / "ESCAPED_BY_AGENT.txt").exists()


async def test_an_agent_seeing_its_tree_at_the_checkouts_path_reaches_no_main_checkout(env):
    """With the view, the checkout's path shows the task's tree and git's own files are a
    read-only copy elsewhere: the main checkout is nowhere in the agent's sight, so the
    escape lands in the sandbox's throwaway /run, and the checkout is untouched."""
    await env.open(
        roles={"dev": [{"adapter": "scripted", "args": ["--misbehave", "escape"]}]},
        sandbox={"mode": "required", "tree_at": "checkout"},
    )
    before = git_sync("status", "--porcelain", "--ignored", cwd=env.repo)
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE, task.error
    assert not (env.repo / "ESCAPED_BY_AGENT.txt").exists()
    assert git_sync("status", "--porcelain", "--ignored", cwd=env.repo) == before


async def test_cancel_while_a_run_is_going_stops_the_agent(env):
    slow = {"adapter": "scripted", "args": ["--misbehave", "slow:60"]}
    control = await env.open(roles={"dev": [slow]})
    task = await env.new()
    sub = control.bus.subscribe()
    sweeper = env.sweeper()
    working = asyncio.create_task(sweeper.work(follow=True))
    try:
        while True:
            event = await asyncio.wait_for(sub.get(), 60)
            if isinstance(event, RunStarted) and event.adapter and event.task_id == task.id:
                run = await control.store.get_run(event.run_id)
                if run.role == "dev":
                    break
        await control.cancel(task.id, actor="ana", reason="changed my mind")
        for _ in range(200):
            if not any(w.busy for w in sweeper.pool.workers):
                break
            await asyncio.sleep(0.05)
        assert not any(w.busy for w in sweeper.pool.workers)
    finally:
        working.cancel()
        await asyncio.gather(working, return_exceptions=True)
    task = await env.task(task.id)
    assert task.state is S.CANCELLED
    dev = next(r for r in await control.store.list_runs(task_id=task.id) if r.role == "dev")
    assert dev.status is RunStatus.CANCELLED


async def test_a_question_waits_for_an_answer_and_the_answer_reaches_the_agent(env):
    control = await env.open()
    task = await env.new(description="scripted: question=Which endpoint?")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.NEEDS_INPUT and task.resume_state is S.SPEC
    task = await control.answer(task.id, "The login endpoint", actor="ana")
    assert task.state is S.SPEC
    await env.work()
    assert (await env.task(task.id)).state is S.DONE
    assert [e.decision for e in control.audit.entries()] == ["answer"]


async def test_two_tasks_run_at_once_on_separate_worktrees(env):
    control = await env.open()
    first, second = await env.new("One"), await env.new("Two", type=TaskType.FIX)
    await env.work(workers=2)
    for ref in (first.id, second.id):
        assert (await env.task(ref)).state is S.DONE
    await control.merge(first.id, actor="ana")
    await control.merge(second.id, actor="ana")
    assert sorted(p.name for p in (env.repo / "changes").iterdir()) == ["T-1.md", "T-2.md"]
    assert [line.split()[1] for line in trunk_log(env.repo)[:2]] == ["fix/T-2:", "feat/T-1:"]


async def _log(control: ControlPlane, run_id: str) -> str:
    found = [
        a
        for a in await control.store.list_artifacts()
        if a.meta.kind is ArtifactKind.LOG and a.meta.run_id == run_id
    ]
    _, content = await control.store.get_artifact(found[0].id)
    return content.decode()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "zombie" not in status.read_text()


async def test_a_configured_security_role_reviews_after_the_reviewer_and_can_send_back(env):
    security = {**REVIEWING, "args": ["--misbehave", "review-changes-once"]}
    control = await env.open(roles={"security": [security]})
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE and task.review_loops == 1
    review_roles = [
        r.role for r in await control.store.list_runs(task_id=task.id) if r.stage is S.REVIEW
    ]
    assert review_roles == ["reviewer", "security", "reviewer", "security"]
    security_prompt = next(
        a
        for a in await control.store.list_artifacts(task_id=task.id)
        if a.meta.kind is ArtifactKind.PROMPT and a.meta.role == "security"
    )
    _, text = await control.store.get_artifact(security_prompt.id)
    assert "T25-ROLE: security" in text.decode()


async def test_configured_rates_price_a_run_and_a_clis_own_figure_counts_only_without_one(env):
    from core.control.pipeline import Pipeline
    from core.domain.agent import AgentResult
    from core.domain.models import Usage

    control = await env.open()  # rates: scripted-1 at $3 in / $15 out per million tokens
    pipeline = Pipeline(control)
    usage = Usage(input_tokens=1_000_000, output_tokens=0, model="scripted-1")
    priced = AgentResult(adapter="scripted", usage=usage, cost_usd=99.0)
    assert pipeline._cost(priced, "scripted-1") == 3.0
    unpriced = AgentResult(
        adapter="claude", usage=usage.model_copy(update={"model": "x"}), cost_usd=0.42
    )
    assert pipeline._cost(unpriced, "x") == 0.42
    assert pipeline._cost(AgentResult(adapter="claude"), "x") == 0.0


async def test_a_merge_takes_only_the_commit_review_approved(env):
    """A commit on the task branch after review (a docs agent's, another task's agent's)
    is refused at merge, naming it, with nothing written; the reviewed head merges, and
    the merge's audit line is bound to it."""
    control = await env.open()
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE and task.reviewed_head
    reviewed = task.reviewed_head
    assert git_sync("rev-parse", task.branch, cwd=env.repo) == reviewed
    trunk = git_sync("rev-parse", "trunk", cwd=env.repo)

    worktree = control.config.worktrees.root / task.id
    (worktree / "late.txt").write_text("after review\n")
    git_sync("add", "late.txt", cwd=worktree)
    git_sync("commit", "-qm", "a change nobody reviewed", cwd=worktree)
    with pytest.raises(PolicyRefused, match="has moved since review approved") as refused:
        await control.merge(task.id, actor="ana")
    assert "1 new commit(s)" in str(refused.value) and "a change nobody reviewed" in str(
        refused.value
    )
    assert git_sync("rev-parse", "trunk", cwd=env.repo) == trunk
    assert control.audit.entries() == []  # refused before anything was written

    assert f"t25 recheck {task.id}" in refused.value.hint  # the way forward is offered

    # Sent back through QA and review, the branch as it is now is what the merge takes.
    late = git_sync("rev-parse", task.branch, cwd=env.repo)
    rechecked = await control.recheck(task.id, actor="ana", reason="a late commit")
    assert rechecked.state is S.QA and rechecked.reviewed_head is None
    assert not rechecked.checks_passed
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE and task.reviewed_head == late
    assert (await env.history(task.id))[-5:] == [S.QA, S.REVIEW, S.PR_OPEN, S.DOCS, S.DONE]
    merged = await control.merge(task.id, actor="ana")
    assert merged.merged
    line = control.audit.entries()[-1]
    assert line.decision == "merge" and line.bound_to == f"commit:{late}"
    assert late in git_sync("rev-list", "--parents", "-n", "1", "trunk", cwd=env.repo)
    assert (env.repo / "late.txt").exists()
    with pytest.raises(PolicyRefused, match="only a DONE task that is not merged"):
        await control.recheck(task.id, actor="ana")


async def test_a_merge_whose_result_fails_a_qa_check_leaves_the_default_branch_where_it_was(
    env,
):
    """The task passed its checks, and so does the default branch; the two together do not.
    The checks run on the merge's result before the default branch moves, so nothing does."""
    control = await env.open()
    task = await env.new()
    await env.work()
    assert (await env.task(task.id)).state is S.DONE
    (env.repo / "test_guard.py").write_text(
        "import os, unittest\n\n\nclass G(unittest.TestCase):\n"
        "    def test_no_changes_dir(self):\n"
        "        self.assertFalse(os.path.exists('changes'))\n"
    )
    git_sync("add", "test_guard.py", cwd=env.repo)
    git_sync("commit", "-qm", "a guard the task's change breaks", cwd=env.repo)
    trunk = git_sync("rev-parse", "trunk", cwd=env.repo)

    with pytest.raises(PolicyRefused, match="fails the required QA check unit") as refused:
        await control.merge(task.id, actor="ana")
    assert "trunk is unchanged" in str(refused.value)
    assert git_sync("rev-parse", "trunk", cwd=env.repo) == trunk
    assert git_sync("status", "--porcelain", cwd=env.repo) == ""
    assert control.audit.entries() == []  # refused before anything was written
    assert not (await env.task(task.id)).merged
    trials = control.config.worktrees.root / ".merge"
    assert not any(trials.iterdir())  # the trial worktree is gone
    assert ".merge" not in git_sync("worktree", "list", cwd=env.repo)

    git_sync("rm", "-q", "test_guard.py", cwd=env.repo)
    git_sync("commit", "-qm", "drop the guard", cwd=env.repo)
    merged = await control.merge(task.id, actor="ana")
    assert merged.merged
    tip = git_sync("rev-parse", "trunk", cwd=env.repo)
    parents = git_sync("rev-list", "--parents", "-n", "1", tip, cwd=env.repo).split()[1:]
    assert parents == [git_sync("rev-parse", "trunk~1", cwd=env.repo), merged.reviewed_head]
    assert (env.repo / "changes" / "T-1.md").exists()  # the main checkout moved with it


async def test_protected_paths_are_flagged_in_review_and_a_merge_must_name_each(env):
    control = await env.open()
    task = await env.new(description="scripted: touch=.github/workflows/ci.yml,docs/CLAUDE.md")
    plain = await env.new("Another greeting")
    await env.work()
    task, plain = await env.task(task.id), await env.task(plain.id)
    assert task.state is S.DONE and plain.state is S.DONE, (task.error, plain.error)
    assert task.protected_paths == (".github/workflows/ci.yml", "docs/CLAUDE.md")
    assert plain.protected_paths == ()
    review = await review_prompt(control, task.id)
    assert "## Protected paths touched" in review
    assert ".github/workflows/ci.yml\ndocs/CLAUDE.md" in review
    assert "## Protected paths touched" not in await review_prompt(control, plain.id)

    with pytest.raises(PolicyRefused) as refused:
        await control.merge(task.id, actor="ana")
    assert "does not name: .github/workflows/ci.yml, docs/CLAUDE.md" in refused.value.message
    assert refused.value.hint.endswith(
        f"t25 merge {task.id} --allow-path .github/workflows/ci.yml --allow-path docs/CLAUDE.md"
    )
    with pytest.raises(PolicyRefused) as refused:
        await control.merge(task.id, actor="ana", allow_paths=["docs/CLAUDE.md"])
    assert "does not name: .github/workflows/ci.yml" in refused.value.message
    assert not (await env.task(task.id)).merged and control.audit.entries() == []

    task = await control.merge(
        task.id,
        actor="ana",
        reason="the CI change is wanted",
        allow_paths=["docs/CLAUDE.md", ".github/workflows/ci.yml"],
    )
    assert task.merged and (env.repo / ".github" / "workflows" / "ci.yml").is_file()
    plain = await control.merge(plain.id, actor="ana")  # nothing protected: nothing to name
    assert plain.merged
    merged, unprotected = control.audit.entries()
    assert merged.reason == (
        "the CI change is wanted; protected paths: .github/workflows/ci.yml, docs/CLAUDE.md"
    )
    assert merged.bound_to == f"commit:{task.reviewed_head}"
    assert unprotected.reason == ""
    assert (await control.audit.verify()).ok


async def test_review_passes_over_the_profile_that_wrote_the_change_and_says_why(env):
    # The default rule (model): the reviewer chain's first profile is the dev's own.
    control = await env.open(roles={"reviewer": [SCRIPTED, {"adapter": "scripted-b"}]})
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE, task.error
    runs = await control.store.list_runs(task_id=task.id)
    review = next(r for r in runs if r.stage is S.REVIEW)
    assert review.adapter == "scripted-b" and review.status is RunStatus.SUCCEEDED
    assert review.adapter_reason.startswith(
        "scripted: wrote the change (policies.reviewer_differs_from_author: model); "
        "scripted-b for reviewer"
    )
    started = [
        e
        for e in await control.store.events_after(0, task_id=task.id, limit=10_000)
        if isinstance(e, RunStarted) and e.run_id == review.id
    ]
    assert "scripted: wrote the change" in started[-1].adapter_reason


async def test_adapter_rule_passes_over_another_model_of_the_authors_cli(env):
    control = await env.open(
        roles={"reviewer": [REVIEWING, {"adapter": "scripted-b"}]},
        policies={"reviewer_differs_from_author": "adapter"},
    )
    task = await env.new()
    await env.work()
    assert (await env.task(task.id)).state is S.DONE
    runs = await control.store.list_runs(task_id=task.id)
    assert [r.adapter for r in runs if r.stage is S.REVIEW] == ["scripted-b"]


async def test_with_no_reviewer_but_the_author_the_task_asks_and_off_lets_it_review(env):
    control = await env.open(roles={"reviewer": [SCRIPTED]})
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.NEEDS_INPUT and task.resume_state is S.REVIEW
    asked = [
        e
        for e in await control.store.events_after(0, task_id=task.id, limit=10_000)
        if isinstance(e, InputRequested)
    ]
    assert asked[-1].question == (
        "no agent of roles.reviewer differs from the author of the change "
        "(policies.reviewer_differs_from_author: model): scripted: wrote the change "
        "(policies.reviewer_differs_from_author: model). Add a profile to roles.reviewer "
        "whose adapter or model differs, or set policies.reviewer_differs_from_author: off; "
        "then answer to run the review again."
    )
    review = [r for r in await control.store.list_runs(task_id=task.id) if r.stage is S.REVIEW]
    assert [(r.status, r.adapter, r.error) for r in review] == [
        (RunStatus.FAILED, None, asked[-1].question)
    ]
    await env.close()

    again = Env(env.repo)  # the operator turns the rule off and answers
    try:
        control = await again.open(
            roles={"reviewer": [SCRIPTED]}, policies={"reviewer_differs_from_author": "off"}
        )
        await control.answer(task.id, "reviewed by the same model is fine here", actor="ana")
        await again.work()
        assert (await again.task(task.id)).state is S.DONE
    finally:
        await again.close()


async def test_a_change_over_the_new_dependency_budget_fails_naming_them(env):
    control = await env.open(limits={"max_new_dependencies": 1})
    (env.repo / "requirements.txt").write_text("requests\n")  # on trunk: not new
    git_sync("add", "requirements.txt", cwd=env.repo)
    git_sync("commit", "-q", "-m", "requirements", cwd=env.repo)
    within = await env.new(description="scripted: dependencies=Requests,rich")
    over = await env.new("Two more", description="scripted: dependencies=rich,httpx")
    await env.work()
    within, over = await env.task(within.id), await env.task(over.id)
    assert within.state is S.DONE, within.error
    assert over.state is S.FAILED
    assert over.error == (
        "dependency budget exceeded: the change adds 2 dependencies (limit 1): "
        "requirements.txt: httpx, requirements.txt: rich"
    )
    moves = [
        e
        for e in await control.store.events_after(0, task_id=within.id, limit=10_000)
        if isinstance(e, TaskTransitioned) and e.to_state is S.QA
    ]
    assert "new dependencies: requirements.txt: rich" in moves[-1].reason


async def test_a_documentation_commit_is_what_the_merge_takes(env):
    """DOCS's change is committed by T25; touching documentation only, on the very commit
    review approved, it is what the merge takes (before, it was left uncommitted in the
    worktree: never merged, and the worktree never cleaned)."""
    control = await env.open()
    task = await env.new(description="scripted: docs=README.md")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE, task.error
    docs = git_sync("rev-parse", task.branch, cwd=env.repo)
    assert task.reviewed_head == docs
    assert git_sync("log", "-1", "--format=%s", docs, cwd=env.repo) == f"{task.id}: documentation"
    reviewed = git_sync("rev-parse", f"{docs}~1", cwd=env.repo)
    assert git_sync("diff", "--name-only", reviewed, docs, cwd=env.repo) == "README.md"
    merged = await control.merge(task.id, actor="ana")
    assert merged.merged
    assert (env.repo / "README.md").read_text() == f"Documented {task.id}.\n"
    assert not (control.config.worktrees.root / task.id).exists()  # nothing left behind


async def test_a_docs_change_beyond_documentation_goes_through_qa_and_review(env):
    control = await env.open()
    task = await env.new(description="scripted: docs=tools.cfg")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE, task.error
    history = await env.history(task.id)
    assert history[-6:] == [S.DOCS, S.QA, S.REVIEW, S.PR_OPEN, S.DOCS, S.DONE]
    moved = [
        e
        for e in await control.store.events_after(0, task_id=task.id, limit=1000)
        if isinstance(e, TaskTransitioned) and e.to_state is S.QA and e.from_state is S.DOCS
    ]
    assert "changed more than documentation (tools.cfg)" in moved[0].reason
    tip = git_sync("rev-parse", task.branch, cwd=env.repo)
    assert task.reviewed_head == tip  # review judged the docs commit itself
    assert (await control.merge(task.id, actor="ana")).merged
    assert (env.repo / "tools.cfg").read_text() == f"Documented {task.id}.\n"


async def test_a_docs_commit_on_a_protected_path_must_be_named_at_merge(env):
    """`AGENTS.md` is markdown, but protected: the docs stage changing it is no documentation
    change, and the merge names it like any protected path an implementation touched."""
    control = await env.open()
    task = await env.new(description="scripted: docs=AGENTS.md")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE, task.error
    assert task.protected_paths == ("AGENTS.md",)
    with pytest.raises(PolicyRefused, match=r"AGENTS\.md"):
        await control.merge(task.id, actor="ana")
    merged = await control.decide(
        Decision(verb=Verb.MERGE, task=task.id, actor="ana", allow_paths=("AGENTS.md",))
    )
    assert merged.merged


async def test_each_project_works_under_its_own_roles_limits_and_checks(env, tmp_path):
    """Two projects, one t25.yaml: the second's `roles`, `limits` and `qa` replace the
    top-level ones for its tasks alone (its dev runs another adapter, its checks fail)."""
    other = make_repo(tmp_path / "other", branch="trunk")
    failing = [sys.executable, "-c", "raise SystemExit('the strict check fails')"]
    control = await env.open(
        projects=[
            {"name": "shop", "repo": "."},
            {
                "name": "strict",
                "repo": str(other),
                "roles": {"dev": [{"adapter": "scripted-b"}]},
                "limits": {"max_qa_loops": 0},
                "qa": {"checks": [{"name": "strict", "run": failing}]},
            },
        ]
    )
    plain = await control.new_task("Plain", actor="ana", project="shop")
    strict = await control.new_task("Strict", actor="ana", project="strict")
    await env.work()
    assert (await env.task(plain.id)).state is S.DONE
    strict = await env.task(strict.id)
    assert strict.state is S.NEEDS_INPUT  # its own check failed, its own loop bound spent
    runs = {r.task_id: r for r in await control.store.list_runs() if r.role == "dev"}
    assert (runs[plain.id].adapter, runs[strict.id].adapter) == ("scripted", "scripted-b")
    qa = [r for r in await control.store.list_runs(task_id=strict.id) if r.role == "qa"]
    assert len(qa) == 1  # max_qa_loops 0: no second round
    report = [
        a
        for a in await control.store.list_artifacts(task_id=strict.id)
        if a.meta.kind is ArtifactKind.QA_REPORT
    ]
    _, content = await control.store.get_artifact(report[-1].id)
    assert [c["name"] for c in json.loads(content)["checks"]] == ["strict"]


async def test_a_report_told_again_after_its_first_telling_stopped_short_is_decided_once(
    env, tmp_path
):
    """The first telling recorded the run and its process stopped before deciding (a serve
    replica killed, the store gone): the report told again decides it — no stage run
    twice by the stall check — and told a third time decides nothing more."""
    from core.control.pipeline import Pipeline
    from core.domain.agent import AgentResult, RunLog
    from core.domain.reports import RunReport

    said = tmp_path / "said.log"
    said.write_bytes(b"said\n")
    log = RunLog(path=said, size=5, sha256=hashlib.sha256(b"said\n").hexdigest())
    control = await env.open()
    task = await control.enter(await env.new(), S.SPEC, actor="t25")
    lease = await control.store.claim_run("w1", 30.0)
    spec = {"summary": "Greet", "acceptance_criteria": ["it greets"]}
    result = AgentResult(adapter="scripted", final_text=json.dumps(spec), log=log)
    report = RunReport(result=result, prompt="write the spec")
    pipeline = Pipeline(control)
    await control.store.complete_run(lease, pipeline._outcome(report))  # then it stopped
    assert (await env.task(task.id)).state is S.SPEC
    decided = await pipeline.complete(lease, report)
    assert decided is not None and decided.state is S.PLAN
    assert (await pipeline.complete(lease, report)).state is S.PLAN  # nothing more
    runs = await control.store.list_runs(task_id=task.id)
    assert [(r.stage, r.status) for r in runs] == [
        (S.SPEC, RunStatus.SUCCEEDED),
        (S.PLAN, RunStatus.QUEUED),
    ]
    kinds = [a.meta.kind for a in await control.store.list_artifacts(task_id=task.id)]
    assert sorted(kinds) == sorted([ArtifactKind.PROMPT, ArtifactKind.LOG, ArtifactKind.SPEC])
    assert await env.history(task.id) == [S.SPEC, S.PLAN]


async def test_a_prompt_lists_the_tasks_artifacts_once_and_reads_the_newest_of_each_kind(
    env, monkeypatch
):
    from core.control.pipeline import Pipeline

    control = await env.open()
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    runs = {r.stage: r for r in await control.store.list_runs(task_id=task.id)}
    pipeline = Pipeline(control)
    listings: list[str | None] = []
    real = type(control.store).list_artifacts

    async def counted(self, *, task_id=None, **kw):
        listings.append(task_id)
        return await real(self, task_id=task_id, **kw)

    monkeypatch.setattr(type(control.store), "list_artifacts", counted)
    prompt = await pipeline.prompt_for(runs[S.REVIEW], task)  # spec, plan, diff, QA report

    assert listings == [task.id]
    assert "T25-ROLE: reviewer" in prompt and "diff --git" in prompt
