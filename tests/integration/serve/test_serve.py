"""`t25 serve` over a real HTTP server on loopback, with a real HTTP client; and the whole
pipeline run by `t25 worker` processes leasing over HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import httpx
import pytest

from core.domain.decisions import Decision
from core.domain.models import Author, Lease, RunOutcome, RunStatus, TaskState
from core.domain.verbs import Verb
from t25_tui.api.credentials import local_token
from t25_tui.api.server import make_api
from tests.support.operators import operator_headers
from tests.support.pipeline import Env, write_config
from tests.support.serving import CREDENTIAL, WORKER, serving
from tests.support.waiting import answers, free_port, wait_until


@pytest.fixture
async def api(shop):
    env = Env(shop)
    control = await env.open()
    app = make_api(control, worker_credential=CREDENTIAL, operator_token=None)
    ops = operator_headers(control.config.root)
    async with (
        serving(app) as url,
        httpx.AsyncClient(base_url=url, timeout=10, headers=ops) as client,
    ):
        yield control, client
    await env.close()


async def test_tasks_and_decisions_over_rest_land_in_the_audit(api):
    _, client = api
    assert (await client.get("/health")).json()["ok"] is True
    made = await client.post(
        "/tasks", json={"title": "Add a greeting", "type": "fix", "actor": "ana"}
    )
    assert made.status_code == 201 and made.json()["id"] == "T-1"
    assert [t["id"] for t in (await client.get("/tasks")).json()] == ["T-1"]
    refused = await client.post("/tasks/T-1/retry", json={"actor": "ana"})
    assert refused.status_code == 409
    assert refused.json()["error"] == "T-1 is RECEIVED; only a FAILED task can be retried"
    cancelled = await client.post("/tasks/T-1/cancel", json={"actor": "ana", "reason": "no"})
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "CANCELLED"
    audit = (await client.get("/audit")).json()
    assert audit["verified"] and [e["decision"] for e in audit["entries"]] == ["cancel"]
    detail = (await client.get("/tasks/T-1")).json()
    assert detail["task"]["state"] == "CANCELLED" and detail["cost"]["total_usd"] == 0
    assert "/tasks/{ref}/approve" in (await client.get("/openapi.json")).json()["paths"]


async def test_a_merge_over_rest_names_each_protected_path_and_the_cockpit_sends_them(shop):
    from t25_tui.api.cockpit_client import attach

    env = Env(shop)
    control = await env.open()
    try:
        await env.new(description="scripted: touch=package.json,.mcp.json")
        await env.new("Second")
        await env.work()
        app = make_api(control, worker_credential=CREDENTIAL, operator_token=None)
        ops = operator_headers(control.config.root)
        async with (
            serving(app) as url,
            httpx.AsyncClient(base_url=url, timeout=10, headers=ops) as client,
        ):
            detail = (await client.get("/tasks/T-1")).json()
            assert detail["task"]["protected_paths"] == [".mcp.json", "package.json"]
            refused = await client.post("/tasks/T-1/merge", json={"allow_paths": [".mcp.json"]})
            assert refused.status_code == 409
            assert refused.json()["error"].endswith("does not name: package.json")
            bad = await client.post("/tasks/T-1/merge", json={"allow_paths": ["a\x1bb"]})
            assert bad.status_code in (400, 422)
            merged = await client.post(
                "/tasks/T-1/merge",
                json={"actor": "ana", "allow_paths": ["package.json", ".mcp.json"]},
            )
            assert merged.status_code == 200 and merged.json()["merged"] is True
            async with attach(url, local_token(control.config.root)) as remote:
                task = await remote.task("T-2")
                await control.update(task, actor="t25", protected_paths=("yarn.lock",))
                decision = Decision(
                    verb=Verb.MERGE, task="T-2", actor="bo", allow_paths=("yarn.lock",)
                )
                assert (await remote.decide(decision)).merged
        reasons = [e.reason for e in control.audit.entries()]
        assert reasons == ["protected paths: .mcp.json, package.json", "protected paths: yarn.lock"]
    finally:
        await env.close()


async def test_a_remote_worker_claiming_a_review_learns_who_wrote_the_change(shop):
    from t25_tui.api.worker_client import HttpRunQueue

    env = Env(shop)
    control = await env.open(roles={"reviewer": [{"adapter": "scripted"}]})
    try:
        task = await env.new()
        await env.work()  # no reviewer but the author: it asks
        assert (await env.task(task.id)).state is TaskState.NEEDS_INPUT
        await control.answer(task.id, "look again", actor="ana")  # a REVIEW run is queued
        app = make_api(control, worker_credential=CREDENTIAL, operator_token=None)
        async with serving(app) as url:
            runs = HttpRunQueue(url, CREDENTIAL)
            try:
                claim = await runs.claim("remote-1", 30)
                assert claim is not None and claim.run.stage is TaskState.REVIEW
                assert claim.authors == (Author(adapter="scripted", models=("scripted-1",)),)
                await runs.release(claim.lease)
            finally:
                await runs.close()
    finally:
        await env.close()


async def test_bad_input_gets_a_4xx_with_a_json_error(api):
    _, client = api
    assert (await client.get("/tasks/T-99")).status_code == 404
    assert (await client.get("/tasks/nonsense")).json()["error"] == "'nonsense' is not a task id"
    bad = await client.post("/tasks", json={"title": "", "surprise": 1})
    assert bad.status_code == 422 and set(bad.json()) == {"error", "hint", "code"}
    assert "title" in bad.json()["error"] and "surprise" not in bad.json()["error"]
    garbage = await client.post(
        "/tasks", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert garbage.status_code == 422 and "not valid JSON" in garbage.json()["error"]
    huge = await client.post(
        "/tasks", content=b"x" * (65 * 2**20), headers={"content-type": "application/json"}
    )
    assert huge.status_code == 413 and set(huge.json()) == {"error", "hint", "code"}


async def test_a_cost_since_a_time_takes_rfc3339_text_with_its_offset_only(api):
    _, client = api
    for refused in (
        "0.5",
        "1733529600",
        "2026-12-07T00:00:00",
        "2026-12-07",
        "2026-13-07T00:00:00Z",
    ):
        answer = await client.get("/cost", params={"since": refused})
        assert answer.status_code == 422 and "since" in answer.json()["error"], refused
    for taken in ("2026-12-07T00:00:00Z", "2026-12-07T00:00:00.5+01:00"):
        assert (await client.get("/cost", params={"since": taken})).status_code == 200, taken
    document = (await client.get("/openapi.json")).json()
    since = document["paths"]["/cost"]["get"]["parameters"][0]["schema"]["anyOf"][0]
    assert since == {"type": "string", "format": "date-time"}


async def test_worker_endpoints_need_the_credential(api):
    _, client = api
    assert (await client.post("/worker/claim", json={"worker": "w"})).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert (
        await client.post("/worker/claim", json={"worker": "w"}, headers=wrong)
    ).status_code == 401
    assert (
        await client.post("/worker/claim", json={"worker": "w"}, headers=WORKER)
    ).status_code == 204


async def test_beyond_loopback_operators_need_a_token(shop):
    env = Env(shop)
    control = await env.open()
    with pytest.raises(Exception, match="T25_OPERATOR_TOKEN"):
        make_api(control, worker_credential=CREDENTIAL, operator_token=None, loopback=False)
    app = make_api(control, worker_credential=CREDENTIAL, operator_token="op-token", loopback=False)
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
        assert (await client.get("/tasks")).status_code == 401
        ok = await client.get("/tasks", headers={"Authorization": "Bearer op-token"})
        assert ok.status_code == 200
    await env.close()


async def test_a_stale_lease_gets_409_and_nothing_it_sends_is_attached(api):
    control, client = api
    await control.new_task("Add a greeting", actor="ana")
    task = await control.task("T-1")
    await control.enter(task, task.state.__class__("SPEC"), actor="t25")
    claim = (
        await client.post("/worker/claim", json={"worker": "w1", "ttl_s": 30}, headers=WORKER)
    ).json()
    lease = claim["lease"]
    await control.cancel("T-1", actor="ana")  # the token goes stale
    stale = {"lease": lease, "ttl_s": 30}
    assert (await client.post("/worker/heartbeat", json=stale, headers=WORKER)).status_code == 409
    out = {"lease": lease, "events": [{"kind": "run_output", "stream": "stdout", "text": "late"}]}
    assert (await client.post("/worker/events", json=out, headers=WORKER)).status_code == 409
    report = {"lease": lease, "report": {"note": "late"}}
    assert (await client.post("/worker/complete", json=report, headers=WORKER)).status_code == 409
    run = await control.store.get_run(lease["run_id"])
    assert run.status is RunStatus.CANCELLED
    texts = [
        e for e in await control.store.events_after(0, task_id="T-1") if e.kind == "run_output"
    ]
    assert texts == []


async def test_a_task_filed_again_under_its_request_key_is_filed_once(api):
    """A client that sends its filing again (its first reply was lost) gets the task the
    first request filed, and the store holds one task and one TaskCreated."""
    control, client = api
    body = {"title": "Add a greeting", "request_key": "cockpit-5e1d"}
    first = await client.post("/tasks", json=body)
    again = await client.post("/tasks", json=body)
    assert first.status_code == again.status_code == 201
    assert first.json()["id"] == again.json()["id"]
    assert [t.id for t in await control.tasks()] == [first.json()["id"]]
    created = [e for e in await control.store.events_after(0) if e.kind == "task_created"]
    assert len(created) == 1
    bad = await client.post("/tasks", json={**body, "request_key": "no spaces"})
    assert bad.status_code == 422


async def test_a_batch_sent_again_to_another_serve_is_kept_once(api):
    """A batch kept by one serve that died before answering is sent again, under the same
    key, to another serve on the same store (a replica, or the first restarted), which has
    no memory of it: each event is kept once all the same, by its place in the outbox."""
    control, client = api
    task = await control.new_task("Add a greeting", actor="ana")
    await control.enter(task, task.state.__class__("SPEC"), actor="t25")
    claim = (await client.post("/worker/claim", json={"worker": "w1"}, headers=WORKER)).json()
    started = {"kind": "run_started", "worker": "w1", "seq": 1}
    said = [
        {"kind": "run_output", "stream": "stdout", "text": "same line", "seq": n} for n in (2, 3)
    ]
    batch = {"lease": claim["lease"], "ttl_s": 30, "events": [started, *said]}
    other = make_api(control, worker_credential=CREDENTIAL, operator_token=None)
    async with serving(other) as url, httpx.AsyncClient(base_url=url, timeout=10) as replica:
        for to in (client, replica):
            key = {**WORKER, "Idempotency-Key": "batch-1", "T25-Retry": "2"}
            assert (await to.post("/worker/events", json=batch, headers=key)).status_code == 204
        later = {**batch, "events": [{**said[0], "seq": 4}]}  # the same text, a new event
        assert (await replica.post("/worker/events", json=later, headers=WORKER)).status_code == 204
    kept = await control.store.events_after(0, task_id=task.id)
    assert [e.kind for e in kept if e.run_id].count("run_started") == 1
    assert [getattr(e, "text", None) for e in kept].count("same line") == 3


async def test_a_lease_presented_by_another_worker_gets_409_and_nothing_it_sends_is_kept(api):
    """A token names one claim in the store and is good only from the worker it was given
    to: worker-2 can neither use worker-1's live token under its own name nor finish
    worker-1's run with its own token (once both were 1: per-run counters)."""
    control, client = api
    for title in ("Add a greeting", "Add a farewell"):
        task = await control.new_task(title, actor="ana")
        await control.enter(task, task.state.__class__("SPEC"), actor="t25")

    async def claim(worker: str) -> dict:
        body = {"worker": worker, "ttl_s": 30}
        return (await client.post("/worker/claim", json=body, headers=WORKER)).json()["lease"]

    one, two = await claim("worker-1"), await claim("worker-2")
    assert one["token"] != two["token"]
    impostor = {**one, "worker": "worker-2"}
    crossed = {**two, "run_id": one["run_id"], "task_id": one["task_id"]}
    for lease in (impostor, crossed):
        held = {"lease": lease, "ttl_s": 30}
        answer = await client.post("/worker/heartbeat", json=held, headers=WORKER)
        assert answer.status_code == 409 and answer.json()["code"] == "lease_lost"
        out = {"lease": lease, "events": [{"kind": "run_output", "stream": "stdout", "text": "x"}]}
        assert (await client.post("/worker/events", json=out, headers=WORKER)).status_code == 409
        report = {"lease": lease, "report": {"note": "not mine"}}
        done = await client.post("/worker/complete", json=report, headers=WORKER)
        assert done.status_code == 409
        assert (await client.post("/worker/release", json=held, headers=WORKER)).status_code == 409
    run = await control.store.get_run(one["run_id"])
    assert run.status is RunStatus.RUNNING and run.worker == "worker-1"
    kept = [e for e in await control.store.events_after(0) if e.kind == "run_output"]
    assert kept == []
    mine = {"lease": one, "ttl_s": 30}
    assert (await client.post("/worker/heartbeat", json=mine, headers=WORKER)).status_code == 200


