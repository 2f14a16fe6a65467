"""A run's log goes from the agent to the store byte-exact, and is never held whole: the
adapter spools it to a file under `.factory/`, a remote worker uploads it to serve in chunks
(`PUT /worker/log`), the store keeps it in chunks; each file is removed once it is stored."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import Request
from fastapi.responses import JSONResponse

from core.domain.agent import AgentResult, RunLog
from core.domain.backoff import Backoff
from core.domain.models import ArtifactKind, Lease, TaskState, utcnow
from core.domain.output import truncation_marker
from core.domain.reports import RunReport
from core.errors import ArtifactCorrupted, InvalidInput
from core.worker.worker import sweep_run_logs
from t25_tui.api.cockpit_client import attach
from t25_tui.api.credentials import local_token
from t25_tui.api.server import make_api
from t25_tui.api.services import services_in
from t25_tui.api.uploads import LogUploads
from t25_tui.api.worker_client import HttpRunQueue
from tests.support.operators import operator_headers
from tests.support.pipeline import Env
from tests.support.serving import CREDENTIAL, WORKER, serving

LIMIT = 3 * 2**19  # 1.5 MiB: past one chunk of the store and of an upload
MARKER = truncation_marker(LIMIT, LIMIT).encode()
SPEC = json.dumps({"summary": "Greet", "acceptance_criteria": ["it greets"]})


async def stored_log(env: Env, task_id: str) -> bytes:
    """The SPEC run's log artifact, read as a stream (verified on the way)."""
    store = env.control.store
    spec = next(r for r in await store.list_runs(task_id=task_id) if r.role == "spec")
    (log,) = [
        a
        for a in await store.list_artifacts(task_id=task_id)
        if a.meta.kind is ArtifactKind.LOG and a.meta.run_id == spec.id
    ]
    _, chunks = await store.stream_artifact(log.id)
    return b"".join([chunk async for chunk in chunks])


def spooled(path: Path, content: bytes) -> RunLog:
    path.write_bytes(content)
    return RunLog(path=path, size=len(content), sha256=hashlib.sha256(content).hexdigest())


def leftovers(repo: Path) -> list[str]:
    return [p.name for d in ("run-logs", "uploads") for p in (repo / ".factory" / d).glob("*")]


async def test_a_local_runs_log_is_stored_byte_exact_with_its_marker(env, shop):
    flood = {"adapter": "scripted", "args": ["--misbehave", "flood:4000000"]}
    await env.open(roles={"spec": [flood]}, limits={"max_log_bytes": LIMIT})
    task = await env.new()
    await env.work()

    log = await stored_log(env, task.id)
    # the agent's first lines, then its 2 MB line of x: cut at the limit, then the marker
    head = log[: log.index(b'{"type": "assistant", "text": "xx')]
    assert [json.loads(line)["type"] for line in head.splitlines()] == ["system", "assistant"]
    expected = (head + b'{"type": "assistant", "text": "' + b"x" * LIMIT)[:LIMIT] + MARKER
    assert log == expected
    assert leftovers(shop) == []  # the spool went once the run was reported
    spec = next(r for r in await env.control.store.list_runs(task_id=task.id) if r.role == "spec")
    shown = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "t25_tui", "logs", spec.id, "--log"],
        cwd=shop,
        capture_output=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert shown.returncode == 0 and shown.stdout == expected, shown.stderr


