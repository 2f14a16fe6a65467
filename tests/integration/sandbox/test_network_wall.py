"""The network wall, tried from inside a run: under `network: allowlist` (the default) a run
reaches the endpoints its allowlist names and nothing else - not the host's loopback
services (a canary HTTP server, Postgres, a real `t25 serve`), not a stand-in "internet"
listener, directly or through T25's proxy however it is asked (CONNECT, plain HTTP, SOCKS5,
a relay of the run's own). Every connection is recorded on the run. QA checks get no network
unless `qa.network` says so.

Each case runs a real bubblewrap sandbox with T25's real proxy on the host; the module runs
as whoever runs the suite (root in CI) and again as an unprivileged user
(tests/integration/sandbox/test_wall_unprivileged.py).
"""

from __future__ import annotations

import asyncio
import http.server
import json
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.netproxy import RunProxy, run_network
from adapters.sandbox import Confinement, bwrap_problem
from core.domain.events import RunOutput
from core.domain.models import ArtifactKind, TaskState
from core.domain.network import NETWORK_STREAM, Allowlist, Connection
from tests.support.sandbox import committed_check, confined, dev
from tests.support.waiting import until

pytestmark = pytest.mark.skipif(
    bool(bwrap_problem()), reason=f"bubblewrap cannot run here: {bwrap_problem()}"
)
PG = ("127.0.0.1", 5432)


class _Answering(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"answered by {self.server.server_port}".encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[int]:
    """A loopback HTTP server answering every GET; its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answering)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()


model = http_server  # the endpoint a run is allowed (a model server on loopback)
canary = http_server  # one of the host's loopback services, which no run may reach


@pytest.fixture
def internet() -> Iterator[int]:
    """A stand-in for a host on the internet an agent would send what it read to: a listener
    that counts whatever reaches it."""
    reached: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    reached.append(conn.recv(4096))
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
        assert reached == [], f"the stand-in internet was reached: {reached!r}"


def _pg_up() -> bool:
    try:
        socket.create_connection(PG, timeout=2).close()
        return True
    except OSError:
        return False


async def inside(
    script: str, tmp_path: Path, allow: list[str]
) -> tuple[str, list[Connection], int | None]:
    """Run `script` (Python) in a sandbox confined as an agent run is, with the allowlist
    `allow`; what it printed, the proxy's records, its exit status."""
    tree = tmp_path / f"tree-{uuid.uuid4().hex[:6]}"
    tree.mkdir()
    records: list[Connection] = []

    async def record(connection: Connection) -> None:
        records.append(connection)

    box = Confinement(worktree=tree, network="allowlist")
    async with run_network(box, Allowlist.of(allow), record) as (box, _):
        out, code = await confined(script, box)
    return out, records, code


# A client that speaks to the proxy the run's variables name, the way tools do.
ASK = """
import os, socket, sys
port = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])
def ask(data, want=12):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        got = b""
        while len(got) < want and (more := s.recv(256)):
            got += more
        return got
"""


async def test_only_the_allowed_endpoint_answers_however_it_is_asked(
    tmp_path, model, canary, internet
):
    targets = {"model": model, "canary": canary, "internet": internet}
    script = ASK + "\n".join(
        [
            f"targets = {targets!r}",
            "for name, p in targets.items():",
            "    try:",
            "        socket.create_connection(('127.0.0.1', p), timeout=5).close(); d = 'open'",
            "    except OSError as e:",
            "        d = type(e).__name__",
            "    c = ask(f'CONNECT 127.0.0.1:{p} HTTP/1.1\\r\\n\\r\\n'.encode()).split(b' ')[1]",
            "    h = ask(f'GET http://127.0.0.1:{p}/ HTTP/1.1\\r\\n\\r\\n'.encode()).split(b' ')[1]",
            "    s = ask(b'\\x05\\x01\\x00\\x05\\x01\\x00\\x01\\x7f\\x00\\x00\\x01' + p.to_bytes(2, 'big'))",
            "    print(name, d, c.decode(), h.decode(), s[2:4].hex())",
        ]
    )
    out, records, code = await inside(script, tmp_path, [f"127.0.0.1:{model}"])
    assert code == 0, out
    seen = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line}
    assert seen["model"] == ["open", "200", "200", "0500"], out  # 0500: SOCKS granted
    for name in ("canary", "internet"):
        assert seen[name] == ["ConnectionRefusedError", "403", "403", "0502"], out
    denied = {(c.port, c.via) for c in records if not c.allowed}
    for port in (canary, internet):
        assert {(port, "connect"), (port, "http"), (port, "socks")} <= denied, records
    assert all(c.reason == "not on the allowlist" for c in records if not c.allowed)
    assert {c.port for c in records if c.allowed} == {model}