async def test_sse_resumes_from_last_event_id_with_no_gap_and_no_duplicate(api):
    control, client = api
    for n in range(3):
        await control.new_task(f"task {n}", actor="ana")
    first = await _read_sse(client, {}, until=3)
    assert [e["id"] for e in first] == ["1", "2", "3"]
    assert json.loads(first[0]["data"])["kind"] == "task_created"
    for n in range(3, 5):
        await control.new_task(f"task {n}", actor="ana")
    resumed = await _read_sse(client, {"Last-Event-ID": "3"}, until=2)
    assert [e["id"] for e in resumed] == ["4", "5"]
    reset = await _read_sse(client, {"Last-Event-ID": "999"}, until=1)
    assert reset[0]["event"] == "reset"


@pytest.mark.parametrize("garbage", ["abc", "-1", "\u0663", "1e3", str(2**63), "1 2", "3x"])
async def test_sse_answers_a_garbage_last_event_id_with_reset(api, garbage):
    # Not an id this store gave: `reset`, then everything from the start, as for an unknown id.
    control, client = api
    for n in range(2):
        await control.new_task(f"task {n}", actor="ana")
    events = await _read_sse(client, {"Last-Event-ID": garbage.encode()}, until=3)
    assert events[0]["event"] == "reset" and json.loads(events[0]["data"]) == {"last_id": 2}
    assert [e["id"] for e in events[1:]] == ["1", "2"]


