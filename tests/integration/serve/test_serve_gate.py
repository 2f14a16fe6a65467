"""A hostile client's body: `t25 serve` checks the credential and the declared size before
it reads a byte of it, counts a streamed one as it comes, and answers 401 or 413 at once.

Raw HTTP over a real socket to a real uvicorn serve, so that what was sent, and what was
not, is exact."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from t25_tui.api.credentials import LOCAL_TOKEN
from t25_tui.api.gate import BODY_CAP, COMPLETION_CAP, LOG_CHUNK_CAP, MAX_FIELDS, OUTPUT_CAP
from t25_tui.api.protocol import HEADER as PROTOCOL_HEADER
from t25_tui.api.protocol import PROTOCOL
from t25_tui.api.server import make_api
from tests.support.pipeline import Env
from tests.support.serving import CREDENTIAL, WORKER, serving

ANSWER_S = 10.0  # bound on waiting for an answer that must come without the body


@pytest.fixture
async def guarded(shop):
    """serve with an operator token (as beyond loopback) and a worker credential."""
    env = Env(shop)
    control = await env.open()
    app = make_api(control, worker_credential=CREDENTIAL, operator_token="op-token")
    async with serving(app) as url:
        yield url
    await env.close()


@pytest.fixture
async def open_loopback(shop):
    """serve on loopback as it starts by default: its operator is the host's own, whose
    token (OPERATOR, set here as its checkout's) each operator request below carries."""
    env = Env(shop)
    control = await env.open()
    token = control.config.root / LOCAL_TOKEN
    token.parent.mkdir(exist_ok=True)
    token.write_text(OPERATOR)
    async with serving(make_api(control, worker_credential=CREDENTIAL, operator_token=None)) as url:
        yield url
    await env.close()


OPERATOR = "host-operator-token"
AS_OPERATOR = {"Authorization": f"Bearer {OPERATOR}"}


async def exchange(url: str, head: str, *parts: bytes) -> tuple[int, dict, dict]:
    """Send a request head and `parts` of a body (never more), then read the answer."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head.replace("\n", "\r\n").encode() + b"\r\n")
        for part in parts:
            writer.write(part)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), ANSWER_S)
        headers = {}
        while (line := await asyncio.wait_for(reader.readline(), ANSWER_S)) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), ANSWER_S)
        return int(status_line.split()[1]), headers, json.loads(body)
    finally:
        writer.close()


def _head(path: str, length: int | None, *, token: str | None = OPERATOR) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: t25", "Content-Type: application/json"]
    lines.append(
        f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    )
    if token:
        lines.append(f"Authorization: Bearer {token}")
        lines.append(f"{PROTOCOL_HEADER}: {PROTOCOL}")
    return "\n".join(lines) + "\n"


async def test_a_worker_body_without_the_credential_is_refused_before_it_is_sent(guarded):
    # 63 MB announced, not one byte of it sent: the answer can only come from the headers.
    status, headers, body = await exchange(
        guarded, _head("/worker/complete", 63 * 10**6, token=None)
    )
    assert status == 401 and set(body) == {"error", "hint", "code"}
    assert "credential" in body["error"] and headers["www-authenticate"].startswith("Bearer")
    wrong = await exchange(guarded, _head("/worker/events", 10**6, token="op-token"))
    assert wrong[0] == 401  # the operator's token is not a worker's credential


async def test_an_operator_body_without_the_token_is_refused_before_it_is_sent(guarded):
    status, _, body = await exchange(guarded, _head("/tasks", 63 * 10**6))
    assert status == 401 and "operator token" in body["error"]
    status, _, _ = await exchange(guarded, _head("/tasks/T-1/approve", 10**5, token=CREDENTIAL))
    assert status == 401


async def test_a_declared_size_over_the_cap_is_refused_before_it_is_sent(open_loopback):
    status, _, body = await exchange(open_loopback, _head("/tasks", BODY_CAP + 1))
    assert status == 413 and f"{BODY_CAP:,}" in body["error"]
    events = await exchange(
        open_loopback, _head("/worker/events", OUTPUT_CAP + 1, token=CREDENTIAL)
    )
    assert events[0] == 413
    done = await exchange(
        open_loopback, _head("/worker/complete", COMPLETION_CAP + 1, token=CREDENTIAL)
    )
    assert done[0] == 413
    chunk = await exchange(open_loopback, _head("/worker/log", LOG_CHUNK_CAP + 1, token=CREDENTIAL))
    assert chunk[0] == 413  # a log comes a chunk at a time


async def test_a_chunked_body_is_refused_the_moment_it_passes_the_cap(open_loopback):
    # One byte over the cap, and the body never ends: the answer comes anyway.
    first, second = b"[" + b" " * (BODY_CAP // 2), b" " * (BODY_CAP - BODY_CAP // 2)
    chunks = [b"%x\r\n%s\r\n" % (len(c), c) for c in (first, second)]
    status, _, body = await exchange(open_loopback, _head("/tasks", None), *chunks)
    assert status == 413 and set(body) == {"error", "hint", "code"}


async def test_the_upload_endpoints_take_more_than_the_operator_endpoints(open_loopback):
    # A completion with a 5 MB answer passes the size check and reaches the lease check;
    # the same bytes to an operator endpoint are refused for their size.
    log = "A" * (5 * 2**20)
    report = {
        "lease": {
            "run_id": "R-1",
            "task_id": "T-1",
            "token": 1,
            "worker": "w",
            "expires_at": "2030-01-01T00:00:00Z",
        },
        "report": {"result": {"adapter": "scripted", "final_text": log}},
    }
    async with httpx.AsyncClient(base_url=open_loopback, headers=AS_OPERATOR, timeout=30) as client:
        done = await client.post("/worker/complete", json=report, headers=WORKER)
        assert done.status_code == 404 and done.json()["error"] == "there is no run R-1"
        big = await client.post("/tasks", json={"title": "t", "description": log})
        assert big.status_code == 413


async def test_a_million_keys_are_refused_without_a_million_errors(open_loopback):
    many = json.dumps({f"k{n}": 1 for n in range(10**6)}).encode()
    async with httpx.AsyncClient(base_url=open_loopback, headers=AS_OPERATOR, timeout=60) as client:
        operator = await client.post(
            "/tasks", content=many, headers={"content-type": "application/json"}
        )
        assert operator.status_code == 413  # over the operator cap: not even read
        worker = await client.post(
            "/worker/complete", content=many, headers={**WORKER, "content-type": "application/json"}
        )
        assert worker.status_code == 422
        assert f"no T25 endpoint takes more than {MAX_FIELDS}" in worker.json()["error"]
        assert (await client.get("/health")).status_code == 200


async def test_a_refused_body_still_sent_whole_gets_its_answer(open_loopback):
    # An ordinary client sends all of its body before it reads: it must see the 413.
    async with httpx.AsyncClient(base_url=open_loopback, headers=AS_OPERATOR, timeout=30) as client:
        refused = await client.post(
            "/tasks", content=b"x" * (20 * 2**20), headers={"content-type": "application/json"}
        )
        assert refused.status_code == 413
        assert (await client.get("/health")).status_code == 200  # the connection is usable