async def test_postgres_and_t25_serve_on_loopback_are_out_of_reach(tmp_path, model, serve):
    if not _pg_up():
        pytest.skip("no Postgres on 127.0.0.1:5432")
    serve_port = int(serve.rsplit(":", 1)[1])
    script = ASK + "\n".join(
        [
            f"for p in (5432, {serve_port}):",
            "    try:",
            "        socket.create_connection(('127.0.0.1', p), timeout=5).close(); d = 'open'",
            "    except OSError as e:",
            "        d = type(e).__name__",
            "    c = ask(f'CONNECT 127.0.0.1:{p} HTTP/1.1\\r\\n\\r\\n'.encode()).split(b' ')[1]",
            "    h = ask(f'GET http://localhost:{p}/tasks HTTP/1.1\\r\\n\\r\\n'.encode()).split(b' ')[1]",
            "    print(p, d, c.decode(), h.decode())",
        ]
    )
    out, records, code = await inside(script, tmp_path, [f"127.0.0.1:{model}"])
    assert code == 0, out
    assert "5432 ConnectionRefusedError 403 403" in out, out
    assert f"{serve_port} ConnectionRefusedError 403 403" in out, out
    assert {c.port for c in records} == {5432, serve_port}
    assert not any(c.allowed for c in records)


async def test_a_relay_inside_the_sandbox_meets_the_same_filter(tmp_path, model, canary):
    # The agent starts a relay of its own on the sandbox's loopback and asks through it: the
    # CONNECT still reaches T25's proxy, which decides it as any other.
    script = ASK + "\n".join(
        [
            "import threading",
            "relay = socket.create_server(('127.0.0.1', 0))",
            "def serve_one():",
            "    conn, _ = relay.accept()",
            "    up = socket.create_connection(('127.0.0.1', port))",
            "    up.sendall(conn.recv(4096)); conn.sendall(up.recv(4096)); conn.close(); up.close()",
            "threading.Thread(target=serve_one, daemon=True).start()",
            "with socket.create_connection(relay.getsockname(), timeout=10) as s:",
            f"    s.sendall(b'CONNECT 127.0.0.1:{canary} HTTP/1.1\\r\\n\\r\\n')",
            "    print('relayed', s.recv(64).split(b' ')[1].decode())",
        ]
    )
    out, records, code = await inside(script, tmp_path, [f"127.0.0.1:{model}"])
    assert code == 0, out
    assert "relayed 403" in out, out
    assert [(c.port, c.allowed, c.via) for c in records] == [(canary, False, "connect")]


async def test_an_empty_allowlist_allows_nothing_and_no_name_resolves_inside(tmp_path, model):
    script = ASK + "\n".join(
        [
            "try:",
            "    socket.getaddrinfo('example.com', 443); print('resolved')",
            "except OSError as e:",
            "    print('no-dns', type(e).__name__)",
            f"print('model', ask(b'CONNECT 127.0.0.1:{model} HTTP/1.1\\r\\n\\r\\n').split(b' ')[1].decode())",
            "print('name', ask(b'CONNECT example.com:443 HTTP/1.1\\r\\n\\r\\n').split(b' ')[1].decode())",
        ]
    )
    out, records, code = await inside(script, tmp_path, [])
    assert code == 0, out
    assert "no-dns gaierror" in out and "model 403" in out and "name 403" in out, out
    assert records and not any(c.allowed for c in records)


# -- the proxy's decisions, asked on its socket directly ------------------------------------


async def _ask(proxy: RunProxy, data: bytes, want: int = 12) -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(proxy.socket))
    writer.write(data)
    await writer.drain()
    got = b""
    try:
        while len(got) < want and (more := await asyncio.wait_for(reader.read(256), 10)):
            got += more
    finally:
        writer.close()
    return got


