"""`t25 serve` and a `t25 worker` on serve's own checkout are one installation: the worktree
the worker made is removed by the merge serve makes, and `t25 cleanup --dry-run` says what
`t25 cleanup` then does. A worker still adopts what it made under its former name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx

from core.workspace.worktrees import Worktrees
from tests.support.git import make_task, new_repo
from tests.support.operators import operator_headers
from tests.support.pipeline import write_config
from tests.support.waiting import answers, free_port, wait_until

CREDENTIAL = "shared-checkout-secret"
CMD = [sys.executable, "-m", "t25_tui"]


def _cleanup(shop, *flags: str) -> tuple[int, str]:
    done = subprocess.run(
        [*CMD, "cleanup", *flags], cwd=shop, capture_output=True, text=True, timeout=60
    )
    return done.returncode, done.stdout


def test_a_merge_removes_the_worktree_a_worker_on_serves_checkout_made(shop):
    write_config(shop)
    port = free_port()
    env = {**os.environ, "FACTORY_WORKER_CREDENTIAL": CREDENTIAL}
    quiet = {"cwd": shop, "env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    serve = subprocess.Popen([*CMD, "serve", "--bind", f"127.0.0.1:{port}"], **quiet)
    worker = None
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: answers(url))
        worker = subprocess.Popen([*CMD, "worker", "--url", url], **quiet)
        with httpx.Client(base_url=url, timeout=30, headers=operator_headers(shop)) as client:
            assert client.post("/tasks", json={"title": "Over the wire"}).status_code == 201
            wait_until(
                lambda: client.get("/tasks/T-1").json()["task"]["state"] == "DONE", timeout=90
            )
            tree = shop / ".factory" / "worktrees" / "T-1"
            assert tree.is_dir()  # the worker's, made on serve's checkout
            merged = client.post("/tasks/T-1/merge", json={})
            assert merged.status_code == 200 and merged.json()["merged"] is True
        assert not tree.exists()
    finally:
        for proc in (worker, serve):
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
    said, done = _cleanup(shop, "--dry-run"), _cleanup(shop)
    assert said == done == (0, "nothing to clean up\n")


async def test_a_worktree_made_under_a_former_name_is_adopted_and_cleaned_up(tmp_path):
    repo = new_repo(tmp_path / "repo")
    root = repo / ".factory" / "worktrees"
    await Worktrees(repo, root, "trunk", owner="url-hash").ensure(make_task())
    named = Worktrees(repo, root, "trunk", owner="store-hash", former=("url-hash",))
    assert await named.ensure(make_task()) == named.path_for("T-1")
    assert (await named.cleanup(make_task(), dry_run=True)).removed
    assert (await named.cleanup(make_task())).removed
