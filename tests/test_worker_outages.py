"""Remote workers through short outages: serve killed and restarted, its Postgres restarted,
the link between worker and serve cut for 10 s. No task fails, nothing is done twice.

`t25 serve` and `t25 worker` run as real processes on loopback with the scripted agent;
the link is cut by a TCP relay of the test's own (`Link`), Postgres is the session's
throwaway cluster (tests/pg_cluster.py). Each test ends by checking every task: DONE,
each of its runs claimed once, started once, finished once, its output sent once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.config.schema import DATABASE_URL_ENV
from tests.operators import operator_headers
from tests.pg_cluster import cluster, pg_cluster  # noqa: F401 - fixtures
from tests.test_pipeline import write_config
from tests.test_remote_faults import _kill_agents_under
from tests.test_serve import CREDENTIAL, WORKER
from tests.waiting import free_port, until

CMD = [sys.executable, "-m", "t25_tui"]
SLOW_DEV = ["--misbehave", "slow:4"]  # dev runs long enough to be in flight during the fault
TASKS = 4


@dataclass
class Shop:
    """A serve (restartable on its port) and the workers started against it."""

    repo: Path
    logs: Path
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    serve: subprocess.Popen | None = None
    workers: list[subprocess.Popen] = field(default_factory=list)
    starts: int = 0
    serve_args: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_serve(self) -> None:
        self.starts += 1
        with (self.logs / f"serve-{self.starts}.err").open("w") as err:
            self.serve = subprocess.Popen(
                [*CMD, "serve", "--bind", f"127.0.0.1:{self.port}", *self.serve_args],
                cwd=self.repo,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def kill_serve(self) -> None:
        assert self.serve is not None
        self.serve.kill()
        self.serve.wait(timeout=30)

    def start_worker(self, *args: str, url: str | None = None, env: dict[str, str] | None = None):
        err = self.logs / f"worker-{len(self.workers) + 1}.err"
        with err.open("w") as sink:
            proc = subprocess.Popen(
                [*CMD, "worker", "--url", url or self.url, *args],
                cwd=self.repo,
                env=env or self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=sink,
            )
        self.workers.append(proc)
        return proc, err

    def stop(self) -> None:
        for proc in [*self.workers, self.serve]:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in [*self.workers, self.serve]:
            if proc is not None:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        _kill_agents_under(self.repo)


@asynccontextmanager
async def shop_served(
    repo: Path, logs: Path, env: dict[str, str] | None = None, serve_args: tuple[str, ...] = ()
) -> AsyncIterator[tuple[Shop, httpx.AsyncClient]]:
    write_config(repo, roles={"dev": [{"adapter": "scripted", "args": SLOW_DEV}]})
    environ = {**os.environ, "FACTORY_WORKER_CREDENTIAL": CREDENTIAL, **(env or {})}
    shop = Shop(repo, logs, environ, serve_args=serve_args)
    shop.start_serve()
    try:
        ops = operator_headers(repo)
        async with httpx.AsyncClient(base_url=shop.url, timeout=30, headers=ops) as client:
            await until(lambda: healthy(client), what="serve healthy")
            yield shop, client
    finally:
        shop.stop()


async def healthy(client: httpx.AsyncClient) -> bool:
    try:
        return (await client.get("/health")).status_code == 200
    except httpx.HTTPError:
        return False


async def file_tasks(client: httpx.AsyncClient, count: int = TASKS) -> list[str]:
    refs = []
    for n in range(count):
        made = await client.post("/tasks", json={"title": f"Outlast an outage {n}"})
        assert made.status_code == 201, made.text
        refs.append(made.json()["id"])
    return refs


async def dev_runs_running(client: httpx.AsyncClient, at_least: int) -> bool:
    runs = (await client.get("/runs", params={"status": "running"})).json()
    return sum(1 for r in runs if r["role"] == "dev") >= at_least


async def all_done(client: httpx.AsyncClient, refs: list[str]) -> bool:
    try:
        for ref in refs:
            got = await client.get(f"/tasks/{ref}")
            if got.status_code != 200 or got.json()["task"]["state"] != "DONE":
                return False
    except httpx.HTTPError:
        return False
    return True


async def every_event(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    """Every event in the log, from the first to the newest, read from /events."""
    newest = (await client.get("/health")).json()["last_event_id"]
    found: list[dict[str, Any]] = []
    async with client.stream("GET", "/events", timeout=httpx.Timeout(30, read=30)) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                found.append(json.loads(line[5:]))
                if found[-1]["id"] == newest:
                    break
    return found


async def assert_each_stage_ran_once(
    client: httpx.AsyncClient, refs: list[str], attempts: tuple[int, ...] = (1,)
) -> None:
    """Every task DONE with no error; each of its runs claimed once and succeeded; each run
    started once, finished once, and its output sent once."""
    events = await every_event(client)
    started = Counter(e["run_id"] for e in events if e["kind"] == "run_started")
    finished = Counter(e["run_id"] for e in events if e["kind"] == "run_finished")
    greeted: Counter[str] = Counter()  # the agent's first line, once per run it ran
    for e in events:
        if e["kind"] == "run_output":
            greeted[e["run_id"]] += e["text"].count('"text": "Working on ')
    for ref in refs:
        shown = (await client.get(f"/tasks/{ref}")).json()
        assert shown["task"]["state"] == "DONE" and shown["task"]["error"] is None, shown["task"]
        for run in shown["runs"]:
            assert run["status"] == "succeeded" and run["attempts"] in attempts, run
            assert finished[run["id"]] == 1, run
            if run["stage"] != "PR_OPEN":  # T25's own stage: no agent
                worked = run["attempts"]
                assert 1 <= started[run["id"]] <= worked, run
                assert 1 <= greeted[run["id"]] <= worked, run
    assert not (await client.get("/runs", params={"status": "running"})).json()
    assert not (await client.get("/runs", params={"status": "queued"})).json()


def assert_told(err: Path, refs: list[str]) -> None:
    """The worker said what it did, and lost nothing."""
    said = err.read_text()
    for ref in refs:
        assert f"claimed {ref} IMPLEMENTING" in said, said
        assert f" {ref} IMPLEMENTING" in said and "succeeded in" in said, said
    assert "lost the lease" not in said and "Traceback" not in said, said


WORKER_ARGS = ("--workers", str(TASKS), "--heartbeat", "1")


async def test_a_serve_killed_and_restarted_3s_later_fails_no_task(shop, tmp_path):
    async with shop_served(shop, tmp_path) as (served, client):
        worker, err = served.start_worker(*WORKER_ARGS, "--lease-ttl", "15")
        refs = await file_tasks(client)
        await until(lambda: dev_runs_running(client, 2), timeout=120, what="dev runs in flight")
        served.kill_serve()
        await asyncio.sleep(3)  # the outage itself: nothing to wait for
        served.start_serve()
        await until(lambda: healthy(client), what="serve back")
        await until(lambda: all_done(client, refs), timeout=180, what="every task DONE")
        await assert_each_stage_ran_once(client, refs)
        assert worker.poll() is None
    assert_told(err, refs)
    assert "trying again in" in err.read_text()  # it did meet the outage


@pytest.mark.postgres
async def test_a_postgres_restart_under_serve_fails_no_task(shop, tmp_path, cluster):
    name = f"t25_{uuid.uuid4().hex[:12]}"
    url = cluster.new_database(name)
    async with shop_served(shop, tmp_path, env={DATABASE_URL_ENV: url}) as (served, client):
        worker, err = served.start_worker(*WORKER_ARGS, "--lease-ttl", "15")
        refs = await file_tasks(client)
        await until(lambda: dev_runs_running(client, 2), timeout=120, what="dev runs in flight")
        cluster.stop()
        await asyncio.sleep(3)
        cluster.start()
        await until(lambda: all_done(client, refs), timeout=180, what="every task DONE")
        await assert_each_stage_ran_once(client, refs)
        assert worker.poll() is None
    assert_told(err, refs)


@pytest.mark.postgres
async def test_a_postgres_restart_under_serve_fails_no_task_of_its_own_workers(
    shop, tmp_path, cluster
):
    """serve's in-process workers (`--workers`) wait for the store as remote ones do."""
    url = cluster.new_database(f"t25_{uuid.uuid4().hex[:12]}")
    env = {DATABASE_URL_ENV: url}
    async with shop_served(shop, tmp_path, env, ("--workers", str(TASKS))) as (_, client):
        refs = await file_tasks(client)
        await until(lambda: dev_runs_running(client, 2), timeout=120, what="dev runs in flight")
        cluster.stop()
        await asyncio.sleep(3)
        cluster.start()
        await until(lambda: all_done(client, refs), timeout=180, what="every task DONE")
        # No run fails and each finishes once. A run may be worked twice: a claim the store
        # took just as it went away, or the pool stopping every worker when one of them meets
        # the outage outside a run, sends a run round again (not solved for in-process workers).
        await assert_each_stage_ran_once(client, refs, attempts=(1, 2))


