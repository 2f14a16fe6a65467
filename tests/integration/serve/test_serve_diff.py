"""`GET /tasks/{id}/diff`: the diff `t25 diff` reads, over REST, and the attached cockpit's read."""

from __future__ import annotations

import httpx

from t25_tui.api.credentials import local_token
from t25_tui.api.server import make_api
from tests.support.operators import operator_headers
from tests.support.pipeline import Env
from tests.support.serving import CREDENTIAL, serving


async def test_a_tasks_diff_over_rest_whole_by_attempt_and_stat_only(shop):
    from t25_tui.api.cockpit_client import attach

    env = Env(shop)
    control = await env.open()
    try:
        await env.new("Greeting")
        await env.work()
        local = await control.diff("T-1")
        assert local.source == "git" and local.files and local.text.startswith("diff --git")
        app = make_api(control, worker_credential=CREDENTIAL, operator_token=None)
        async with (
            serving(app) as url,
            httpx.AsyncClient(
                base_url=url, timeout=10, headers=operator_headers(control.config.root)
            ) as client,
        ):
            whole = (await client.get("/tasks/T-1/diff")).json()
            assert whole["text"] == local.text and whole["attempt"] is None
            assert [f["path"] for f in whole["files"]] == [f.path for f in local.files]
            stat = (await client.get("/tasks/T-1/diff", params={"stat": "true"})).json()
            assert stat["text"] == "" and all(f["text"] == "" for f in stat["files"])
            assert sum(f["insertions"] for f in stat["files"]) == local.insertions > 0
            one = (await client.get("/tasks/T-1/diff", params={"attempt": 1})).json()
            assert one["attempt"] == 1 and one["run_id"].startswith("R-") and one["text"]
            missing = await client.get("/tasks/T-1/diff", params={"attempt": 2})
            assert missing.status_code == 404 and "no implementing attempt 2" in missing.text
            assert (await client.get("/tasks/T-9/diff")).status_code == 404
            assert (await client.get("/tasks/T-1/diff", params={"attempt": 0})).status_code == 422
            assert "/tasks/{ref}/diff" in (await client.get("/openapi.json")).json()["paths"]
            async with attach(url, local_token(control.config.root)) as remote:
                assert await remote.diff("T-1") == local
                assert (await remote.diff("T-1", attempt=1, stat=True)).text == ""
    finally:
        await env.close()
