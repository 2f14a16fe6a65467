"""Remote workers through outages: a restartable serve with its workers, and what the tests
ask of it over HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.operators import operator_headers
from tests.support.pipeline import write_config
from tests.support.runs import kill_agents_under
from tests.support.serving import CREDENTIAL
from tests.support.waiting import free_port, until

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
        kill_agents_under(self.repo)


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
# A lease longer than any restart these tests make, on a loaded machine too: a serve killed
# and started again, or a Postgres cluster, can take over ten seconds to answer there, and a
# lease that lapses while it is away sends its run round again, by design.
OUTLASTING_TTL = ("--lease-ttl", "60")