async def test_a_10s_cut_between_worker_and_serve_fails_no_task(shop, tmp_path):
    async with (
        shop_served(shop, tmp_path) as (served, client),
        Link(served.port) as link,
    ):
        worker, err = served.start_worker(*WORKER_ARGS, "--lease-ttl", "20", url=link.url)
        refs = await file_tasks(client)
        await until(lambda: dev_runs_running(client, 2), timeout=120, what="dev runs in flight")
        link.cut()
        await asyncio.sleep(10)
        link.restore()
        await until(lambda: all_done(client, refs), timeout=180, what="every task DONE")
        await assert_each_stage_ran_once(client, refs)
        assert worker.poll() is None and link.cuts == 1 and link.dropped > 0
    assert_told(err, refs)


async def test_a_worker_with_a_wrong_credential_says_so_and_exits_1(shop, tmp_path):
    async with shop_served(shop, tmp_path) as (served, _):
        wrong = {**served.env, "FACTORY_WORKER_CREDENTIAL": "not-the-credential"}
        worker, err = served.start_worker(env=wrong)
        await until(lambda: worker.poll() is not None, timeout=30, what="the worker exited")
        said = err.read_text()
        assert worker.returncode == 1, said
        assert said.count("t25: error: serve refused the worker credential (401)") == 1, said
        assert "hint: check FACTORY_WORKER_CREDENTIAL" in said, said
        assert "Traceback" not in said, said


