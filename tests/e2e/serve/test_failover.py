"""Serve replicas on one store, and the clients that fail over between them.

The client's rotation is tested against real HTTP servers on loopback: a replica that is
down (nothing listens on its port), one whose store is away (it answers 503), one that
works. The whole of it runs as processes: two `t25 serve` replicas on one fresh Postgres
database, a `t25 worker --url A --url B`, and replica A killed with SIGKILL mid-pipeline.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from itertools import pairwise

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from core.config.schema import DATABASE_URL_ENV
from core.domain.backoff import Backoff
from core.domain.models import TaskState
from core.errors import ControlPlaneUnreachable
from t25_tui.api.credentials import local_token
from t25_tui.api.server import make_api
from t25_tui.api.worker_client import LAST_TRY_S, Http, HttpRunQueue
from tests.support.operators import operator_headers
from tests.support.outages import (
    CMD,
    SLOW_DEV,
    WORKER_ARGS,
    Shop,
    all_done,
    assert_each_stage_ran_once,
    assert_told,
    dev_runs_running,
    file_tasks,
    healthy,
)
from tests.support.pipeline import Env, write_config
from tests.support.serving import CREDENTIAL, serving
from tests.support.waiting import free_port, until


@contextmanager
def remote_log() -> Iterator[list[str]]:
    """What `t25.remote` says meanwhile, one string a line."""
    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    logger, keep = logging.getLogger("t25.remote"), Keep(logging.INFO)
    logger.addHandler(keep)
    level, logger.level = logger.level, logging.INFO
    try:
        yield said
    finally:
        logger.removeHandler(keep)
        logger.setLevel(level)


def store_away(hits: list[tuple[str, float]], name: str) -> FastAPI:
    """A replica whose store is unavailable: every request is answered 503, and noted."""
    api = FastAPI()

    @api.api_route("/{path:path}", methods=["GET", "POST"])
    async def unavailable(path: str) -> JSONResponse:
        hits.append((name, time.monotonic()))
        body = {"error": "the store is unavailable", "code": "store_unavailable"}
        return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})

    return api


@asynccontextmanager
async def serving_plainly(api: FastAPI) -> AsyncIterator[str]:
    """`api` on a loopback port of its own (uvicorn, as serve has it), while the block runs."""
    config = uvicorn.Config(api, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn sets a flag, not an event
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


def nobody() -> str:
    """The address of a replica that is down: nothing listens there."""
    return f"http://127.0.0.1:{free_port()}"


async def test_a_request_goes_on_at_once_to_the_next_address_and_stays_there(shop):
    env = Env(shop)
    control = await env.open()
    down = nobody()
    try:
        async with serving(make_api(control, worker_credential=None, operator_token=None)) as up:
            http = Http([down, up], local_token(control.config.root))
            try:
                with remote_log() as said:
                    first = await http.request("GET", "/health")
                    again = await http.request("GET", "/tasks")
            finally:
                await http.close()
    finally:
        await env.close()
    assert first.status_code == 200 and again.status_code == 200
    assert http.url == up
    assert len(said) == 1 and said[0].startswith(f"switching to {up} after {down} failed ("), said


async def test_a_worker_claims_at_the_next_replica_when_one_is_away_without_backing_off(shop):
    """A replica answering 503, another down: the claim lands on the third, in one round,
    though a backoff would have paused 5 s."""
    env = Env(shop)
    control = await env.open()
    hits: list[tuple[str, float]] = []
    try:
        await control.new_task("Add a greeting", actor="ana")
        await control.enter(await control.task("T-1"), TaskState.SPEC, actor="t25")
        api = make_api(control, worker_credential=CREDENTIAL, operator_token=None)
        async with serving_plainly(store_away(hits, "away")) as away, serving(api) as up:
            runs = HttpRunQueue([away, nobody(), up], CREDENTIAL, retry=Backoff(5.0, 5.0))
            try:
                with remote_log() as said:
                    started = time.monotonic()
                    claim = await runs.claim("w1", 30)
                    took = time.monotonic() - started
                    assert claim is not None
                    await runs.heartbeat(claim.lease, 30)  # straight to where it is now
            finally:
                await runs.close()
    finally:
        await env.close()
    assert claim.task.id == "T-1" and took < 2.5, took
    assert [name for name, _ in hits] == ["away"]
    assert [line.split(" after ")[0] for line in said] == [
        f"switching to {runs.http.urls[1]}",
        f"switching to {up}",
    ], said


async def test_when_every_replica_fails_the_worker_backs_off_once_per_round():
    """Both replicas away: each is tried in turn at once, and the pause comes between rounds."""
    hits: list[tuple[str, float]] = []
    pause = 0.5
    async with (
        serving_plainly(store_away(hits, "a")) as a,
        serving_plainly(store_away(hits, "b")) as b,
    ):
        runs = HttpRunQueue([a, b], CREDENTIAL, retry=Backoff(pause, pause))
        try:
            with remote_log() as said, pytest.raises(ControlPlaneUnreachable):
                await runs.claim("w1", 2.2 + LAST_TRY_S)
        finally:
            await runs.close()
    names = [name for name, _ in hits]
    assert len(names) >= 6 and names == ["a", "b"] * (len(names) // 2), names
    gaps = [later - earlier for (_, earlier), (_, later) in pairwise(hits)]
    within_a_round, between_rounds = gaps[0::2], gaps[1::2]
    assert max(within_a_round) < pause * 0.8, gaps
    # Every pause whole but the last, which may be cut short to land before the claim's end.
    assert min(between_rounds[:-1]) >= pause * 0.95, gaps
    retried = [line for line in said if "trying again in" in line]
    assert len(retried) == len(names) // 2 - 1, said  # one pause per round, none within


@pytest.mark.postgres
async def test_a_replica_killed_mid_pipeline_fails_no_task_and_runs_no_stage_twice(
    shop, tmp_path, cluster
):
    """Replicas A and B on one database, a worker given `--url A --url B`, several tasks in
    flight; A is SIGKILLed. The worker says it switched to B, and through B every task
    reaches DONE, each stage with one run that finished once, nothing left running or
    queued; the audit chain both wrote verifies."""
    database = cluster.new_database(f"t25_{uuid.uuid4().hex[:12]}")
    write_config(shop, roles={"dev": [{"adapter": "scripted", "args": SLOW_DEV}]})
    env = {**os.environ, "FACTORY_WORKER_CREDENTIAL": CREDENTIAL, DATABASE_URL_ENV: database}
    replicas = [Shop(shop, tmp_path / name, env) for name in ("a", "b")]
    a, b = replicas
    try:
        for replica in replicas:
            replica.logs.mkdir()
            replica.start_serve()
        async with (
            httpx.AsyncClient(base_url=a.url, timeout=30, headers=operator_headers(shop)) as at_a,
            httpx.AsyncClient(base_url=b.url, timeout=30, headers=operator_headers(shop)) as at_b,
        ):
            for client in (at_a, at_b):
                await until(lambda c=client: healthy(c), what="replica healthy")
            worker, err = a.start_worker("--url", b.url, *WORKER_ARGS, "--lease-ttl", "15")
            refs = await file_tasks(at_a)
            # Every task in its slow stage, each worker heartbeating and sending output: A
            # dies with no claim or completion of theirs in flight (see docs/guides/production.md on one
            # killed between a completion and its decision).
            await until(
                lambda: dev_runs_running(at_b, len(refs)), timeout=120, what="dev runs in flight"
            )
            a.kill_serve()
            await until(lambda: all_done(at_b, refs), timeout=240, what="every task DONE")
            await assert_each_stage_ran_once(at_b, refs)
            for ref in refs:
                runs = (await at_b.get(f"/tasks/{ref}")).json()["runs"]
                per_stage = Counter(r["stage"] for r in runs)
                assert set(per_stage.values()) == {1}, (ref, per_stage)
            assert worker.poll() is None
    finally:
        for replica in replicas:
            replica.stop()
    assert_told(err, refs)
    assert f"switching to {b.url} after {a.url} failed (" in err.read_text()
    verified = await asyncio.to_thread(
        subprocess.run,
        [*CMD, "audit", "verify"],
        cwd=shop,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
