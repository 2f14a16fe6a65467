"""Titles and descriptions sent to a real `t25 serve` over real HTTP meet the same door as
the command line's and the cockpit's: `ControlPlane.new_task` refuses them, and nothing is stored."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from core.domain.text import MAX_TITLE
from tests.operators import operator_headers


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


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"title": "nul \x00 here"}, "title holds a control character (U+0000"),
        ({"title": "evil \x1b]0;pwned\x07"}, "title holds a control character (U+001B"),
        ({"title": "two\nlines"}, "title holds a line break"),
        ({"title": "x" * (MAX_TITLE + 1)}, "at most 200"),
        ({"title": "fine", "description": "nul \x00"}, "description holds a control character"),
    ],
)
def test_rest_refuses_control_characters_and_long_titles_at_the_door(serve, repo, body, said):
    ops = operator_headers(repo)  # the token serve made for its host's operator
    answer = httpx.post(f"{serve}/tasks", json=body, timeout=30, headers=ops)
    assert 400 <= answer.status_code < 500 and answer.status_code != 401, answer.text
    assert said in answer.json()["error"] and answer.json()["hint"]
    assert "pwned" not in answer.text  # the refusal never echoes the text
    assert httpx.get(f"{serve}/tasks", timeout=30, headers=ops).json() == []
