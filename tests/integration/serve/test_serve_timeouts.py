"""Slow clients: a request head trickled a byte at a time, a connection that says nothing, a
body that stalls. `t25 serve` closes each after its deadline, so slow clients cannot hold
its file descriptors; with 256 of them and more trickling sockets than that, it still
answers /health once their deadlines pass. Real sockets against a real serve."""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import subprocess
import sys
import time

import pytest

from t25_tui.api import gate as serve_limits
from t25_tui.api.gate import HEADER_TIMEOUT_S, KEEP_ALIVE_S, DeadlineProtocol
from t25_tui.api.protocol import HEADER as PROTOCOL_HEADER
from t25_tui.api.protocol import PROTOCOL
from t25_tui.api.server import make_api
from t25_tui.api.worker_client import Http
from tests.support.pipeline import Env, write_config
from tests.support.serving import CREDENTIAL, serving
from tests.support.waiting import answers, free_port, wait_until

SHORT_S = 0.5  # the deadlines of the in-process serve
BOUND_S = 20.0  # how long a test waits for what must happen well before


@pytest.fixture
async def impatient(shop, monkeypatch):
    monkeypatch.setattr(DeadlineProtocol, "header_timeout_s", SHORT_S)
    monkeypatch.setattr(serve_limits, "BODY_IDLE_S", SHORT_S)
    env = Env(shop)
    control = await env.open()
    async with serving(make_api(control, worker_credential=CREDENTIAL, operator_token=None)) as url:
        yield url
    await env.close()


WORKER = (  # a body is read after a credential and the protocol
    b"Authorization: Bearer " + CREDENTIAL.encode() + f"\r\n{PROTOCOL_HEADER}: {PROTOCOL}".encode()
)


async def _connect(url: str):
    host, port = url.removeprefix("http://").split(":")
    return await asyncio.open_connection(host, int(port))


async def _closed_by_server(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, trickle: bytes
) -> bool:
    """Send `trickle` a byte at a time until the server closes the connection (True), or
    until it is all sent and BOUND_S has passed (False)."""
    deadline = time.monotonic() + BOUND_S
    for byte in trickle:
        if time.monotonic() > deadline:
            break
        try:
            writer.write(bytes([byte]))
            await writer.drain()
            if await asyncio.wait_for(reader.read(1), 0.1) == b"":
                return True
        except TimeoutError:
            continue
        except ConnectionError:
            return True
    try:
        return await asyncio.wait_for(reader.read(1), max(0.1, deadline - time.monotonic())) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


async def test_a_trickled_request_head_is_cut_off(impatient):
    reader, writer = await _connect(impatient)
    endless = b"GET /health HTTP/1.1\r\nHost: t25\r\n" + b"X-Pad: " + b"a" * 10_000
    try:
        assert await _closed_by_server(reader, writer, endless)
    finally:
        writer.close()


async def test_a_connection_that_says_nothing_is_closed(impatient):
    reader, writer = await _connect(impatient)
    try:
        assert await asyncio.wait_for(reader.read(1), BOUND_S) == b""
    finally:
        writer.close()


async def test_a_slow_second_request_on_a_kept_alive_connection_is_cut_off(impatient):
    reader, writer = await _connect(impatient)
    try:
        writer.write(b"GET /health HTTP/1.1\r\nHost: t25\r\n\r\n")
        await writer.drain()
        assert (await asyncio.wait_for(reader.readline(), BOUND_S)).startswith(b"HTTP/1.1 200")
        while (await asyncio.wait_for(reader.readline(), BOUND_S)) != b"\r\n":
            pass
        await asyncio.wait_for(reader.readuntil(b"}"), BOUND_S)
        again = b"GET /health HTTP/1.1\r\nHost: t25\r\n" + b"X-Pad: " + b"a" * 10_000
        assert await _closed_by_server(reader, writer, again)
    finally:
        writer.close()


async def test_t25s_clients_let_an_idle_connection_go_well_before_serve_closes_it():
    """Serve closes a connection idle for KEEP_ALIVE_S. A client that kept one as long would
    now and then send a request on it as serve closes it, and read nothing back: a lost
    reply (seen as `httpx.ReadError` with 50 clients on a loaded machine)."""
    http = Http(["http://127.0.0.1:9", "http://127.0.0.1:10"], None)
    try:
        for client in http.clients:
            pool = client._transport._pool  # where httpx keeps its keep-alive expiry
            assert 0 < pool._keepalive_expiry <= KEEP_ALIVE_S / 2
    finally:
        await http.close()


async def test_a_stalled_body_gets_408(impatient):
    reader, writer = await _connect(impatient)
    try:
        writer.write(  # a worker's route: the credential is checked, then the body read
            b"POST /worker/claim HTTP/1.1\r\nHost: t25\r\nContent-Type: application/json\r\n"
            + WORKER
            + b'\r\nContent-Length: 100\r\n\r\n{"worker": '
        )
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), BOUND_S)
        assert status.startswith(b"HTTP/1.1 408")
    finally:
        writer.close()


def test_trickling_clients_past_the_descriptor_limit_do_not_stop_serve(shop):
    # A real `t25 serve` with 256 descriptors; 300 sockets each trickle a request head that
    # never ends. Once their deadline passes, serve closes them and answers /health again.
    write_config(shop)
    port = free_port()
    env = {**os.environ, "FACTORY_WORKER_CREDENTIAL": CREDENTIAL}

    def few_descriptors() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    serve = subprocess.Popen(
        [sys.executable, "-m", "t25_tui", "serve", "--bind", f"127.0.0.1:{port}"],
        cwd=shop,
        env=env,
        preexec_fn=few_descriptors,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    slow: list[socket.socket] = []
    try:
        wait_until(lambda: answers(url), BOUND_S)
        for _ in range(300):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.setblocking(False)
            s.send(b"GET /health HTTP/1.1\r\nHost: t25\r\nX-Pad: ")
            slow.append(s)
        assert not answers(url)  # every descriptor it has is taken
        deadline = time.monotonic() + HEADER_TIMEOUT_S + 3 * BOUND_S
        while time.monotonic() < deadline and not answers(url):
            for s in slow:  # they keep trickling all the while
                try:
                    s.send(b"a")
                except OSError:
                    pass
            time.sleep(0.5)
        assert serve.poll() is None and answers(url)
    finally:
        for s in slow:
            s.close()
        serve.terminate()
        serve.wait(timeout=30)