async def test_every_sse_stream_starts_with_a_retry_field(api):
    control, client = api
    await control.new_task("a task", actor="ana")
    blocks: list[dict] = []
    await _read_sse(client, {"Last-Event-ID": "0"}, until=1, blocks=blocks)
    assert set(blocks[0]) == {"retry"} and 1000 <= int(blocks[0]["retry"]) <= 10_000  # ms


async def _read_sse(
    client: httpx.AsyncClient, headers: dict, *, until: int, blocks: list[dict] | None = None
) -> list[dict]:
    """The first `until` events of /events (blocks with an event or data); every block,
    the `retry:` one included, also goes to `blocks`."""
    events, current = [], {}
    async with client.stream("GET", "/events", headers=headers) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if not line:
                if current and blocks is not None:
                    blocks.append(current)
                if "event" in current or "data" in current:
                    events.append(current)
                current = {}
                if len(events) >= until:
                    return events
                continue
            if line.startswith(":"):
                continue
            key, _, value = line.partition(":")
            current[key] = value.lstrip()
    return events


def test_serve_and_two_worker_processes_take_a_task_through_the_pipeline(shop):
    write_config(shop)
    port = free_port()
    env = {**os.environ, "FACTORY_WORKER_CREDENTIAL": CREDENTIAL}
    cmd = [sys.executable, "-m", "t25_tui"]
    serve = subprocess.Popen(
        [*cmd, "serve", "--bind", f"127.0.0.1:{port}"],
        cwd=shop,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workers = []
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: answers(url))
        workers = [
            subprocess.Popen(
                [*cmd, "worker", "--url", url],
                cwd=shop,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(2)
        ]
        with httpx.Client(base_url=url, timeout=10, headers=operator_headers(shop)) as client:
            assert client.post("/tasks", json={"title": "Over the wire"}).status_code == 201
            assert client.post("/tasks", json={"title": "And another"}).status_code == 201
            wait_until(
                lambda: all(t["state"] == "DONE" for t in client.get("/tasks").json()), timeout=90
            )
            runs = client.get("/tasks/T-1").json()["runs"]
        assert all("-r" in r["worker"] for r in runs if r["worker"])
        assert {r["status"] for r in runs} == {"succeeded"}
        # each agent run's tokens per model request crossed the wire with its report
        agent_runs = [r for r in runs if r["adapter"] == "scripted"]
        assert agent_runs and all(r["requests"] == [r["usage"]] for r in agent_runs)
    finally:
        for p in workers:
            p.send_signal(signal.SIGTERM)
        for p in workers:
            assert p.wait(timeout=30) == 0
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=30)


