"""What T25's network wall (`network: allowlist`: the bridge in the sandbox, the proxy on the
host) costs a run, beside the same run with the host's network (`network: shared`), both in
bubblewrap, in the same process:

1. Per connection, from inside a sandbox: an HTTP request to a loopback server (median of N
   connections, each new), and the time to pull 64 MB through one connection.
2. Per real agent CLI against the fake model (median of R runs each): the time from the
   run's start to the model's first request, the whole run, and the bytes and connections
   that went through the proxy.

It exits non-zero unless the work it times happened: every connection pulled its bytes, each
run succeeded, asked the model and landed its edit, and with `allowlist` the run's traffic
went through the proxy. Run by hand:

    .venv/bin/python bench/proxy.py [N] [R]
"""

from __future__ import annotations

import asyncio
import http.server
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from checked import happened

from adapters.netproxy import run_network
from adapters.process import minimal_env, run_process
from adapters.registry import builtin_adapters
from adapters.sandbox import Bubblewrap, Confinement
from bench.agent_clis import environment
from core.domain.agent import AgentRequest
from core.domain.models import TaskState
from core.domain.network import NETWORK_STREAM, Allowlist, Connection
from tests.support.fakemodel.server import FakeModel
from tests.support.real_clis import AIDER_DIR, BIN_DIR, FINAL, MODELS, profile

BULK = 64 * 2**20


class Answer(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        size = BULK if self.path == "/bulk" else 2
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        chunk = b"x" * 65536
        left = size
        while left > 0:
            self.wfile.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)

    def log_message(self, *args: object) -> None:
        pass


CLIENT = """
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
def get(path):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET {path} HTTP/1.0\\r\\n\\r\\n".encode())
    got = 0
    while data := s.recv(1 << 16):
        got += len(data)
    s.close()
    return got
times = []
for _ in range(n):
    t = time.perf_counter(); get("/small"); times.append(time.perf_counter() - t)
t = time.perf_counter(); got = get("/bulk"); bulk = time.perf_counter() - t
times.sort()
print(times[len(times) // 2] * 1000, bulk, got)
"""


async def per_connection(n: int) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_port
    work = Path(tempfile.mkdtemp(prefix="t25-bench-"))
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    print(f"{'network':<10} {'request (median)':>17} {'64 MB':>9} {'MB/s':>8}")
    for network in ("shared", "allowlist"):
        box = Confinement(worktree=work, network=network)
        async with run_network(box, Allowlist.of([f"127.0.0.1:{port}"])) as (box, _):
            argv = [sys.executable, "-c", CLIENT, str(port), str(n)]
            done = await run_process(
                Bubblewrap().wrap(argv, box, {}),
                cwd=work,
                env=minimal_env(),
                timeout_s=300,
                abort=asyncio.Event(),
            )
        answer = done.stdout.decode().split()
        happened(
            done.exit_code == 0 and len(answer) == 3 and int(answer[2]) > BULK,
            f"{network}: the client in the sandbox exited {done.exit_code}, said {answer}",
        )
        ms, bulk, _ = answer
        rate = BULK / 2**20 / float(bulk)
        print(f"{network:<10} {float(ms):>14.2f} ms {float(bulk):>7.2f} s {rate:>8.0f}")
    server.shutdown()
    print()


async def once(cli: str, fake: FakeModel, network: str) -> tuple[float, float, int, int]:
    """(seconds to the first model request, seconds in all, bytes and connections through
    the proxy) of one dev run of `cli`."""
    work = Path(tempfile.mkdtemp(prefix="t25-bench-"))
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    entry = profile(cli, fake)
    request = AgentRequest(
        task_id="T-1",
        run_id="R-1",
        role="dev",
        stage=TaskState.IMPLEMENTING,
        prompt="add a greeting",
        cwd=work,
        model=MODELS[cli],
        args=tuple(entry.get("args", ())),
        env_passthrough=tuple(entry.get("env_passthrough", ())),
        private_home=True,
        timeout_s=600,
        sandbox="bwrap",
        network=network,
    )
    records: list[Connection] = []

    async def sink(stream: str, text: str) -> None:
        if stream == NETWORK_STREAM and (record := Connection.from_text(text)):
            records.append(record)

    before = len([r for r in fake.requests if r["api"]])
    first: list[float] = []

    async def watch(started: float) -> None:
        while not first:
            if len([r for r in fake.requests if r["api"]]) > before:
                first.append(time.monotonic() - started)
            await asyncio.sleep(0.002)

    started = time.monotonic()
    watcher = asyncio.create_task(watch(started))
    result = await builtin_adapters()[cli].run(request, sink, asyncio.Event())
    total = time.monotonic() - started
    watcher.cancel()
    moved = sum(r.sent + r.received for r in records)
    asked = len([r for r in fake.requests if r["api"]]) - before
    wrote = (work / fake.file).exists()
    happened(
        result.ok and asked > 0 and wrote and (moved > 0 or network != "allowlist"),
        f"{cli} ({network}) ended {result.failure or 'ok'} {result.error or ''}: "
        f"{asked} model requests, edit landed {wrote}, {moved} bytes through the proxy",
    )
    return (first[0] if first else float("nan")), total, moved, len(records)


async def per_cli(runs: int) -> None:
    print(
        f"{'cli':<9} {'network':<10} {'first request':>14} {'whole run':>10} "
        f"{'through proxy':>14} {'connections':>12}"
    )
    for cli in ("claude", "codex", "gemini", "opencode", "aider"):
        if not ((BIN_DIR / cli).exists() or (AIDER_DIR / cli).exists()):
            print(f"{cli:<9} not installed")
            continue
        with FakeModel(final=FINAL) as fake:
            environment(fake)
            for network in ("shared", "allowlist"):
                seen = [await once(cli, fake, network) for _ in range(runs)]
                first = statistics.median(s[0] for s in seen)
                total = statistics.median(s[1] for s in seen)
                moved = statistics.median(s[2] for s in seen)
                count = statistics.median(s[3] for s in seen)
                print(
                    f"{cli:<9} {network:<10} {first * 1000:>11.0f} ms {total:>8.2f} s "
                    f"{moved / 1000:>11.1f} KB {count:>12.0f}"
                )


async def main(n: int, runs: int) -> None:
    await per_connection(n)
    await per_cli(runs)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    asyncio.run(main(n, runs))
