"""A fleet on Postgres: `t25 serve` (one replica, then two), remote worker processes, paced agents.

For each replica count, a fresh Postgres database and a fresh repository: `--workers`
processes of `t25 worker --url … --workers SLOTS` run `--tasks` tasks through the whole
pipeline (SPEC, PLAN, IMPLEMENTING, QA, REVIEW, PR_OPEN, DOCS), every agent the scripted
one with `--misbehave pace:SECONDS:RATE` (a random 1-3 s, drawn per task, stage and round,
streaming 20 kB/s of JSON events by default). With two replicas the workers reach them
through a round-robin TCP relay on loopback (a child process of this script, one address
for every worker, as behind a load balancer: all workers of this host share one checkout,
and a checkout belongs to one control-plane URL). Prints, per replica count:

  * tasks/s (tasks DONE) and runs/s (runs finished), over the wall time from the first
    `POST /tasks` to the last task's final state (its `state_since`),
  * claim and heartbeat latency, p50/p99: the time `POST /worker/claim` and
    `POST /worker/heartbeat` take, request to answer, as seen by a probe in this script that
    works beside the fleet as one more worker against each replica: every 0.2 s it claims
    (an answer with a run or a 204), keeps the first run it gets for 2 s while it
    heartbeats it every 0.2 s, and hands every other run straight back (`/worker/release`,
    which does not count as an attempt); a run it keeps waits those 2 s,
  * output ingested, MB/s: the text of the `run_output` events in the store, over the wall
    time (1 MB = 10^6 bytes; the runs' logs, which completions carry, are not counted),
  * serve: CPU (utime+stime from /proc/PID/stat, in cores over the wall time) and memory
    (VmRSS at the end and VmHWM, its peak, from /proc/PID/status), per replica,
  * Postgres: `pg_database_size` growth over the run, per 1,000 runs finished.

Then, with the last replica count's fleet still up:

  * re-queue after kill -9: one worker process's group is SIGKILLed while it holds runs;
    the time until each of its runs is queued again (target: lease TTL + the reaper's
    0.5 s period) and until it runs under another worker (adds the reaper's 1 s retry
    backoff and a worker's 0.5 s claim poll), polled every 50 ms over `GET /runs/{id}`,
  * idle memory: `--cockpits` SSE clients follow `GET /events` (spread over the replicas)
    while no task is filed and the surviving workers poll for claims; each replica's VmRSS
    is sampled every minute (every sixth of the time, when shorter) for `--idle-minutes`
    (target: flat).

Run (the full size needs a machine with more than 2 cores to say much):
    .venv/bin/python bench/fleet.py [--tasks 500] [--workers 8] [--slots 4] [--seconds 1-3]
        [--rate-kb 20] [--replicas 1,2] [--idle-minutes 30] [--cockpits 10]
        [--lease-ttl 30] [--heartbeat 5] [--dsn postgresql://postgres@127.0.0.1:5432/postgres]
A small run: --tasks 20 --workers 2 --slots 2 --seconds 0.2-0.5 --idle-minutes 0.5
    --lease-ttl 3 --heartbeat 1

Every database it makes (`t25_fleet_<random>_<replicas>`) is dropped at the end, every
process it started is stopped, and the whole run stops by itself after `--timeout` seconds.
Figures, not a test: nothing asserts on time; but it exits non-zero unless the work it times
happened: every task filed ended DONE, the killed worker held runs and each ran again under
another, and every cockpit stayed attached while idle.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
from checked import happened
from serve import operator  # the operator's headers: the checkout's local token

from t25_tui.api.protocol import HEADER as PROTOCOL_HEADER
from t25_tui.api.protocol import PROTOCOL
from t25_tui.api.worker_client import IDLE_CONNECTION_S

ROOT = Path(__file__).resolve().parents[1]
CMD = [sys.executable, "-m", "t25_tui"]
CREDENTIAL = "bench-fleet-credential"
DEFAULT_DSN = os.environ.get("T25_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
REAPER_S, RETRY_S, POLL_S = 0.5, 1.0, 0.5  # the serve sweeper's period and first retry delay
PROBE_EVERY_S, PROBE_HOLD_S = 0.2, 2.0
TERMINAL = {"DONE", "FAILED", "CANCELLED"}
WAITING = {"NEEDS_INPUT", "AWAITING_APPROVAL"}  # a human's turn: counted, not waited for
ROLES = ("spec", "planner", "dev", "qa", "reviewer", "docs")
MB = 1e6


class Timeout(SystemExit):
    """The global timeout: raised from SIGALRM, it unwinds through every cleanup."""


# -- processes -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_repo(where: Path, seconds: str, rate_kb: float) -> Path:
    path = where / "repo"
    path.mkdir()
    for argv in (
        ["init", "-q", "-b", "trunk"],
        ["config", "user.email", "bench@t25.invalid"],
        ["config", "user.name", "bench"],
    ):
        subprocess.run(["git", *argv], cwd=path, check=True)
    (path / "README.md").write_text("bench\n")
    subprocess.run(["git", "add", "-A"], cwd=path, check=True)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=path, check=True)
    (path / ".git" / "info" / "exclude").write_text("/.factory/\n/t25.yaml\n")
    pace = f'[--misbehave, "pace:{seconds}:{rate_kb:g}"]'
    roles = ",\n        ".join(
        f"{role}: [{{adapter: scripted, args: {pace}"
        + (", model: scripted-2" if role == "reviewer" else "")  # not the author's model
        + "}]"
        for role in ROLES
    )
    (path / "t25.yaml").write_text(f"projects: [{{name: bench, repo: .}}]\nroles: {{{roles}}}\n")
    return path


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("T25_", "FACTORY_"))}
    return {**env, "FACTORY_WORKER_CREDENTIAL": CREDENTIAL, **extra}


def spawn(argv: list[str], cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    """A process in a group of its own (so that it and its children can be signalled)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def stop_all(procs: list[subprocess.Popen]) -> None:
    """SIGTERM every group (workers hand their leases back), then SIGKILL what is left."""
    for proc in procs:
        if proc.poll() is None:
            signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + 15
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    for proc in procs:
        signal_group(proc, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def kill_leftovers(under: Path) -> int:
    """Agents a killed worker left behind: any process whose cwd is inside `under`."""
    killed = 0
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and Path(os.readlink(proc / "cwd")).is_relative_to(under):
                os.kill(int(proc.name), signal.SIGKILL)
                killed += 1
        except (OSError, ValueError):
            pass
    return killed


# -- /proc -------------------------------------------------------------------------------------


def cpu_s(pid: int) -> float:
    """utime + stime of `pid` (and of its children it waited for), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return float("nan")
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def memory_mb(pid: int) -> tuple[float, float]:
    """VmRSS and VmHWM of `pid`, in MB."""
    found = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) * 1024 / MB
    except OSError:
        pass
    return found.get("VmRSS", float("nan")), found.get("VmHWM", float("nan"))


# -- the relay in front of two replicas (`--relay PORT HOST:PORT...`, a child process) --------


async def relay(port: int, targets: list[str]) -> None:
    """Each connection to `port` goes to the next target in turn, byte for byte."""
    parent, turn = os.getppid(), itertools.count()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, _, to = targets[next(turn) % len(targets)].rpartition(":")
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(to))
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    async with server:
        while True:
            await asyncio.sleep(1)
            if os.getppid() != parent:  # the bench is gone: so is its relay
                return


# -- the store ---------------------------------------------------------------------------------


def database_url(dsn: str, name: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))


async def admin(dsn: str, statement: str) -> None:
    con = await asyncpg.connect(dsn, timeout=10)
    try:
        await con.execute(statement)
    finally:
        await con.close()


async def store_figures(url: str) -> dict[str, float]:
    con = await asyncpg.connect(url, timeout=10)
    try:
        runs = dict(await con.fetch("SELECT status, count(*) FROM runs GROUP BY status"))
        output = await con.fetchval(
            "SELECT coalesce(sum(octet_length(payload->>'text')), 0) FROM events "
            "WHERE kind = 'run_output'"
        )
        last = await con.fetchval(
            "SELECT extract(epoch FROM max(state_since))::float8 FROM tasks WHERE state = ANY($1)",
            list(TERMINAL | WAITING),
        )
        size = await con.fetchval("SELECT pg_database_size(current_database())")
    finally:
        await con.close()
    return {
        "finished": runs.get("succeeded", 0) + runs.get("failed", 0),
        "failed_runs": runs.get("failed", 0),
        "output": float(output),
        "last": last or 0.0,
        "size": float(size),
    }


# -- the probe -----------------------------------------------------------------------------------


@dataclass
class Probe:
    """One more worker beside the fleet, timing its claims and heartbeats (see the docstring)."""

    url: str
    ttl_s: float
    claims: list[float] = field(default_factory=list)
    beats: list[float] = field(default_factory=list)
    claimed: int = 0

    async def run(self, stop: asyncio.Event) -> None:
        auth = {"Authorization": f"Bearer {CREDENTIAL}", PROTOCOL_HEADER: str(PROTOCOL)}
        held, since = None, 0.0
        async with httpx.AsyncClient(base_url=self.url, headers=auth, timeout=30) as client:
            try:
                while not stop.is_set():
                    body = {"worker": f"bench-probe-{os.getpid()}", "ttl_s": self.ttl_s}
                    start = time.perf_counter()
                    answer = await client.post("/worker/claim", json=body)
                    self.claims.append(time.perf_counter() - start)
                    happened(
                        answer.status_code in (200, 204),
                        f"the probe's claim was answered {answer.status_code}: {answer.text}",
                    )
                    if answer.status_code == 200:
                        self.claimed += 1
                        lease = answer.json()["lease"]
                        if held is None:
                            held, since = lease, time.monotonic()
                        else:
                            await client.post("/worker/release", json={"lease": lease})
                    if held is not None:
                        start = time.perf_counter()
                        answer = await client.post(
                            "/worker/heartbeat", json={"lease": held, "ttl_s": self.ttl_s}
                        )
                        if answer.status_code == 200:
                            self.beats.append(time.perf_counter() - start)
                            held = answer.json()
                        else:
                            held = None  # lost (its task was cancelled, say)
                        if held is not None and time.monotonic() - since > PROBE_HOLD_S:
                            await client.post("/worker/release", json={"lease": held})
                            held = None
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), PROBE_EVERY_S)
            except httpx.HTTPError as exc:
                print(f"  probe of {self.url} stopped: {exc!r}", file=sys.stderr)
            finally:
                if held is not None:
                    with contextlib.suppress(httpx.HTTPError):
                        await client.post("/worker/release", json={"lease": held})


def pct(values: list[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:.1f}"


# -- one fleet -----------------------------------------------------------------------------------


@dataclass
class Fleet:
    args: argparse.Namespace
    replicas: int
    tmp: Path
    db: str
    repo: Path = field(init=False)
    serves: list[subprocess.Popen] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    workers: list[subprocess.Popen] = field(default_factory=list)
    others: list[subprocess.Popen] = field(default_factory=list)
    worker_url: str = ""

    @property
    def db_url(self) -> str:
        return database_url(self.args.dsn, self.db)

    def log(self, name: str) -> Path:
        return self.tmp / f"{name}.log"

    async def start(self) -> None:
        self.repo = make_repo(self.tmp, self.args.seconds, self.args.rate_kb)
        env = environment(T25_DATABASE_URL=self.db_url)
        for i in range(self.replicas):  # one at a time: the first one migrates the store
            port = free_port()
            argv = [*CMD, "serve", "--bind", f"127.0.0.1:{port}", "--workers", "0"]
            self.serves.append(spawn(argv, self.repo, env, self.log(f"serve{i}")))
            self.urls.append(f"http://127.0.0.1:{port}")
            await wait_healthy(self.urls[-1], self.serves[-1], self.log(f"serve{i}"))
        self.worker_url = self.urls[0]
        if self.replicas > 1:
            port = free_port()
            targets = [u.removeprefix("http://") for u in self.urls]
            argv = [sys.executable, str(Path(__file__).resolve()), "--relay", str(port), *targets]
            self.others.append(spawn(argv, self.repo, environment(), self.log("relay")))
            self.worker_url = f"http://127.0.0.1:{port}"
            await wait_healthy(self.worker_url, self.others[-1], self.log("relay"))

    def start_workers(self) -> None:
        env = environment()
        for i in range(self.args.workers):
            argv = [
                *CMD,
                "worker",
                "--url",
                self.worker_url,
                "--workers",
                str(self.args.slots),
                "--lease-ttl",
                str(self.args.lease_ttl),
                "--heartbeat",
                str(self.args.heartbeat),
            ]
            self.workers.append(spawn(argv, self.repo, env, self.log(f"worker{i}")))

    def stop(self) -> None:
        stop_all(self.workers)
        stop_all(self.others)
        stop_all(self.serves)
        kill_leftovers(self.tmp)


async def wait_healthy(url: str, proc: subprocess.Popen, log: Path) -> None:
    async with httpx.AsyncClient(timeout=2) as client:
        for _ in range(600):  # 60 s at most
            if proc.poll() is not None:
                raise SystemExit(f"{url} exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(f"{url}/health")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise SystemExit(f"{url} did not answer /health within 60 s:\n{log.read_text()[-2000:]}")


async def file_tasks(client: httpx.AsyncClient, urls: list[str], n: int, tag: str) -> list[str]:
    ids = []
    for i in range(n):
        answer = await client.post(f"{urls[i % len(urls)]}/tasks", json={"title": f"{tag} {i}"})
        answer.raise_for_status()
        ids.append(answer.json()["id"])
    return ids


async def wait_settled(
    client: httpx.AsyncClient, url: str, ids: set[str], bound_s: float
) -> dict[str, int]:
    """Poll GET /tasks until every task of `ids` is final or waits for a human (bounded)."""
    deadline, said = time.monotonic() + bound_s, time.monotonic()
    states: dict[str, int] = {}
    while time.monotonic() < deadline:
        tasks = (await client.get(f"{url}/tasks")).json()
        states = {}
        for task in tasks:
            if task["id"] in ids:
                states[task["state"]] = states.get(task["state"], 0) + 1
        settled = sum(n for s, n in states.items() if s in TERMINAL | WAITING)
        if settled == len(ids):
            errors = {t["error"] for t in tasks if t["id"] in ids and t["state"] == "FAILED"}
            for error in sorted(errors)[:3]:
                print(f"  a task FAILED: {error}", file=sys.stderr)
            return states
        if time.monotonic() - said > 15:
            print(f"  … {settled}/{len(ids)} settled: {states}", file=sys.stderr)
            said = time.monotonic()
        await asyncio.sleep(0.5)
    print(f"  gave up waiting after {bound_s:.0f} s: {states}", file=sys.stderr)
    return states


async def throughput(fleet: Fleet, client: httpx.AsyncClient) -> dict[str, object]:
    args = fleet.args
    before = await store_figures(fleet.db_url)
    fleet.start_workers()
    probes = [Probe(url, args.lease_ttl) for url in fleet.urls]
    stop = asyncio.Event()
    probing = [asyncio.create_task(p.run(stop)) for p in probes]
    cpu0 = [cpu_s(s.pid) for s in fleet.serves]
    relay0 = [cpu_s(p.pid) for p in fleet.others]
    start = time.time()
    try:
        ids = await file_tasks(client, fleet.urls, args.tasks, "fleet")
        states = await wait_settled(client, fleet.urls[0], set(ids), args.drain_timeout)
    finally:
        stop.set()
        await asyncio.gather(*probing)
    named = [(f"worker{i}", p) for i, p in enumerate(fleet.workers)]
    named += [(f"serve{i}", p) for i, p in enumerate(fleet.serves)]
    for name, proc in named:
        if proc.poll() is not None:
            tail = fleet.log(name).read_text(errors="replace")[-1500:]
            print(f"  {name} exited with {proc.returncode}:\n{tail}", file=sys.stderr)
    happened(
        states.get("DONE", 0) == len(ids),
        f"{states.get('DONE', 0)} of {len(ids)} tasks ended DONE ({states})",
    )
    after = await store_figures(fleet.db_url)
    wall = max(after["last"], start + 1e-3) - start
    cpu = [(cpu_s(s.pid) - c) / wall for s, c in zip(fleet.serves, cpu0, strict=True)]
    relay_cpu = [(cpu_s(p.pid) - c) / wall for p, c in zip(fleet.others, relay0, strict=True)]
    runs = after["finished"] - before["finished"]
    return {
        "states": states,
        "wall": wall,
        "tasks_s": states.get("DONE", 0) / wall,
        "runs": runs,
        "failed_runs": after["failed_runs"],
        "runs_s": runs / wall,
        "claims": [x for p in probes for x in p.claims],
        "beats": [x for p in probes for x in p.beats],
        "claimed": sum(p.claimed for p in probes),
        "output_mb_s": (after["output"] - before["output"]) / MB / wall,
        "cpu": cpu,
        "relay_cpu": relay_cpu,
        "memory": [memory_mb(s.pid) for s in fleet.serves],
        "growth_mb": (after["size"] - before["size"]) / MB,
        "per_1000_mb": (after["size"] - before["size"]) / MB / max(runs, 1) * 1000,
    }


def print_throughput(results: dict[int, dict[str, object]], args: argparse.Namespace) -> None:
    print(
        f"\n{args.tasks} tasks, {args.workers} workers x {args.slots} slots, agents "
        f"{args.seconds} s at {args.rate_kb:g} kB/s, lease TTL {args.lease_ttl:g} s, "
        f"heartbeat {args.heartbeat:g} s (load average now {os.getloadavg()[0]:.2f}, "
        f"{os.cpu_count()} CPUs)"
    )
    counts = sorted(results)
    head = f"  {'':34}" + "".join(f"{f'{n} replica' + ('s' if n > 1 else ''):>22}" for n in counts)
    print(head)

    def row(label: str, cell) -> None:
        print(f"  {label:34}" + "".join(f"{cell(results[n]):>22}" for n in counts))

    row("tasks settled", lambda r: " ".join(f"{k}:{v}" for k, v in sorted(r["states"].items())))
    row("wall time, s", lambda r: f"{r['wall']:.1f}")
    row("tasks/s (DONE)", lambda r: f"{r['tasks_s']:.2f}")
    row("runs/s (finished)", lambda r: f"{r['runs_s']:.2f} ({r['runs']})")
    row("claim latency p50/p99, ms", lambda r: f"{pct(r['claims'], 0.5)}/{pct(r['claims'], 0.99)}")
    row("  claims timed (with a run)", lambda r: f"{len(r['claims'])} ({r['claimed']})")
    row(
        "heartbeat latency p50/p99, ms", lambda r: f"{pct(r['beats'], 0.5)}/{pct(r['beats'], 0.99)}"
    )
    row("  heartbeats timed", lambda r: f"{len(r['beats'])}")
    row("output ingested, MB/s", lambda r: f"{r['output_mb_s']:.3f}")
    row("serve CPU, cores (per replica)", lambda r: " + ".join(f"{c:.2f}" for c in r["cpu"]))
    row(
        "serve RSS/peak, MB (per replica)",
        lambda r: " ".join(f"{m[0]:.0f}/{m[1]:.0f}" for m in r["memory"]),
    )
    row("relay CPU, cores", lambda r: " ".join(f"{c:.2f}" for c in r["relay_cpu"]) or "-")
    row("Postgres growth, MB", lambda r: f"{r['growth_mb']:.1f}")
    row("Postgres growth / 1,000 runs, MB", lambda r: f"{r['per_1000_mb']:.1f}")


async def requeue(fleet: Fleet, client: httpx.AsyncClient) -> None:
    """Kill -9 one worker process's group while it holds runs; time their return."""
    args, url = fleet.args, fleet.urls[0]
    victim = fleet.workers[0]
    name = re.compile(rf"^[^:]*:{victim.pid}-r\d+$")
    ids = await file_tasks(client, fleet.urls, args.workers * args.slots, "kill")
    held: list[str] = []
    first = None
    for _ in range(1200):  # 60 s at most: until it holds a run in every slot, or for 2 s
        running = (await client.get(f"{url}/runs", params={"status": "running"})).json()
        held = [r["id"] for r in running if name.match(r.get("worker") or "")]
        first = first or (time.monotonic() if held else None)
        if len(held) >= args.slots or (first and time.monotonic() - first > 2):
            break
        await asyncio.sleep(0.05)
    print(f"\nre-queue after kill -9 (lease TTL {args.lease_ttl:g} s):")
    happened(bool(held), "the chosen worker never held a run within 60 s")
    signal_group(victim, signal.SIGKILL)
    killed = time.monotonic()
    queued: dict[str, float] = {}
    again: dict[str, float] = {}
    bound = killed + args.lease_ttl + 60
    while len(again) < len(held) and time.monotonic() < bound:
        for run in held:
            if run in again:
                continue
            now = (await client.get(f"{url}/runs/{run}")).json()
            took = time.monotonic() - killed
            worker = now.get("worker") or ""
            if now["status"] == "queued":
                queued.setdefault(run, took)
            elif now["status"] != "running" or not name.match(worker):
                queued.setdefault(run, took)  # missed between two polls: at most this
                again[run] = took
        await asyncio.sleep(0.05)
    with contextlib.suppress(subprocess.TimeoutExpired):
        victim.wait(timeout=5)
    happened(
        len(again) == len(held),
        f"{len(held) - len(again)} of {len(held)} run(s) not running again within "
        f"{bound - killed:.0f} s of kill -9",
    )
    target = args.lease_ttl + REAPER_S
    print(f"  runs held by the killed worker   {len(held)}")
    if queued:
        print(
            f"  back in the queue                max {max(queued.values()):.2f} s, "
            f"median {statistics.median(queued.values()):.2f} s "
            f"(target: lease TTL + reaper period = {target:.1f} s)"
        )
    if again:
        print(
            f"  running again under another      max {max(again.values()):.2f} s, "
            f"median {statistics.median(again.values()):.2f} s "
            f"(+ retry backoff {RETRY_S:g} s + claim poll <= {POLL_S:g} s = "
            f"{target + RETRY_S + POLL_S:.1f} s)"
        )
    await wait_settled(client, url, set(ids), args.drain_timeout)


async def idle(fleet: Fleet) -> None:
    """Serve's RSS while `--cockpits` SSE clients follow /events and no task is filed."""
    args = fleet.args
    limits = httpx.Limits(max_connections=args.cockpits + 5, keepalive_expiry=IDLE_CONNECTION_S)
    async with httpx.AsyncClient(
        headers=operator(fleet.repo), timeout=httpx.Timeout(10, read=None), limits=limits
    ) as client:
        await _idle(fleet, client)


async def _idle(fleet: Fleet, client: httpx.AsyncClient) -> None:
    args = fleet.args
    total_s = args.idle_minutes * 60
    every_s = min(60.0, total_s / 6)
    received = [0] * args.cockpits
    connected = asyncio.Event()
    attached = 0

    async def cockpit(i: int) -> None:
        nonlocal attached
        url = fleet.urls[i % len(fleet.urls)]
        after = (await client.get(f"{url}/health")).json()["last_event_id"]
        async with client.stream("GET", f"{url}/events", params={"after": after}) as stream:
            attached += 1
            if attached == args.cockpits:
                connected.set()
            async for line in stream.aiter_lines():
                if line.startswith("data:"):
                    received[i] += 1

    following = [asyncio.create_task(cockpit(i)) for i in range(args.cockpits)]
    samples: list[tuple[float, list[float]]] = []
    try:
        await asyncio.wait_for(connected.wait(), 30)
        start = time.monotonic()
        while True:
            at = time.monotonic() - start
            samples.append((at / 60, [memory_mb(s.pid)[0] for s in fleet.serves]))
            if at >= total_s - 1e-6:
                break
            await asyncio.sleep(min(every_s, total_s - at))
    finally:
        dropped = sum(task.done() for task in following)
        for task in following:
            task.cancel()
        await asyncio.gather(*following, return_exceptions=True)
    happened(not dropped, f"{dropped} of {args.cockpits} cockpits lost their stream while idle")
    print(
        f"\nidle: {args.cockpits} cockpits on /events for {args.idle_minutes:g} min, "
        f"{len(fleet.workers) - 1} worker processes polling; serve VmRSS, MB, "
        "at min:s (target: flat):"
    )
    for minute, rss in samples:
        print(
            f"  {int(minute):4d}:{round(minute * 60) % 60:02d}   "
            + "  ".join(f"{m:8.1f}" for m in rss)
        )
    for i in range(len(fleet.serves)):
        first, last = samples[0][1][i], samples[-1][1][i]
        peak = max(s[1][i] for s in samples)
        print(
            f"  replica {i + 1}: {first:.1f} -> {last:.1f} MB ({last - first:+.1f}), max {peak:.1f}"
        )
    print(f"  events received by the cockpits meanwhile: {sum(received)}; streams lost: {dropped}")


# -- main ----------------------------------------------------------------------------------------


async def bench(args: argparse.Namespace, made: list[str]) -> None:
    counts = [int(n) for n in args.replicas.split(",")]
    results: dict[int, dict[str, object]] = {}
    limits = httpx.Limits(max_connections=20, keepalive_expiry=IDLE_CONNECTION_S)
    for at, replicas in enumerate(counts):
        last = at == len(counts) - 1
        db = f"t25_fleet_{secrets.token_hex(4)}_{replicas}"
        await admin(args.dsn, f'CREATE DATABASE "{db}"')
        made.append(db)
        with tempfile.TemporaryDirectory(prefix="t25-bench-fleet-") as tmp:
            fleet = Fleet(args, replicas, Path(tmp), db)
            try:
                async with httpx.AsyncClient(timeout=30, limits=limits) as client:
                    print(f"-- {replicas} replica(s): starting", file=sys.stderr)
                    await fleet.start()
                    client.headers.update(operator(fleet.repo))
                    results[replicas] = await throughput(fleet, client)
                    if last:
                        print_throughput(results, args)
                        if args.workers > 1:
                            await requeue(fleet, client)
                        else:
                            print("\nre-queue after kill -9: needs --workers 2 or more")
                        if args.idle_minutes > 0:
                            await idle(fleet)
            finally:
                fleet.stop()
        await admin(args.dsn, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        made.remove(db)


def main() -> None:
    if sys.argv[1:2] == ["--relay"]:
        asyncio.run(relay(int(sys.argv[2]), sys.argv[3:]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--workers", type=int, default=8, help="worker processes")
    parser.add_argument("--slots", type=int, default=4, help="runs at once in each worker")
    parser.add_argument("--seconds", default="1-3", help="MIN-MAX seconds an agent takes")
    parser.add_argument("--rate-kb", type=float, default=20, help="kB/s each agent prints")
    parser.add_argument("--replicas", default="1,2", help="serve replicas: 1, 2 or 1,2")
    parser.add_argument("--idle-minutes", type=float, default=30, help="0 skips the idle part")
    parser.add_argument("--cockpits", type=int, default=10, help="SSE clients while idle")
    parser.add_argument("--lease-ttl", type=float, default=30.0)
    parser.add_argument("--heartbeat", type=float, default=5.0)
    parser.add_argument("--dsn", default=DEFAULT_DSN, help="a database to create others from")
    parser.add_argument("--drain-timeout", type=float, default=1800, help="per wait, seconds")
    parser.add_argument("--timeout", type=float, default=None, help="the whole run, seconds")
    args = parser.parse_args()
    low, _, high = args.seconds.partition("-")
    if not re.fullmatch(r"\d+(\.\d+)?-\d+(\.\d+)?", args.seconds) or float(low) > float(high):
        parser.error("--seconds takes MIN-MAX with MIN <= MAX, e.g. 1-3")
    if not re.fullmatch(r"[12](,[12])?", args.replicas):
        parser.error("--replicas takes 1, 2 or 1,2")
    timeout = args.timeout or 2 * args.drain_timeout + args.idle_minutes * 60 + 600

    def expire(signum: int, frame: object) -> None:
        raise Timeout(f"bench/fleet.py: stopped after {timeout:.0f} s (--timeout)")

    signal.signal(signal.SIGALRM, expire)
    signal.signal(signal.SIGTERM, expire)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    made: list[str] = []
    try:
        asyncio.run(bench(args, made))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for db in made:  # what an interrupted run left
            with contextlib.suppress(Exception):
                asyncio.run(admin(args.dsn, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))


if __name__ == "__main__":
    main()
