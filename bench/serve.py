"""`t25 serve` figures: SSE latency with many clients, and re-queue latency after kill -9.

  * SSE: 50 clients follow /events while operators make transitions over REST; latency is
    from the event's timestamp (taken just before its transaction) to its receipt.
  * Re-queue: a remote worker holding a run is killed with SIGKILL; how long until the run
    is back in the queue, against the lease TTL plus the reaper period.

Run: .venv/bin/python bench/serve.py [--clients 50] [--transitions 100]
Figures, not a test; but it exits non-zero unless each task was made and cancelled, every
client received every transition it waited for, and the killed worker's run was queued
again. Uses the embedded SQLite store (set T25_DATABASE_URL for Postgres).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx
from checked import happened

from t25_tui.api.credentials import local_token
from t25_tui.api.worker_client import IDLE_CONNECTION_S

ROOT = Path(__file__).resolve().parents[1]
CMD = [sys.executable, "-m", "t25_tui"]
CREDENTIAL = "bench-credential"
LEASE_TTL_S, REAPER_S = 2.0, 0.5  # the worker's --lease-ttl; the control plane's sweep period
CONFIG = """\
projects: [{name: bench, repo: .}]
roles: {spec: [{adapter: scripted}], planner: [{adapter: scripted}],
        dev: [{adapter: scripted, args: [--misbehave, "slow:30"]}], qa: [{adapter: scripted}],
        reviewer: [{adapter: scripted}], docs: [{adapter: scripted}]}
"""


def repo(where: Path) -> Path:
    path = where / "repo"
    path.mkdir()
    for argv in (
        ["init", "-q", "-b", "trunk"],
        ["config", "user.email", "b@t25.invalid"],
        ["config", "user.name", "bench"],
    ):
        subprocess.run(["git", *argv], cwd=path, check=True)
    (path / "README.md").write_text("bench\n")
    subprocess.run(["git", "add", "-A"], cwd=path, check=True)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=path, check=True)
    (path / ".git" / "info" / "exclude").write_text("/.factory/\n/t25.yaml\n")
    (path / "t25.yaml").write_text(CONFIG)
    return path


def start_serve(path: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "FACTORY_WORKER_CREDENTIAL": CREDENTIAL}
    proc = subprocess.Popen(
        [*CMD, "serve", "--bind", f"127.0.0.1:{port}"],
        cwd=path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.05)
    raise SystemExit("serve did not start")


def operator(path: Path) -> dict[str, str]:
    """The headers of an operator on serve's host: the checkout's local token."""
    return {"Authorization": f"Bearer {local_token(path)}"}


async def sse_latency(path: Path, url: str, clients: int, transitions: int) -> list[float]:
    latencies: list[float] = []
    ready = asyncio.Event()
    connected = 0
    wanted = transitions

    async def follow(client: httpx.AsyncClient) -> None:
        nonlocal connected
        seen = 0
        async with client.stream("GET", "/events", headers={"Last-Event-ID": str(start)}) as r:
            connected += 1
            if connected == clients:
                ready.set()
            async for line in r.aiter_lines():
                if line.startswith("data:") and '"task_transitioned"' in line:
                    at = datetime.fromisoformat(json.loads(line[5:])["at"]).timestamp()
                    latencies.append(time.time() - at)
                    seen += 1
                    if seen == wanted:
                        return

    async with httpx.AsyncClient(
        base_url=url,
        headers=operator(path),
        timeout=60,
        limits=httpx.Limits(max_connections=clients + 10, keepalive_expiry=IDLE_CONNECTION_S),
    ) as client:
        start = (await client.get("/health")).json()["last_event_id"]
        followers = [asyncio.create_task(follow(client)) for _ in range(clients)]
        await asyncio.wait_for(ready.wait(), 30)
        for n in range(transitions):
            made = await client.post("/tasks", json={"title": f"t{n}"})
            happened(made.status_code == 201, f"POST /tasks answered {made.status_code}")
            cancel = f"/tasks/{made.json()['id']}/cancel"
            cancelled = await client.post(cancel, json={"actor": "bench"})
            happened(cancelled.status_code == 200, f"cancel answered {cancelled.status_code}")
        await asyncio.wait_for(asyncio.gather(*followers), 120)
    happened(
        len(latencies) == clients * transitions,
        f"{len(latencies)} of {clients} x {transitions} transitions received",
    )
    return latencies


def requeue_latency(path: Path, url: str) -> float:
    env = {**os.environ, "FACTORY_WORKER_CREDENTIAL": CREDENTIAL}
    with httpx.Client(base_url=url, headers=operator(path), timeout=10) as client:
        task = client.post("/tasks", json={"title": "crash me"}).json()["id"]
        worker = subprocess.Popen(
            [*CMD, "worker", "--url", url, "--lease-ttl", str(LEASE_TTL_S), "--heartbeat", "0.5"],
            cwd=path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            dev = None
            deadline = time.monotonic() + 120
            while dev is None:
                happened(time.monotonic() < deadline, f"{task}'s dev run never ran within 120 s")
                runs = client.get(f"/tasks/{task}").json()["runs"]
                dev = next(
                    (r for r in runs if r["role"] == "dev" and r["status"] == "running"), None
                )
                time.sleep(0.02)
            os.kill(worker.pid, signal.SIGKILL)
            killed = time.monotonic()
            while client.get(f"/runs/{dev['id']}").json()["status"] != "queued":
                happened(time.monotonic() - killed < 60, f"{dev['id']} not queued again in 60 s")
                time.sleep(0.01)
            return time.monotonic() - killed
        finally:
            worker.kill()
            worker.wait()
            for proc in Path("/proc").iterdir():  # the killed worker's orphaned agent
                try:
                    if proc.name.isdigit() and Path(os.readlink(proc / "cwd")).is_relative_to(path):
                        os.kill(int(proc.name), signal.SIGKILL)
                except (OSError, ValueError):
                    pass


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--transitions", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="t25-bench-serve-") as tmp:
        path = repo(Path(tmp))
        serve, url = start_serve(path)
        try:
            lat = asyncio.run(sse_latency(path, url, args.clients, args.transitions))
            print(
                f"SSE: {args.clients} clients, {args.transitions} transitions, "
                f"{len(lat)} deliveries"
            )
            print(
                f"  commit -> client receipt  p50 {pct(lat, 0.5):.1f} ms, "
                f"p99 {pct(lat, 0.99):.1f} ms, max {pct(lat, 1.0):.1f} ms (target: p99 < 50 ms)"
            )
            took = requeue_latency(path, url)
            print(
                f"re-queue after kill -9: {took:.2f} s "
                f"(lease TTL {LEASE_TTL_S:.1f} s + reaper period {REAPER_S:.1f} s = "
                f"{LEASE_TTL_S + REAPER_S:.1f} s)"
            )
        finally:
            serve.send_signal(signal.SIGTERM)
            serve.wait(timeout=30)


if __name__ == "__main__":
    main()
