"""Inputs that once gave 500: ids and lease tokens past 64 bits, digits that are not ASCII,
lone surrogates, NUL. On both stores each is a 4xx with `{error, hint}` that does not repeat
what was sent, or (agent output, which may hold any character) is kept.

A real uvicorn serve over a real SQLite file and a real Postgres database."""

from __future__ import annotations

import re
import sys

import httpx
import pytest

from core.domain import text
from core.domain.events import RunOutput
from core.domain.models import TaskState
from core.errors import InvalidInput
from t25_tui.api.bodies import MULTI_LINE, MULTI_LINE_REQUIRED, ONE_LINE_REQUIRED
from t25_tui.api.server import make_api
from tests.support.backends import PostgresBackend
from tests.support.operators import operator_headers
from tests.support.pipeline import Env
from tests.support.serving import CREDENTIAL, WORKER, serving

HUGE = str(2**63)  # one past the largest 64-bit id
MARK = "ECHO-MARK"  # what a refusal must never repeat


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def api(request, shop):
    backend, overrides = None, {}
    if request.param == "postgres":
        backend = PostgresBackend(request.getfixturevalue("pg_template"))
        await backend.create()
        overrides = {"store": {"url": backend.url}}
    env = Env(shop)
    control = await env.open(**overrides)
    app = make_api(control, worker_credential=CREDENTIAL, operator_token=None)
    ops = operator_headers(control.config.root)
    async with (
        serving(app) as url,
        httpx.AsyncClient(base_url=url, timeout=30, headers=ops) as client,
    ):
        yield control, client
    await env.close()
    if backend:
        await backend.drop()


def refused(response: httpx.Response, *statuses: int) -> dict:
    assert response.status_code in statuses, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"error", "hint", "code"} and MARK not in response.text
    return body


async def test_ids_past_64_bits_or_not_ascii_are_no_ids(api):
    control, client = api
    for n in range(3):
        await control.new_task(f"task {n}", actor="ana")
    for path in (
        f"/tasks/{HUGE}",
        f"/tasks/T-{HUGE}0",
        "/tasks/T-\u0663",
        "/tasks/T-0",
        f"/runs/R-{HUGE}",
        f"/artifacts/A-{HUGE}",
        f"/runs?task={HUGE}",
        f"/artifacts?task=T-{HUGE}",
        f"/tasks/{HUGE}/events",
        f"/audit?task={HUGE}",
    ):
        body = refused(await client.get(path), 404)
        assert "is not a" in body["error"] and body["hint"]
    refused(await client.post(f"/tasks/{HUGE}/cancel", json={}), 404)
    for path in (f"/tasks/T-1/events?after={HUGE}", f"/events?after={HUGE}"):
        refused(await client.get(path), 422)


async def test_lease_tokens_and_run_ids_past_64_bits_are_refused(api):
    _, client = api
    lease = {
        "run_id": "R-1",
        "task_id": "T-1",
        "token": 1,
        "worker": "w",
        "expires_at": "2030-01-01T00:00:00Z",
    }
    extra = {
        "/worker/heartbeat": {},
        "/worker/release": {},
        "/worker/prompt": {},
        "/worker/events": {"events": []},
        "/worker/complete": {"report": {}},
    }
    for bad in (
        {"token": 2**63},
        {"token": 10**30},
        {"run_id": f"R-{HUGE}"},
        {"task_id": "T-\u0663"},
    ):
        for path, rest in extra.items():
            body = {"lease": {**lease, **bad}, **rest}
            refused(await client.post(path, json=body, headers=WORKER), 422)


async def test_text_with_nul_controls_or_lone_surrogates_is_refused(api):
    control, client = api
    await control.new_task("a task", actor="ana")
    sends = [
        ("/tasks", {"title": f"{MARK}\x00"}, 400),
        ("/tasks", {"title": f"{MARK}\x1b[31m"}, 400),
        ("/tasks", {"title": "fine", "actor": f"{MARK}\x00"}, 400),
        ("/tasks", {"title": "fine", "description": f"{MARK}\x00"}, 400),
        ("/tasks", {"title": "fine", "project": f"{MARK}\x00"}, 422),
        ("/tasks/T-1/cancel", {"reason": f"{MARK}\u2028"}, 400),
        ("/tasks/T-1/answer", {"text": f"{MARK}\x00"}, 400),
        ("/worker/claim", {"worker": f"{MARK}\x00"}, 400),
    ]
    for path, body, status in sends:
        worker = WORKER if path.startswith("/worker/") else None  # else the operator's
        refused(await client.post(path, json=body, headers=worker), status)
    surrogate = b'{"title": "ECHO-MARK \\ud800"}'
    body = refused(
        await client.post(
            "/tasks", content=surrogate, headers={"content-type": "application/json"}
        ),
        422,
    )
    assert "not valid JSON" in body["error"]
    assert [t.title for t in await control.store.list_tasks()] == ["a task"]
    assert (await control.task("T-1")).state is TaskState.RECEIVED


