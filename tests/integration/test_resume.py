"""A QA or review send-back continues the dev agent's CLI session (`resume: true`), with the
findings only; a session the CLI no longer has is not a failure: the run goes afresh, once,
with the whole prompt. The scripted agent keeps its sessions under $HOME like a real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.domain.models import ArtifactKind, Run, TaskState
from tests.support.operators import operator_headers
from tests.support.shapes import conforms

S = TaskState
# The CLI keeps its sessions in its own HOME: no private one, no sandbox.
RESUMING = {"adapter": "scripted", "resume": True, "sandbox": "none"}


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The HOME the scripted agent keeps its sessions in, of this test only."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    return path


async def dev_runs_and_prompts(control, task_id: str) -> tuple[list[Run], list[str]]:
    runs = [r for r in await control.store.list_runs(task_id=task_id) if r.role == "dev"]
    prompts = [
        (await control.store.get_artifact(a.id))[1].decode()
        for a in await control.store.list_artifacts(task_id=task_id)
        if a.meta.kind is ArtifactKind.PROMPT and a.meta.role == "dev"
    ]
    return runs, prompts


async def test_a_review_send_back_continues_the_dev_session_with_the_findings_only(env, home, t25):
    control = await env.open(roles={"dev": [RESUMING]})
    task = await env.new(description="scripted: review=changes-once\nscripted: sessions=keep")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE, task.error
    (first, second), (whole, continued) = await dev_runs_and_prompts(control, task.id)
    assert first.session_id and first.resumed_session is None
    assert second.resumed_session == first.session_id == second.session_id
    assert "## This conversation goes on" in continued
    assert "The change needs another round." in continued  # the review's finding
    assert "## Plan" in whole and "## Plan" not in continued and "## Spec" not in continued
    assert len(continued) < len(whole)
    kept = (home / ".t25-scripted-agent" / "sessions" / f"{first.session_id}.json").read_text()
    assert "## Plan" in kept and "## This conversation goes on" in kept  # one conversation
    changes = env.repo / ".factory" / "worktrees" / task.id / "changes" / f"{task.id}.md"
    assert "round 2" in changes.read_text()
    shown = conforms("task-show", t25("task", "show", task.id, "--json", cwd=env.repo).out)
    dev = [r for r in shown["runs"] if r["role"] == "dev"]
    assert [(r["session_id"], r["resumed_session"]) for r in dev] == [
        (first.session_id, None),
        (first.session_id, first.session_id),
    ]
    text = t25("task", "show", task.id, cwd=env.repo).out
    assert f"session: {first.session_id} (continued {first.session_id})" in text


async def test_a_session_the_cli_no_longer_has_is_run_afresh_with_the_whole_prompt(env):
    control = await env.open(roles={"dev": [RESUMING]})
    task = await env.new(description="scripted: review=changes-once")  # sessions not kept
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE, task.error
    (first, second), (_, sent) = await dev_runs_and_prompts(control, task.id)
    assert second.status.value == "succeeded" and second.attempts == 1
    assert second.resumed_session is None and second.session_id != first.session_id
    assert f"could not continue session {first.session_id} of {first.id}" in (
        second.adapter_reason or ""
    )
    assert "No conversation found" in (second.adapter_reason or "")
    assert "## Plan" in sent and "The change needs another round." in sent  # the whole prompt


async def test_without_resume_a_send_back_starts_a_fresh_session(env):
    control = await env.open()  # resume: false, the default
    task = await env.new(description="scripted: review=changes-once\nscripted: sessions=keep")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE, task.error
    (first, second), (_, sent) = await dev_runs_and_prompts(control, task.id)
    assert second.resumed_session is None and second.session_id != first.session_id
    assert "## Plan" in sent and "could not continue" not in (second.adapter_reason or "")


async def test_a_qa_send_back_continues_with_the_failing_checks_and_an_answer_does_not(env):
    fails = {"checks": [{"name": "always-fails", "run": ["false"]}]}
    control = await env.open(roles={"dev": [RESUMING]}, qa=fails)
    task = await env.new(description="scripted: sessions=keep")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.NEEDS_INPUT  # the QA loop is spent: a human is asked
    (first, second), (_, continued) = await dev_runs_and_prompts(control, task.id)
    assert second.resumed_session == first.session_id
    assert "QA sent your change back" in continued and "## Failing checks to fix" in continued
    assert "always-fails: failed" in continued
    # An operator's answer is not a send-back: the next dev run starts afresh with it.
    await control.answer(task.id, "Skip that check.", actor="ana")
    await env.work()
    runs, prompts = await dev_runs_and_prompts(control, task.id)
    assert runs[2].resumed_session is None and "## Plan" in prompts[2]


def test_a_results_sessions_cross_the_wire_whole_and_only_as_ids():
    from pydantic import ValidationError

    from core.domain.agent import AgentResult
    from core.domain.reports import RunReport
    from t25_tui.api.bodies import RunReportSent

    result = AgentResult(adapter="claude", session_id="6cbb9fc9-7a5c", resumed_session="ab-1")
    report = RunReport(result=result).model_dump(mode="json")
    assert RunReport.model_validate(RunReportSent.model_validate(report).model_dump()) == (
        RunReport(result=result)
    )
    report["result"]["resumed_session"] = "--dangerously-bypass-approvals-and-sandbox"
    with pytest.raises(ValidationError):
        RunReportSent.model_validate(report)


def test_a_remote_worker_continues_the_session_and_serve_keeps_it(shop, home, tmp_path):
    import os
    import signal
    import subprocess
    import sys

    import httpx

    from tests.support.pipeline import write_config
    from tests.support.serving import CREDENTIAL
    from tests.support.waiting import answers, free_port, wait_until

    write_config(shop, roles={"dev": [RESUMING]})
    port, url = free_port(), ""
    env = {**os.environ, "FACTORY_WORKER_CREDENTIAL": CREDENTIAL, "HOME": str(home)}
    cmd = [sys.executable, "-m", "t25_tui"]
    serve = subprocess.Popen(
        [*cmd, "serve", "--bind", f"127.0.0.1:{port}"],
        cwd=shop,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = None
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: answers(url))
        worker = subprocess.Popen(
            [*cmd, "worker", "--url", url],
            cwd=shop,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        description = "scripted: review=changes-once\nscripted: sessions=keep"
        with httpx.Client(base_url=url, timeout=10, headers=operator_headers(shop)) as client:
            filed = client.post("/tasks", json={"title": "Resumed", "description": description})
            assert filed.status_code == 201
            wait_until(
                lambda: client.get("/tasks/T-1").json()["task"]["state"] == "DONE", timeout=90
            )
            runs = [r for r in client.get("/tasks/T-1").json()["runs"] if r["role"] == "dev"]
        first, second = runs
        assert first["session_id"] and first["resumed_session"] is None
        assert second["resumed_session"] == first["session_id"] == second["session_id"]
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=30) == 0
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=30)


async def test_only_a_send_backs_first_attempt_continues_the_last_dev_session(env):
    from core.control.pipeline import Pipeline
    from core.domain.models import ResumableSession, RunOutcome, RunStatus

    control = await env.open()
    store = control.store

    async def finish_queued(session_id: str | None = None) -> None:
        while lease := await store.claim_run("w", 30):
            done = RunOutcome(status=RunStatus.SUCCEEDED, adapter="claude", session_id=session_id)
            await store.complete_run(lease, done)

    task = await env.new()
    for stage in (S.SPEC, S.PLAN, S.IMPLEMENTING):
        task = await control.enter(task, stage, actor="t25")
    await finish_queued("sess-1")
    first = next(r for r in await store.list_runs(task_id=task.id) if r.stage is S.IMPLEMENTING)
    task = await control.enter(task, S.QA, actor="t25")
    await finish_queued()
    task = await control.enter(task, S.IMPLEMENTING, actor="t25", qa_loops=1)
    lease = await store.claim_run("w", 30)
    run = await store.get_run(lease.run_id)
    pipeline = Pipeline(control)
    assert await pipeline.resumable(run, task) == ResumableSession(
        run_id=first.id, adapter="claude", session_id="sess-1"
    )
    lost_before = run.model_copy(update={"attempts": 2})
    assert await pipeline.resumable(lost_before, task) is None
    rewound = task.model_copy(update={"rewind_to": "0" * 40})
    assert await pipeline.resumable(run, rewound) is None
    assert await pipeline.resumable(first, task) is None  # no dev run before it