class LosingReplies(httpx.AsyncBaseTransport):
    """Loopback to serve, where the answer to the first try of each log chunk is lost after
    serve took it; every upload's (offset, Idempotency-Key) is noted."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.sent: list[tuple[int, str]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method != "PUT":
            return response
        offset = int(request.url.params["offset"])
        first = all(o != offset for o, _ in self.sent)
        self.sent.append((offset, request.headers["Idempotency-Key"]))
        if first:
            await response.aclose()
            raise httpx.ReadError("the answer was lost", request=request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_remote_workers_log_is_uploaded_in_chunks_retried_once_and_stored_byte_exact(
    shop, tmp_path
):
    env = Env(shop)
    control = await env.open(limits={"max_log_bytes": LIMIT})
    try:
        task = await env.new()
        await control.enter(task, TaskState.SPEC, actor="t25")
        async with serving(
            make_api(control, worker_credential=CREDENTIAL, operator_token=None)
        ) as url:
            runs = HttpRunQueue(url, CREDENTIAL, retry=Backoff(0.01, 0.01))
            lossy = LosingReplies()
            auth = WORKER
            runs.http.clients = [httpx.AsyncClient(base_url=url, transport=lossy, headers=auth)]
            try:
                claim = await runs.claim("remote-1", 30)
                assert claim is not None and claim.run.stage is TaskState.SPEC
                content = os.urandom(LIMIT) + MARKER  # any bytes, cut by the worker
                log = spooled(tmp_path / "R.log", content)
                result = AgentResult(adapter="scripted", final_text=SPEC, log=log)
                await runs.complete(claim.lease, RunReport(result=result, prompt="write it"))
            finally:
                await runs.close()
            async with httpx.AsyncClient(
                base_url=url, headers=operator_headers(shop)
            ) as client:  # an operator's read
                logs = (await client.get("/artifacts", params={"task": task.id})).json()
                ref = next(a["id"] for a in logs if a["meta"]["kind"] == "log")
                read = await client.get(f"/artifacts/{ref}")
                assert read.content == content
                assert read.headers["X-T25-SHA256"] == log.sha256
            async with attach(
                url, local_token(shop)
            ) as remote:  # a remote cockpit, `t25 logs --log --url`
                streamed = [chunk async for chunk in remote.artifact_chunks(ref)]
                assert b"".join(streamed) == content and len(streamed) > 1
            with sqlite3.connect(shop / ".factory" / "t25.db") as db:
                db.execute("UPDATE blob_chunks SET content = x'00' WHERE n = 1")
            async with httpx.AsyncClient(base_url=url, headers=operator_headers(shop)) as client:
                damaged = await client.get(f"/artifacts/{ref}")
                assert damaged.status_code == 422  # verified before a byte is sent
                verified = await client.get(f"/tasks/{task.id}", params={"verify": "true"})
                assert [d["id"] for d in verified.json()["damaged"]] == [ref]

        assert (await env.task(task.id)).state is TaskState.PLAN
        # two chunks, each tried twice under one key: the retry was kept once
        offsets = [o for o, _ in lossy.sent]
        assert offsets == [0, 0, 2**20, 2**20]
        assert lossy.sent[0][1] == lossy.sent[1][1] != lossy.sent[2][1] == lossy.sent[3][1]
        assert leftovers(shop) == []  # serve's copy went once it was stored
    finally:
        await env.close()


async def test_a_completion_taken_by_a_replica_without_the_upload_uploads_it_there_again(
    shop, tmp_path
):
    """Serve A took the log, then was away for the completion; replica B, sharing the
    store but not A's uploads, took it: the worker uploads the log to B and completes."""
    env = Env(shop)
    control = await env.open(limits={"max_log_bytes": LIMIT})
    try:
        task = await env.new()
        await control.enter(task, TaskState.SPEC, actor="t25")
        a = make_api(control, worker_credential=CREDENTIAL, operator_token=None)

        @a.middleware("http")
        async def away_for_completions(request: Request, call_next: Any) -> Any:
            if request.url.path == "/worker/complete":
                return JSONResponse({"error": "restarting"}, status_code=503)
            return await call_next(request)

        b = make_api(control, worker_credential=CREDENTIAL, operator_token=None)
        b.state.t25 = replace(services_in(b), uploads=LogUploads(tmp_path / "b", LIMIT))
        async with serving(a) as url_a, serving(b) as url_b:
            runs = HttpRunQueue([url_a, url_b], CREDENTIAL, retry=Backoff(0.01, 0.01))
            try:
                claim = await runs.claim("remote-1", 30)
                assert claim is not None
                content = os.urandom(2**20 + 5) + MARKER
                log = spooled(tmp_path / "R.log", content)
                result = AgentResult(adapter="scripted", final_text=SPEC, log=log)
                await runs.complete(claim.lease, RunReport(result=result, prompt="write it"))
            finally:
                await runs.close()
        assert await stored_log(env, task.id) == content
        assert list((tmp_path / "b").iterdir()) == []
    finally:
        await env.close()


def lease(run: int = 1) -> Lease:
    return Lease(run_id=f"R-{run}", task_id="T-1", token=7, worker="w", expires_at=utcnow())


async def test_an_upload_takes_each_byte_once_and_says_where_to_go_on_from(tmp_path):
    uploads = LogUploads(tmp_path, 4096)
    assert await uploads.write(lease(), 0, b"a" * 1000) == 1000
    assert await uploads.write(lease(), 0, b"a" * 1000) == 1000  # sent again: kept once
    assert await uploads.write(lease(), 500, b"a" * 500 + b"b" * 500) == 1500  # overlapping
    assert await uploads.write(lease(), 3000, b"c" * 100) == 1500  # a gap: not kept
    assert uploads.path(lease()).read_bytes() == b"a" * 1000 + b"b" * 500


async def test_an_uploaded_log_short_of_or_unlike_what_its_completion_says_is_refused(tmp_path):
    uploads = LogUploads(tmp_path, 4096)
    said = spooled(tmp_path / "worker.log", b"z" * 2000)
    with pytest.raises(InvalidInput, match="not uploaded"):
        await uploads.take(lease(), said)
    await uploads.write(lease(), 0, b"z" * 1000)
    with pytest.raises(InvalidInput, match="2000 bytes; 1000 were uploaded"):
        await uploads.take(lease(), said)
    await uploads.write(lease(), 1000, b"Z" * 1000)  # damaged on the way
    with pytest.raises(ArtifactCorrupted, match="damaged"):
        await uploads.take(lease(), said)
    uploads.discard(lease())
    assert not uploads.path(lease()).exists()


def test_the_logs_a_killed_worker_spooled_are_swept_and_a_live_ones_kept(tmp_path):
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    left = tmp_path / f"R-1-{gone}-abc.log"
    live = tmp_path / f"R-2-{os.getpid()}-def.log"
    for path in (left, live):
        path.write_bytes(b"said\n")
    assert sweep_run_logs(tmp_path) == [left]
    assert live.exists() and not left.exists()


async def test_an_upload_left_for_an_hour_is_swept_when_the_next_begins(tmp_path):
    uploads = LogUploads(tmp_path, 4096)
    await uploads.write(lease(1), 0, b"abandoned")
    an_hour_ago = time.time() - 3601
    os.utime(uploads.path(lease(1)), (an_hour_ago, an_hour_ago))
    await uploads.write(lease(2), 0, b"fresh")
    assert not uploads.path(lease(1)).exists() and uploads.path(lease(2)).exists()
