"""`t25 serve` takes the tracker's issues in on its own (`projects[].intake.every_s`): a
labelled issue becomes a task, and closing it cancels the task, as intake's decision."""

from __future__ import annotations

from tests.support.fake_github import TOKEN, fake_github
from tests.support.pipeline import write_config
from tests.support.serve_process import serve_process
from tests.support.waiting import until

REPO = "acme/shop"


async def test_serve_files_a_labelled_issue_and_cancels_its_task_once_it_closes(shop, tmp_path):
    async with fake_github() as (fake, url):
        intake = {"repo": REPO, "label": "t25", "host": url, "every_s": 10}
        write_config(shop, projects=[{"name": "shop", "repo": ".", "intake": intake}])
        fake.file_issue(REPO, "Greet in French", labels=("t25",))
        env = {"GH_TOKEN": TOKEN}
        async with serve_process(shop, tmp_path, "--workers", "0", env=env) as serve:

            async def tasks() -> list[dict]:
                return (await serve.client.get("/tasks")).json()

            await until(tasks, what="the issue filed as a task")
            (task,) = await tasks()
            assert task["request_key"] == "github:acme/shop#1"
            assert task["title"] == "Greet in French"
            fake.repo(REPO).issues[1]["state"] = "closed"

            async def cancelled() -> bool:
                shown = (await serve.client.get(f"/tasks/{task['id']}")).json()["task"]
                return shown["state"] == "CANCELLED"

            await until(cancelled, timeout=90, what="the task cancelled once its issue closed")
        said = [c["body"] for c in fake.repo(REPO).comments[1]]
        assert f"task {task['id']}" in said[0] and "cancelled" in said[-1]
