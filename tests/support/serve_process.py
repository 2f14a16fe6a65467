"""The real `t25 serve` as a child process: on a free port (`serve`, a fixture), or with an
HTTP client on it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.operators import operator_headers
from tests.support.waiting import free_port, until


@pytest.fixture
def serve(t25, repo):
    """The real `t25 serve` on a free loopback port, stopped afterwards."""
    assert t25("init").code == 0
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "t25_tui", "serve", "--bind", f"127.0.0.1:{port}"],
        cwd=repo,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k != "T25_OPERATOR_TOKEN"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "t25 serve exited"
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "t25 serve did not answer within 60 s"
            time.sleep(0.1)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


@asynccontextmanager
async def serve_process(repo: Path, tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    """`t25 serve` in `repo`, healthy, with an HTTP client on it; stopped afterwards."""
    port = free_port()
    err = tmp_path / f"serve-{port}.err"
    with err.open("w") as sink:
        proc = subprocess.Popen(
            [*CMD, "serve", "--bind", f"127.0.0.1:{port}", *args],
            cwd=repo,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    try:
        ops = operator_headers(repo)
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=url, timeout=30, headers=ops) as client:
            serve = Serve(proc, client, err)
            await until(lambda: serve_healthy(serve), what="serve healthy")
            yield serve
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        await until(lambda: proc.poll() is not None, what="serve stopped")


CMD = [sys.executable, "-m", "t25_tui"]


@dataclass
class Serve:
    proc: subprocess.Popen
    client: httpx.AsyncClient
    err: Path

    def stderr(self) -> str:
        return self.err.read_text()

    def said(self, text: str) -> int:
        return self.stderr().count(text)


async def serve_healthy(serve: Serve) -> bool:
    if serve.proc.poll() is not None:
        raise AssertionError(f"serve exited {serve.proc.returncode}: {serve.stderr()}")
    try:
        return (await serve.client.get("/health")).status_code == 200
    except httpx.HTTPError:
        return False