def test_lease_and_outcome_models_round_trip_as_json():
    # What crosses the wire must come back identical.
    lease = Lease(
        run_id="R-1", task_id="T-1", token=3, worker="w", expires_at="2026-01-01T00:00:00+00:00"
    )
    assert Lease.model_validate_json(lease.model_dump_json()) == lease
    outcome = RunOutcome(status=RunStatus.SUCCEEDED)
    assert RunOutcome.model_validate_json(outcome.model_dump_json()) == outcome


async def test_the_audit_pages_and_a_remote_cockpit_reads_it_page_by_page(api, monkeypatch):
    from t25_tui.api import cockpit_client
    from t25_tui.api.cockpit_client import attach

    control, client = api
    for n in range(6):
        task = await control.new_task(f"task {n}", actor="ana")
        await control.cancel(task.id, actor="ana")
        await control.archive(task.id, actor="ana")
    first = (await client.get("/audit", params={"limit": 5})).json()
    assert [e["seq"] for e in first["entries"]] == [1, 2, 3, 4, 5] and first["next"] == 5
    assert first["verified"] and first["head"]["seq"] == 12
    last = (await client.get("/audit", params={"after": 10, "limit": 5})).json()
    assert [e["seq"] for e in last["entries"]] == [11, 12] and last["next"] is None
    assert (await client.get("/audit", params={"limit": 5001})).status_code == 422

    monkeypatch.setattr(cockpit_client, "AUDIT_PAGE", 5)
    local = await control.audit_trail()
    async with attach(str(client.base_url), local_token(control.config.root)) as remote:
        whole = await remote.audit_trail()
        assert whole.entries == local.entries and whole.verdict == local.verdict
        page = await remote.audit_trail(after=3, limit=4)
        assert [e.seq for e in page.entries] == [4, 5, 6, 7] and page.next == 7
        assert [e.seq for e in (await remote.audit_trail(task="T-2")).entries] == [3, 4]