async def test_agent_output_with_nul_is_kept_and_a_lone_surrogate_refused(api):
    control, client = api
    await control.new_task("a task", actor="ana")
    await control.enter(await control.task("T-1"), TaskState.SPEC, actor="t25")
    claim = (await client.post("/worker/claim", json={"worker": "w1"}, headers=WORKER)).json()
    lease = claim["lease"]
    out = {
        "lease": lease,
        "events": [
            {"kind": "run_started", "worker": "w1\x00", "adapter": "scripted"},
            {"kind": "run_output", "stream": "stdout", "text": "binary \x00 out"},
        ],
    }
    assert (await client.post("/worker/events", json=out, headers=WORKER)).status_code == 204
    lone = (
        f'{{"lease": {__import__("json").dumps(lease)}, "events": [{{"kind": "run_output", '
        '"stream": "stdout", "text": "ECHO-MARK \\udc80"}]}'
    ).encode()
    refused(
        await client.post(
            "/worker/events", content=lone, headers={**WORKER, "content-type": "application/json"}
        ),
        422,
    )
    report = {
        "lease": lease,
        "report": {
            "error": "the agent said \x00",
            "result": {
                "adapter": "scripted",  # one the role's chain holds (else refused)
                "model": "scripted-1\x00",
                "final_text": "\x00",
                "error": "\x00",
            },
        },
    }
    done = await client.post("/worker/complete", json=report, headers=WORKER)
    assert done.status_code == 200, done.text
    events = (await client.get("/tasks/T-1/events")).json()
    said = [e["text"] for e in events if e["kind"] == "run_output"]
    assert said and said[0].replace("\ufffd", "\x00") == "binary \x00 out"
    run = (await client.get(f"/runs/{lease['run_id']}")).json()
    assert run["status"] == "failed" and "the agent said" in run["error"]
    assert (await client.get("/tasks/T-1")).json()["task"]["state"] == "FAILED"


async def test_an_in_process_agents_nul_output_is_kept(api):
    # The same store path as a local worker's output: no serve in between.
    control, client = api
    await control.new_task("a task", actor="ana")
    await control.record(RunOutput(task_id="T-1", stream="stdout", text="a\x00b"))
    said = [
        e["text"]
        for e in (await client.get("/tasks/T-1/events")).json()
        if e["kind"] == "run_output"
    ]
    assert said in (["a\x00b"], ["a\ufffdb"])  # Postgres cannot hold NUL: U+FFFD


async def test_a_refusal_names_a_few_fields_and_never_their_values(api):
    _, client = api
    body = {"title": 7, **{f"{MARK}{n}": MARK for n in range(50)}}
    error = refused(await client.post("/tasks", json=body), 422)["error"]
    assert "title" in error and "and 46 more" in error
    enum = refused(await client.post("/tasks", json={"title": "t", "type": MARK}), 422)["error"]
    assert "type" in enum and "'feat'" in enum
    kind = {
        "lease": {
            "run_id": "R-1",
            "task_id": "T-1",
            "token": 1,
            "worker": "w",
            "expires_at": "2030-01-01T00:00:00Z",
        },
        "events": [{"kind": MARK, "stream": "stdout", "text": MARK}],
    }
    refused(await client.post("/worker/events", json=kind, headers=WORKER), 422)


@pytest.mark.parametrize(
    ("pattern", "check"),
    [
        (ONE_LINE_REQUIRED, text.title),
        (MULTI_LINE, text.description),
        (MULTI_LINE_REQUIRED, lambda s: text.reason(s, required=True)),
    ],
)
def test_the_documented_patterns_are_core_texts_rules(pattern, check):
    # The OpenAPI document promises the same text core.domain.text accepts, character by character.
    def accepted(s: str) -> bool:
        try:
            check(s)
            return True
        except InvalidInput:
            return False

    compiled = re.compile(pattern.strip("^$"))
    # Every character core.domain.text names is below U+3100; past it, a sample of the rest.
    codes = [*range(0x3100), *range(0x3100, sys.maxunicode + 1, 251)]
    for code in codes:
        if 0xD800 <= code <= 0xDFFF:  # lone surrogates: refused at the gate, not in JSON
            continue
        c = chr(code)
        for s in (c, f"x{c}", f"{c} ", f"a{c}\r\nb"):
            assert bool(compiled.fullmatch(s)) is accepted(s), (hex(code), s)