class Link:
    """A loopback TCP relay to `port` that can be cut and restored. Cut, it drops every
    connection it relays and holds new ones without passing a byte, as a dead link does;
    restored, it closes what it held and relays again."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.port = 0
        self.up = asyncio.Event()
        self.up.set()
        self.cuts = 0
        self.dropped = 0  # connections dropped or held by a cut
        self._server: asyncio.Server | None = None
        self._live: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> Link:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self.up.set()
        self._drop()
        for task in tuple(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def cut(self) -> None:
        self.cuts += 1
        self.up.clear()
        self._drop()

    def restore(self) -> None:
        self.up.set()

    def _drop(self) -> None:
        for writer in tuple(self._live):
            self.dropped += 1
            writer.transport.abort()  # a reset, not a goodbye
        self._live.clear()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.up.is_set():  # a dead link: nothing passes until it is back, then a reset
            self.dropped += 1
            await self.up.wait()
            writer.transport.abort()
            return
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.transport.abort()
            return
        self._live |= {writer, server_w}
        self._spawn(self._pipe(reader, server_w))
        self._spawn(self._pipe(server_r, writer))

    async def _pipe(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await r.read(65536):
                if not self.up.is_set():
                    break
                w.write(data)
                await w.drain()
        self._live.discard(w)
        w.close()


async def test_a_claim_retried_at_a_restarted_serve_gets_the_lease_its_first_try_took(
    shop, tmp_path
):
    """serve took a claim and died before answering; the worker's retry reaches the serve
    started since, which has forgotten the answer: it gets the run its first try claimed,
    not a second one (the first would sit leased until its lease lapsed, then run again)."""
    async with shop_served(shop, tmp_path) as (served, client):
        await file_tasks(client, 2)
        auth = WORKER
        claim = {"worker": "w", "ttl_s": 60}
        key = uuid.uuid4().hex
        first: list[httpx.Response] = []

        async def claimed() -> bool:
            first[:] = [await client.post("/worker/claim", json=claim, headers=auth)]
            return first[0].status_code == 200

        await until(claimed, what="a run to claim")
        served.kill_serve()
        served.start_serve()
        await until(lambda: healthy(client), what="serve back")
        retry = auth | {"Idempotency-Key": key, "T25-Retry": "2"}
        again = await client.post("/worker/claim", json=claim, headers=retry)
        assert again.status_code == 200, again.text
        assert again.json()["lease"] == first[0].json()["lease"]
        running = (await client.get("/runs", params={"status": "running"})).json()
        assert [r["id"] for r in running] == [first[0].json()["run"]["id"]]


async def test_serve_answers_a_retried_call_with_its_first_answer(shop, tmp_path):
    """A claim, output or completion sent again under its Idempotency-Key (its answer was
    lost on the way) is answered as the first time, and not done twice."""
    async with shop_served(shop, tmp_path) as (_, client):
        await file_tasks(client, 1)
        auth = WORKER

        async def post(path: str, body: dict[str, Any], key: str | None) -> httpx.Response:
            keyed = {"Idempotency-Key": key} if key else {}
            return await client.post(path, json=body, headers=auth | keyed)

        claim = {"worker": "w", "ttl_s": 30}
        claimed: list[httpx.Response] = []

        async def claimed_one() -> bool:
            key = uuid.uuid4().hex
            first = await post("/worker/claim", claim, key)
            if first.status_code != 200:  # nothing to claim yet, and nothing kept under `key`
                return False
            claimed[:] = [first, await post("/worker/claim", claim, key)]
            return True

        await until(claimed_one, what="a run to claim")
        assert claimed[1].status_code == 200
        assert claimed[0].json() == claimed[1].json()  # one lease, not two runs claimed
        lease = claimed[0].json()["lease"]
        line = {"kind": "run_output", "stream": "stdout", "text": "said once\n"}
        output = {"lease": lease, "events": [line]}
        for _ in range(2):
            assert (await post("/worker/events", output, "out-1")).status_code == 204
        report = {"lease": lease, "report": {"error": "given up on purpose"}}
        done = [await post("/worker/complete", report, "done-1") for _ in range(2)]
        assert [d.status_code for d in done] == [200, 200] and done[0].json() == done[1].json()
        # Sent again with no key, or to a serve that forgot it: done under this lease, so done.
        again = await post("/worker/complete", report, None)
        assert again.status_code == 200 and again.json() == done[0].json()
        stale = {**report, "lease": {**lease, "token": lease["token"] - 1}}
        assert (await post("/worker/complete", stale, None)).status_code == 409
        events = await every_event(client)
        run = lease["run_id"]
        assert [e["text"] for e in events if e["kind"] == "run_output"] == ["said once\n"]
        assert sum(1 for e in events if e["kind"] == "run_finished" and e["run_id"] == run) == 1