def test_a_reports_manifests_and_a_claims_authors_cross_the_wire_whole():
    from core.domain.manifests import ManifestChange
    from core.domain.reports import RunReport
    from t25_tui.api.bodies import RunReportSent

    report = RunReport(
        manifests=(ManifestChange(path="package.json", before=None, after='{"a": 1}'),),
        needs_input="no agent of roles.reviewer differs from the author",
    )
    sent = RunReportSent.model_validate(report.model_dump(mode="json"))
    assert RunReport.model_validate(sent.model_dump()) == report
    nul = report.model_dump(mode="json")
    nul["manifests"][0]["after"] = "a\x00b"  # what a store can keep
    assert RunReportSent.model_validate(nul).manifests[0].after == "a\ufffdb"
    author = Author(adapter="claude", models=("claude-sonnet-4-5",))
    assert Author.model_validate(author.model_dump(mode="json")) == author


async def test_config_shows_each_projects_effective_policy_and_a_remote_cockpit_reads_it(shop):
    from t25_tui.api.cockpit_client import attach
    from t25_tui.tui.screens.panes import policy_lines

    env = Env(shop)
    overrides = {"limits": {"max_diff_lines": 7}, "qa": {"checks": []}}
    control = await env.open(projects=[{"name": "shop", "repo": ".", **overrides}])
    try:
        app = make_api(control, worker_credential=CREDENTIAL, operator_token=None)
        ops = operator_headers(control.config.root)
        async with (
            serving(app) as url,
            httpx.AsyncClient(base_url=url, timeout=10, headers=ops) as client,
        ):
            body = (await client.get("/config")).json()
            effective = body["effective"]["shop"]
            assert effective["limits"]["max_diff_lines"] == 7
            assert effective["limits"]["max_files_changed"] == 5  # the top-level one
            assert effective["qa"]["checks"] == [] and body["qa"]["checks"][0]["name"] == "unit"
            assert body["projects"][0]["limits"] == {"max_diff_lines": 7}  # as the file says
            async with attach(url, local_token(control.config.root)) as remote:
                assert remote.config.for_project("shop").limits.max_diff_lines == 7
                lines = policy_lines(remote.config)
                assert "Project shop, in place of the above:" in lines
                assert "  limits.max_diff_lines 7" in lines and "  qa.checks (none)" in lines
    finally:
        await env.close()