async def test_a_socks_name_with_a_nul_is_refused_before_any_match():
    async def resolve(host: str, port: int):  # nothing may get as far as resolving it
        raise AssertionError(f"resolved {host!r}")

    records: list[Connection] = []

    async def record(c: Connection) -> None:
        records.append(c)

    async with RunProxy(Allowlist.of(["*.allowed.example"]), record, resolve=resolve) as proxy:
        name = b"attacker\x00.allowed.example"
        hello = (
            b"\x05\x01\x00\x05\x01\x00\x03" + bytes([len(name)]) + name + (443).to_bytes(2, "big")
        )
        answer = await _ask(proxy, hello, want=4)
    assert answer[2:4] == b"\x05\x02", answer  # not allowed by ruleset
    assert records[0].reason == "not a valid host name" and "\\x00" in records[0].host


@pytest.mark.parametrize("via", ["socks", "connect"])
async def test_a_client_gone_before_its_answer_leaves_no_upstream_connection_open(via):
    """An agent that asks for a connection and hangs up before the answer: the proxy has
    opened the upstream one by then, and closes it rather than leaving it to the collector."""
    opened, closed = asyncio.Event(), asyncio.Event()

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        opened.set()
        await reader.read()  # until the proxy's side closes
        closed.set()
        writer.close()

    server = await asyncio.start_server(upstream, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    asked = (
        b"\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x01" + port.to_bytes(2, "big")
        if via == "socks"
        else f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode()
    )
    try:
        async with RunProxy(Allowlist.of([f"127.0.0.1:{port}"])) as proxy:
            _, writer = await asyncio.open_unix_connection(str(proxy.socket))
            writer.write(asked)
            await writer.drain()
            writer.close()  # gone before any answer: the proxy's reply finds no one
            await asyncio.wait_for(opened.wait(), 30)
            await asyncio.wait_for(closed.wait(), 30)  # closed by the proxy, not at its end
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize(
    ("resolved", "why"),
    [
        ("127.0.0.1", "a loopback address"),
        ("10.1.2.3", "a private address"),
        ("169.254.169.254", "a cloud metadata address"),
        ("fe80::1", "a link-local address"),
        ("224.0.0.1", "a multicast address"),
    ],
)
async def test_an_allowed_name_that_resolves_to_this_network_is_refused(resolved, why):
    # DNS that points an allowed name at the metadata service or a private host: the name is
    # resolved once, every address checked, and refused.
    import ipaddress

    async def resolve(host: str, port: int):
        return [ipaddress.ip_address("93.184.216.34"), ipaddress.ip_address(resolved)]

    async with RunProxy(Allowlist.of(["api.vendor.example"]), resolve=resolve) as proxy:
        answer = await _ask(proxy, b"CONNECT api.vendor.example:443 HTTP/1.1\r\n\r\n", want=200)
    assert answer.startswith(b"HTTP/1.1 403"), answer
    assert why.encode() in answer, answer


async def test_a_plain_http_request_is_decided_on_its_url_and_keeps_its_destination(model):
    records: list[Connection] = []

    async def record(c: Connection) -> None:
        records.append(c)

    async with RunProxy(Allowlist.of([f"127.0.0.1:{model}"]), record) as proxy:
        denied = await _ask(proxy, b"GET http://evil.example/x HTTP/1.1\r\nHost: x\r\n\r\n")
        # an allowed URL with a Host header naming another: still the URL's host, once
        allowed = await _ask(
            proxy,
            f"GET http://127.0.0.1:{model}/x HTTP/1.1\r\nHost: evil.example\r\n\r\n".encode(),
            want=200,
        )
        https = await _ask(proxy, b"GET https://evil.example/ HTTP/1.1\r\n\r\n")
    assert denied.startswith(b"HTTP/1.1 403") and https.startswith(b"HTTP/1.1 400")
    assert allowed.startswith(b"HTTP/1.0 200") and f"answered by {model}".encode() in allowed
    # the allowed connection's record is kept as its relay ends
    await until(lambda: len(records) == 3, 10, "a record of each of the three connections")
    assert sorted((c.host, c.port, c.allowed, c.via) for c in records) == [
        ("127.0.0.1", model, True, "http"),
        ("evil.example", 80, False, "http"),
        ("evil.example", 443, False, "http"),
    ]


# -- QA checks ------------------------------------------------------------------------------


def _check_reaching(shop: Path, port: int) -> list[str]:
    return committed_check(
        shop,
        "check_net.py",
        "import socket, sys\n"
        f"socket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n"
        "print('reached')\n",
    )


async def _qa_report(control, task_id: str) -> dict:
    qa = [
        a
        for a in await control.store.list_artifacts(task_id=task_id)
        if a.meta.kind is ArtifactKind.QA_REPORT
    ]
    _, report = await control.store.get_artifact(qa[0].id)
    return json.loads(report)


async def test_qa_checks_get_no_network_unless_qa_network_says_so(env, shop, model):
    run = _check_reaching(shop, model)
    checks = [{"name": "net", "run": run, "required": False}]
    control = await env.open(qa={"checks": checks}, sandbox="auto")
    task = await env.new()
    await env.work()
    check = (await _qa_report(control, task.id))["checks"][0]
    assert not check["passed"] and "reached" not in check["excerpt"], check


async def test_qa_checks_under_an_allowlist_reach_it_and_a_refusal_says_so(
    env, shop, model, canary
):
    run = committed_check(
        shop,
        "check_net.py",
        "import os, socket\n"
        "port = int(os.environ['HTTPS_PROXY'].rsplit(':', 1)[1])\n"
        f"socket.create_connection(('127.0.0.1', {model}), timeout=5).close()\n"
        "print('reached the allowed one')\n"
        "with socket.create_connection(('127.0.0.1', port), timeout=5) as s:\n"
        f"    s.sendall(b'CONNECT 127.0.0.1:{canary} HTTP/1.1\\r\\n\\r\\n'); s.recv(64)\n",
    )
    checks = [{"name": "net", "run": run, "required": False}]
    qa = {"checks": checks, "network": "allowlist", "allow_hosts": [f"127.0.0.1:{model}"]}
    control = await env.open(qa=qa, sandbox="auto")
    task = await env.new()
    await env.work()
    check = (await _qa_report(control, task.id))["checks"][0]
    assert check["passed"], check
    assert "reached the allowed one" in check["excerpt"], check
    assert f"network: denied 127.0.0.1:{canary} (not on the allowlist)" in check["excerpt"]


# -- a whole pipeline ------------------------------------------------------------------------


async def test_an_agents_attempts_are_recorded_on_its_run_and_shown(env, shop, model, canary):
    roles = dev(f"reach:127.0.0.1:{model}", f"reach:127.0.0.1:{canary}")
    sandbox = {"mode": "auto", "by_role": {"dev": {"allow_hosts": [f"127.0.0.1:{model}"]}}}
    control = await env.open(roles=roles, sandbox=sandbox)
    task = await env.new()
    await env.work()
    assert (await env.task(task.id)).state is TaskState.DONE
    runs = {r.id: r.role for r in await control.store.list_runs(task_id=task.id)}
    events = [
        e for e in await control.store.events_after(0, task_id=task.id) if isinstance(e, RunOutput)
    ]
    said = "".join(e.text for e in events if runs[e.run_id or ""] == "dev" and e.stream == "stdout")
    assert f"reach 127.0.0.1:{model} direct=open connect=open http=open socks=open" in said
    assert f"reach 127.0.0.1:{canary} direct=refused-ConnectionRefusedError" in said
    network = [
        (runs[e.run_id or ""], Connection.from_text(e.text))
        for e in events
        if e.stream == NETWORK_STREAM
    ]
    denied = {(role, c.port) for role, c in network if c and not c.allowed}
    assert denied == {("dev", canary)}, network
    # Other roles were not allowed the dev role's host: their runs asked for nothing.
    assert {role for role, _ in network} == {"dev"}
    # The operator sees the refusal on the task, and where it happened in the run's log.
    shown = _t25(shop, "task", "show", task.id)
    assert f"denied   127.0.0.1:{canary} ×3 (not on the allowlist)" in shown, shown
    assert f"allowed  127.0.0.1:{model} ×4" in shown, shown
    as_json = json.loads(_t25(shop, "task", "show", task.id, "--json"))["network"]
    assert {(c["port"], c["allowed"], c["count"]) for c in as_json} == {
        (model, True, 4),
        (canary, False, 3),
    }
    logs = _t25(shop, "logs", task.id)
    assert f"✗ network: denied 127.0.0.1:{canary} (not on the allowlist)" in logs, logs


def _t25(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "t25_tui", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
