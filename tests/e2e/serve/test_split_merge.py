"""The split layout: `t25 serve` on a host with no checkout of the repository, workers on
the hosts that have one. A merge decided at serve is made by a worker, as a leased run of
role `merge`, and its result (the merge, or the refusal) comes back to the operator.

Serve and the worker run as real processes on loopback; serve's `t25.yaml` names a
directory that holds no checkout with the task's branch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from core.control import merge_decisions
from core.domain.decisions import Decision
from core.domain.models import MERGE_ROLE, RunStatus, Task
from core.domain.verbs import Verb
from core.errors import MergeRefused, PolicyRefused
from core.workspace.git import git_sync
from tests.support.operators import operator_headers
from tests.support.pipeline import Env, write_config
from tests.support.repos import make_repo
from tests.support.sealed import passed_review
from tests.support.serving import CREDENTIAL
from tests.support.waiting import answers, free_port, wait_until

CMD = [sys.executable, "-m", "t25_tui"]
ENV = {**os.environ, "FACTORY_WORKER_CREDENTIAL": CREDENTIAL}
# Passes on the task branch; fails once MERGE_FAILS is on trunk (a merge brings it in). It
# writes a JUnit XML report of its one test case, which T25 reads and removes.
REPORT = "<testsuite><testcase name='guard'/></testsuite>"
GUARDED = [
    sys.executable,
    "-c",
    (
        f"import os, sys; open('guard.xml', 'w').write({REPORT!r}); "
        "sys.exit(os.path.exists('MERGE_FAILS'))"
    ),
]


@contextmanager
def split(shop: Path, tmp_path: Path, *, remote: Path | None = None):
    """Serve in a directory of its own (its `shop` an empty directory), one worker in the
    repository `shop`; an HTTP client of serve."""
    checks = {"checks": [{"name": "guard", "run": GUARDED, "junit": "guard.xml"}]}
    write_config(shop, qa=checks)
    home = tmp_path / "serve-host"
    (home / "shop").mkdir(parents=True)
    project = {"name": "shop", "repo": "./shop", "default_branch": "trunk"}
    write_config(home, projects=[project], qa=checks)
    if remote is not None:
        git_sync("init", "--quiet", "--bare", str(remote), cwd=tmp_path)
        git_sync("remote", "add", "origin", str(remote), cwd=shop)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    serve = subprocess.Popen(
        [*CMD, "serve", "--bind", f"127.0.0.1:{port}"], cwd=home, env=ENV, **quiet
    )
    worker = subprocess.Popen(
        [*CMD, "worker", "--url", url, "--lease-ttl", "5", "--heartbeat", "0.5"],
        cwd=shop,
        env=ENV,
        start_new_session=True,
        **quiet,
    )
    try:
        wait_until(lambda: answers(url))
        with httpx.Client(base_url=url, timeout=120, headers=operator_headers(home)) as client:
            yield client
    finally:
        for p in (worker, serve):
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)


def _done(client: httpx.Client, ref: str) -> bool:
    return client.get(f"/tasks/{ref}").json()["task"]["state"] == "DONE"


def test_a_merge_decided_at_serve_without_the_checkout_is_made_by_a_worker(shop, tmp_path):
    remote = tmp_path / "origin.git"
    with split(shop, tmp_path, remote=remote) as client:
        client.post("/tasks", json={"title": "Add a greeting"})
        wait_until(lambda: _done(client, "T-1"), timeout=120, what="T-1 DONE")
        before = git_sync("rev-parse", "trunk", cwd=shop)
        reviewed = client.get("/tasks/T-1").json()["task"]["reviewed_head"]
        merged = client.post("/tasks/T-1/merge", json={"actor": "ana", "reason": "ship it"})
        assert merged.status_code == 200, merged.text
        assert merged.json()["merged"] is True
        detail = client.get("/tasks/T-1").json()
        jobs = [r for r in detail["runs"] if r["role"] == MERGE_ROLE]
        assert [(j["stage"], j["status"]) for j in jobs] == [("DONE", "succeeded")]
        # the worker's trial checks' figures, kept at serve as the default branch's
        kept = [a["meta"] for a in detail["artifacts"] if a["meta"]["kind"] == "merge_checks"]
        assert [a["run_id"] for a in kept] == [jobs[0]["id"]]
        assert detail["checks"][0]["figures"]["passed"] == 1
        assert detail["baseline"]["branch"] == "trunk"
        assert detail["baseline"]["figures"]["guard"]["passed"] == 1
        audit = client.get("/audit").json()
        assert audit["verified"] is True
        assert [e["decision"] for e in audit["entries"]] == ["merge"]
        assert audit["entries"][0]["bound_to"] == f"commit:{reviewed}"
        again = client.post("/tasks/T-1/merge", json={"actor": "ana"})
        assert again.status_code == 409  # merged: nothing to merge twice
    head = git_sync("rev-parse", "trunk", cwd=shop)
    parents = git_sync("rev-list", "--parents", "-n", "1", head, cwd=shop).split()[1:]
    assert parents == [before, reviewed]  # the very commit review approved, merged here
    assert git_sync("rev-parse", "refs/heads/trunk", cwd=remote) == head  # and pushed
    assert not (shop / ".factory" / "worktrees" / "T-1").exists()  # its worktree removed
    stubbed = tmp_path / "serve-host" / "shop"
    assert list(stubbed.iterdir()) == []  # serve touched no checkout of its own


def test_a_merge_the_worker_refuses_comes_back_to_the_operator_and_changes_nothing(shop, tmp_path):
    with split(shop, tmp_path) as client:
        client.post("/tasks", json={"title": "Add a greeting"})
        wait_until(lambda: _done(client, "T-1"), timeout=120, what="T-1 DONE")
        (shop / "MERGE_FAILS").write_text("trunk moved on\n")
        git_sync("add", "MERGE_FAILS", cwd=shop)
        git_sync("commit", "-q", "-m", "a change the merge's checks fail on", cwd=shop)
        before = git_sync("rev-parse", "trunk", cwd=shop)
        refused = client.post("/tasks/T-1/merge", json={"actor": "ana"})
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert "refused on the worker" in error and "fails the required QA check guard" in error
        task = client.get("/tasks/T-1").json()["task"]
        assert task["merged"] is False and task["state"] == "DONE"
        audit = client.get("/audit").json()
        assert audit["verified"] is True
        assert [e["decision"] for e in audit["entries"]] == ["merge", "void"]
        assert audit["entries"][1]["voids"] == audit["entries"][0]["seq"]
    assert git_sync("rev-parse", "trunk", cwd=shop) == before


async def test_a_merge_no_worker_takes_is_taken_off_the_queue_and_voided(tmp_path, monkeypatch):
    """A control plane with no checkout and no worker: after MERGE_CLAIM_WAIT_S the merge
    is refused, its run cancelled, its line voided; a second one is not refused as under way."""
    repo = make_repo(tmp_path / "repo")
    env = Env(repo)
    control = await env.open()
    try:
        monkeypatch.setattr(merge_decisions, "MERGE_CLAIM_WAIT_S", 0.5)
        task = await env.new()
        reviewed = git_sync("rev-parse", "HEAD", cwd=repo)
        task = await control.store.get_task(task.id)
        task = await passed_review(control, task, reviewed)
        # feat/T-1 was never made here: this process has no checkout with the branch.
        with pytest.raises(MergeRefused, match="no worker took the merge of T-1"):
            await control.merge(task.id, actor="ana")
        runs = await control.store.list_runs(task_id=task.id)
        assert [(r.role, r.status) for r in runs] == [(MERGE_ROLE, RunStatus.CANCELLED)]
        entries = control.audit.entries()
        assert [e.decision for e in entries] == ["merge", "void"]
        assert (await control.audit.verify()).ok
        assert not (await control.task(task.id)).merged
        # A merge under way is not queued twice.
        run = await control.merge_by_worker(  # queue one, do not wait for it
            Decision(verb=Verb.MERGE, task=task.id, actor="ana")
        )
        with pytest.raises(PolicyRefused, match=f"already under way \\({run.id}\\)"):
            await control.merge(task.id, actor="bo")
    finally:
        await env.close()


async def test_a_merge_an_earlier_attempt_landed_is_found_not_made_twice(shop):
    """A worker that died after moving the default branch: the next attempt finds it."""
    from core.workspace.merging import merged_already
    from core.workspace.worktrees import Worktrees

    worktrees = Worktrees(shop, shop / ".factory" / "worktrees", "trunk", owner="test")
    git_sync("switch", "-q", "-c", "feat/T-1", cwd=shop)
    git_sync("commit", "--allow-empty", "-q", "-m", "the change", cwd=shop)
    reviewed = git_sync("rev-parse", "HEAD", cwd=shop)
    git_sync("switch", "-q", "trunk", cwd=shop)
    task = Task.model_validate(
        {
            "id": "T-1",
            "project": "shop",
            "title": "t",
            "type": "feat",
            "created_at": "2026-01-01T00:00:00Z",
            "state_since": "2026-01-01T00:00:00Z",
            "reviewed_head": reviewed,
        }
    )
    assert await merged_already(worktrees, task) is None
    git_sync("merge", "-q", "--no-ff", "-m", "landed", "feat/T-1", cwd=shop)
    assert await merged_already(worktrees, task) == git_sync("rev-parse", "trunk", cwd=shop)
