"""Waiting in tests: for a free loopback port, for a server to answer, for a condition —
each bounded in time, none a bare sleep."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(url: str, timeout: float = 2.0) -> bool:
    """Whether a serve at `url` answers `/health` with 200 now."""
    try:
        return httpx.get(f"{url}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def wait_until(
    check: Callable[[], object],
    timeout: float = 30.0,
    what: str | Callable[[], str] = "condition",
) -> None:
    """Wait for `check()`, bounded in time; `what` names it in the failure, or says (called
    then) where things stood when the time ran out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what() if callable(what) else what} not met in {timeout:g} s")


async def until(
    check: Callable[[], object],
    timeout: float = 60.0,
    what: str | Callable[[], str] = "condition",
) -> None:
    """Wait for `check()` (a value or a coroutine's), bounded in time; async, so whatever else
    this event loop runs (a server, a relay) goes on meanwhile. `what` as for `wait_until`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what() if callable(what) else what} not met in {timeout:g} s")
