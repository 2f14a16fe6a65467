"""Where `t25 serve` may listen without T25_OPERATOR_TOKEN: loopback (127.0.0.0/8, ::1,
localhost) only. Anywhere else, every interface included, it refuses to start with one
line and a hint, exit code 1, and opens no port. Run as the real `t25 serve`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import httpx
import pytest

from t25_tui.api.server import is_loopback
from tests.support.operators import operator_headers
from tests.support.pipeline import write_config
from tests.support.waiting import answers, free_port, wait_until

CMD = [sys.executable, "-m", "t25_tui"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "T25_OPERATOR_TOKEN"}
    return {**env, **extra}


def _listening(port: int) -> bool:
    """Whether anything accepts on `port`, on IPv4 or IPv6 loopback."""
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        with socket.socket(family) as s:
            s.settimeout(1)
            if s.connect_ex((host, port)) == 0:
                return True
    return False


@pytest.mark.parametrize("bind", [":{port}", "0.0.0.0:{port}", "[::]:{port}", "192.0.2.1:{port}"])
def test_serve_beyond_loopback_without_a_token_refuses_to_start(shop, bind):
    write_config(shop)
    port = free_port()
    done = subprocess.run(
        [*CMD, "serve", "--bind", bind.format(port=port)],
        cwd=shop,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and "T25_OPERATOR_TOKEN" in lines[0] and "Traceback" not in done.stderr
    assert lines[1].strip().startswith("hint:") and "127.0.0.1" in lines[1]
    assert "control plane on" not in done.stdout  # it never got as far as listening
    assert not _listening(port)


def test_the_cockpit_serving_beyond_loopback_without_a_token_refuses_too(shop):
    write_config(shop)
    port = free_port()
    done = subprocess.run(
        [*CMD, "tui", "--serve", f":{port}", "--no-workers"],
        cwd=shop,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1 and "T25_OPERATOR_TOKEN" in done.stderr
    assert not _listening(port)


@pytest.mark.parametrize("host", ["127.0.0.2", "[::1]", "localhost"])
def test_serve_on_loopback_starts_and_wants_its_hosts_token(shop, host):
    write_config(shop)
    port = free_port()
    serve = subprocess.Popen(
        [*CMD, "serve", "--bind", f"{host}:{port}"],
        cwd=shop,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://{host}:{port}"
    try:
        wait_until(lambda: serve.poll() is not None or answers(url))
        assert serve.poll() is None
        # loopback is no trust boundary: the host's own operator shows the token serve made
        assert httpx.get(f"{url}/tasks", timeout=5).status_code == 401
        ops = operator_headers(shop)
        assert httpx.get(f"{url}/tasks", timeout=5, headers=ops).status_code == 200
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=30)


def test_serve_on_every_interface_with_a_token_starts_and_wants_it(shop):
    write_config(shop)
    port = free_port()
    serve = subprocess.Popen(
        [*CMD, "serve", "--bind", f":{port}"],
        cwd=shop,
        env=_env(T25_OPERATOR_TOKEN="op-token-7"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: serve.poll() is not None or answers(url))
        assert httpx.get(f"{url}/tasks", timeout=5).status_code == 401
        ok = httpx.get(f"{url}/tasks", headers={"Authorization": "Bearer op-token-7"}, timeout=5)
        assert ok.status_code == 200
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=30)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.255.0.9", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LocalHost", True),
        ("", False),
        ("0.0.0.0", False),
        ("::", False),
        ("[::]", False),
        ("::ffff:127.0.0.1", False),
        ("10.0.0.1", False),
        ("factory.example", False),
        ("localhost.example", False),
    ],
)
def test_only_127_8_and_ipv6_loopback_and_localhost_count_as_loopback(host, loopback):
    assert is_loopback(host) is loopback
