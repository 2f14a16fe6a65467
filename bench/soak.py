"""A soak: `t25 serve`, remote workers on serve's own checkout, cockpits, a steady trickle of tasks.

For `--minutes`, on a fresh repository: `t25 serve --workers 0` on the embedded SQLite store
(`--postgres` puts it on a fresh Postgres database instead), `--workers` processes of
`t25 worker --url … --workers SLOTS` in serve's own checkout, every agent the scripted one
with `--misbehave pace:SECONDS:RATE` (as bench/fleet.py), and `--cockpits` cockpits: each an
SSE reader on `GET /events` that also reads `GET /tasks` every 5 s over REST, as the remote
cockpit does (the Textual app is not run: its reads are these). A task is filed every
`--file-every` seconds; an operator loop approves what waits for approval and merges
every task that reaches DONE over REST, as `t25 merge` would.

Every `--every` seconds it samples, per process (serve, each worker): VmRSS (MB, from
/proc/PID/status) and open file descriptors (/proc/PID/fd); on Postgres, the connections to
the soak's database (pg_stat_activity); and the task worktrees on disk. At the end, after
the last filed tasks are merged (bounded by `--drain`), it prints:

  * the table over time (minute:second, then each column),
  * per process and column: start, max, end and the slope over the last half of the run
    (least squares, per minute): a flat process has a slope near 0,
  * the disk left behind: task worktrees under `.factory/worktrees` (target: 0 once every
    task is merged), the size of `.factory`, and what `t25 cleanup --dry-run` says beside
    what `t25 cleanup` then does (target: the same lines, "would" aside).

`--trace` runs serve under tracemalloc (this script as its wrapper, `--traced-serve`): at the
end serve writes the 25 allocation sites that grew most since its first minute, by
file and line, which is printed. Tracing costs serve memory and time: the RSS column of a
traced run is not comparable with an untraced one.

Run:  .venv/bin/python bench/soak.py [--minutes 10] [--workers 2] [--slots 2] [--cockpits 2]
        [--file-every 5] [--every 10] [--seconds 0.5-1.5] [--rate-kb 2] [--postgres [DSN]]
        [--trace]
Figures, not a test: nothing asserts on time; but, once everything is cleaned up, it exits
non-zero unless the soak did its work: tasks were filed and every one of them merged, and
every cockpit received events. Every process it starts is stopped, the Postgres database it
made dropped, and the temporary checkout removed (`--keep` keeps it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from checked import happened

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from fleet import (  # the fleet bench's processes and /proc readers
    CMD,
    DEFAULT_DSN,
    admin,
    database_url,
    environment,
    free_port,
    kill_leftovers,
    make_repo,
    memory_mb,
    spawn,
    stop_all,
    wait_healthy,
)

from t25_tui.api.credentials import local_token
from t25_tui.api.worker_client import IDLE_CONNECTION_S

TRACE_FILE = "tracemalloc-top.txt"  # in the checkout's .factory/, written by a traced serve
META = {".meta", ".merge"}  # under the worktree root: records and trial merges, not worktrees


# -- the traced serve (`--traced-serve ARGS…`, a child process) -----------------------------------


def traced_serve(argv: list[str]) -> None:
    """Run `t25 <argv>` under tracemalloc; on SIGUSR1, write the sites that grew most since
    the first snapshot (taken on the first SIGUSR1) to .factory/TRACE_FILE."""
    import runpy

    tracemalloc.start(1)  # by line: one frame is enough, and the cheapest
    first: list[tracemalloc.Snapshot] = []

    def dump(signum: int, frame: object) -> None:
        now = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        if not first:
            first.append(now)
            return
        grew = now.compare_to(first[0], "lineno")[:25]
        written = Path(".factory", f"{TRACE_FILE}.part")
        written.write_text("\n".join(str(stat) for stat in grew) + "\n")
        written.replace(Path(".factory", TRACE_FILE))  # whole, or not there yet

    signal.signal(signal.SIGUSR1, dump)
    sys.argv = ["t25", *argv]
    runpy.run_module("t25_tui", run_name="__main__")


# -- the soak ------------------------------------------------------------------------------------


async def _call(client: httpx.AsyncClient, method: str, url: str, **kw: Any) -> httpx.Response:
    """A request, sent again (at most 5 times) when its connection broke under it: a kept-alive
    connection serve closed as the request went out is the client's race, not serve's fault."""
    for attempt in range(5):
        try:
            return await client.request(method, url, **kw)
        except httpx.TransportError:
            if attempt == 4:
                raise
            await asyncio.sleep(0.5)
    raise AssertionError("unreachable")


@dataclass
class Soak:
    args: argparse.Namespace
    tmp: Path
    db: str | None
    repo: Path = field(init=False)
    url: str = ""
    serve: subprocess.Popen | None = None
    workers: list[subprocess.Popen] = field(default_factory=list)
    rows: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    filed: list[str] = field(default_factory=list)
    merged: set[str] = field(default_factory=set)
    refused: dict[str, str] = field(default_factory=dict)
    events: list[int] = field(default_factory=list)

    @property
    def db_url(self) -> str:
        return database_url(self.args.postgres, self.db) if self.db else ""

    def env(self) -> dict[str, str]:
        return environment(T25_DATABASE_URL=self.db_url) if self.db else environment()

    async def start(self) -> None:
        self.repo = make_repo(self.tmp, self.args.seconds, self.args.rate_kb)
        port = free_port()
        argv = ["serve", "--bind", f"127.0.0.1:{port}", "--workers", "0"]
        if self.args.trace:
            argv = [sys.executable, str(Path(__file__).resolve()), "--traced-serve", *argv]
        else:
            argv = [*CMD, *argv]
        self.serve = spawn(argv, self.repo, self.env(), self.tmp / "serve.log")
        self.url = f"http://127.0.0.1:{port}"
        await wait_healthy(self.url, self.serve, self.tmp / "serve.log")
        for i in range(self.args.workers):
            argv = [*CMD, "worker", "--url", self.url, "--workers", str(self.args.slots)]
            self.workers.append(spawn(argv, self.repo, self.env(), self.tmp / f"worker{i}.log"))

    def stop(self) -> None:
        stop_all(self.workers)
        stop_all([self.serve] if self.serve else [])
        kill_leftovers(self.tmp)

    def processes(self) -> dict[str, int]:
        assert self.serve is not None
        return {"serve": self.serve.pid} | {f"w{i + 1}": w.pid for i, w in enumerate(self.workers)}

    def worktrees(self) -> int:
        root = self.repo / ".factory" / "worktrees"
        return sum(1 for p in root.iterdir() if p.name not in META) if root.is_dir() else 0

    async def sample(self) -> dict[str, float]:
        row: dict[str, float] = {}
        for name, pid in self.processes().items():
            row[f"{name} MB"] = memory_mb(pid)[0]
            row[f"{name} fd"] = open_fds(pid)
        if self.db:
            row["pg conns"] = await connections(self.args.postgres, self.db)
        row["trees"] = self.worktrees()
        row["merged"] = len(self.merged)
        return row

    # -- the people around it

    async def cockpit(self, i: int, client: httpx.AsyncClient, stop: asyncio.Event) -> None:
        """An SSE reader on /events that reads the board (`GET /tasks`) every 5 s."""
        after = (await client.get("/health")).json()["last_event_id"]

        async def board() -> None:
            while not stop.is_set():
                (await _call(client, "GET", "/tasks")).raise_for_status()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 5)

        reading = asyncio.create_task(board())
        try:
            async with client.stream("GET", "/events", params={"after": after}) as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("data:"):
                        self.events[i] += 1
        finally:
            reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)

    async def trickle(self, client: httpx.AsyncClient, until: float) -> None:
        n = 0
        while time.monotonic() < until:
            n += 1
            answer = await _call(client, "POST", "/tasks", json={"title": f"soak {n}"})
            answer.raise_for_status()
            self.filed.append(answer.json()["id"])
            await asyncio.sleep(min(self.args.file_every, max(0.0, until - time.monotonic())))

    async def operator(self, client: httpx.AsyncClient, stop: asyncio.Event) -> None:
        """Approve what waits for approval, merge what is DONE, once a second."""
        while not stop.is_set():
            for task in (await _call(client, "GET", "/tasks")).json():
                ref = task["id"]
                if task["state"] == "AWAITING_APPROVAL":
                    await _call(client, "POST", f"/tasks/{ref}/approve", json={"reason": "soak"})
                elif task["state"] == "DONE" and not task["merged"] and ref not in self.refused:
                    answer = await _call(client, "POST", f"/tasks/{ref}/merge", json={})
                    if answer.status_code == 200:
                        self.merged.add(ref)
                    else:
                        self.refused[ref] = answer.text[:200]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1)

    async def run(self) -> None:
        args = self.args
        headers = {"Authorization": f"Bearer {local_token(self.repo)}"}
        timeout = httpx.Timeout(30, read=None)
        limits = httpx.Limits(
            max_connections=args.cockpits + 10, keepalive_expiry=IDLE_CONNECTION_S
        )
        async with httpx.AsyncClient(
            base_url=self.url, headers=headers, timeout=timeout, limits=limits
        ) as client:
            stop = asyncio.Event()
            self.events = [0] * args.cockpits
            people = [
                asyncio.create_task(self.cockpit(i, client, stop)) for i in range(args.cockpits)
            ]
            people.append(asyncio.create_task(self.operator(client, stop)))
            start = time.monotonic()
            until = start + args.minutes * 60
            filing = asyncio.create_task(self.trickle(client, until))
            traced_once = False
            try:
                while True:
                    at = time.monotonic() - start
                    self.rows.append((at, await self.sample()))
                    print(line_of(*self.rows[-1]), flush=True)
                    if args.trace and not traced_once and at >= 60 and self.serve:
                        self.serve.send_signal(signal.SIGUSR1)  # the baseline
                        traced_once = True
                    if filing.done() and self.drained():
                        break
                    if at > args.minutes * 60 + args.drain:
                        print(f"gave up draining after {args.drain:g} s", file=sys.stderr)
                        break
                    await asyncio.sleep(args.every)
                await filing
                self.rows.append((time.monotonic() - start, await self.sample()))
            finally:
                stop.set()
                for task in people:
                    task.cancel()
                await asyncio.gather(*people, return_exceptions=True)
            if args.trace and self.serve is not None:
                self.serve.send_signal(signal.SIGUSR1)
                trace = self.repo / ".factory" / TRACE_FILE
                for _ in range(600):  # a snapshot of a large heap takes a while: 120 s at most
                    if trace.exists():
                        break
                    await asyncio.sleep(0.2)

    def drained(self) -> bool:
        return set(self.filed) <= self.merged | set(self.refused)


def open_fds(pid: int) -> float:
    try:
        return float(len(os.listdir(f"/proc/{pid}/fd")))
    except OSError:
        return float("nan")


async def connections(dsn: str, db: str) -> float:
    con = await asyncpg.connect(dsn, timeout=10)
    try:
        n = await con.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            db,
        )
    finally:
        await con.close()
    return float(n)


def line_of(at: float, row: dict[str, float], header: bool = False) -> str:
    stamp = f"{int(at // 60):4d}:{int(at % 60):02d}"
    if header:
        return " " * len(stamp) + "".join(f"{k:>10}" for k in row)
    return stamp + "".join(f"{v:10.1f}" for v in row.values())


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value), per minute."""
    if len(points) < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / len(points)
    mean_v = sum(v for _, v in points) / len(points)
    var = sum((t - mean_t) ** 2 for t, _ in points)
    cov = sum((t - mean_t) * (v - mean_v) for t, v in points)
    return 60 * cov / var if var else 0.0


def report(soak: Soak) -> None:
    rows = soak.rows
    half = rows[-1][0] / 2
    print(f"\n{'':>10}{'start':>10}{'max':>10}{'end':>10}{'slope/min':>12}  (last half)")
    for key in rows[0][1]:
        values = [row[key] for _, row in rows]
        late = [(at, row[key]) for at, row in rows if at >= half]
        print(
            f"{key:>10}{values[0]:10.1f}{max(values):10.1f}{values[-1]:10.1f}{slope(late):+12.3f}"
        )


def disk(soak: Soak) -> None:
    factory = soak.repo / ".factory"
    size = sum(p.stat().st_size for p in factory.rglob("*") if p.is_file() and not p.is_symlink())
    print(
        f"\nfiled {len(soak.filed)}, merged {len(soak.merged)}, merge refused {len(soak.refused)}; "
        f"cockpits received {sum(soak.events)} events"
    )
    for ref, why in list(soak.refused.items())[:3]:
        print(f"  {ref} not merged: {why}")
    print(f"disk: {soak.worktrees()} task worktrees left, .factory {size / 1e6:.1f} MB")
    said = cleanup(soak, "--dry-run")
    done = cleanup(soak)
    same = [s.replace("would remove", "removed").replace("would keep", "kept") for s in said]
    verdict = "the same" if same == [d.split("; branch ")[0] for d in done] else "DIFFERENT"
    print(f"cleanup --dry-run ({len(said)} lines) and cleanup ({len(done)} lines): {verdict}")
    for line in (said[:3] + done[:3]) if verdict == "DIFFERENT" else said[:3]:
        print(f"  {line}")
    print(f"after cleanup: {soak.worktrees()} task worktrees left")


def cleanup(soak: Soak, *flags: str) -> list[str]:
    done = subprocess.run(
        [*CMD, "cleanup", *flags],
        cwd=soak.repo,
        env=soak.env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    return [line for line in done.stdout.splitlines() if line and line != "nothing to clean up"]


async def soak(args: argparse.Namespace) -> None:
    db = f"t25_soak_{secrets.token_hex(4)}" if args.postgres else None
    tmp = Path(tempfile.mkdtemp(prefix="t25-bench-soak-"))
    if db:
        await admin(args.postgres, f'CREATE DATABASE "{db}"')
    it = Soak(args, tmp, db)
    try:
        await it.start()
        print(
            f"soak: serve + {args.workers} worker processes x {args.slots} slots on serve's "
            f"checkout, {args.cockpits} cockpits, a task every {args.file_every:g} s for "
            f"{args.minutes:g} min, on {'Postgres' if db else 'SQLite'}; every {args.every:g} s:"
        )
        print(line_of(0, await it.sample(), header=True))
        await it.run()
        report(it)
    finally:
        it.stop()
    disk(it)
    trace = it.repo / ".factory" / TRACE_FILE
    if trace.exists():
        print("\nserve's allocations that grew most since its first minute (tracemalloc):")
        print(trace.read_text())
    if db:
        await admin(args.postgres, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    if args.keep:
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    happened(
        bool(it.filed) and it.merged == set(it.filed) and all(it.events),
        f"{len(it.merged)} of {len(it.filed)} tasks filed merged ({len(it.refused)} refused), "
        f"events received by each cockpit: {it.events}",
    )


def main() -> None:
    if sys.argv[1:2] == ["--traced-serve"]:
        traced_serve(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10, help="how long tasks are filed")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--slots", type=int, default=2, help="runs at once in each worker")
    parser.add_argument("--cockpits", type=int, default=2, help="SSE + REST readers")
    parser.add_argument("--file-every", type=float, default=5, help="seconds between tasks")
    parser.add_argument("--every", type=float, default=10, help="seconds between samples")
    parser.add_argument("--seconds", default="0.5-1.5", help="MIN-MAX seconds an agent takes")
    parser.add_argument("--rate-kb", type=float, default=2, help="kB/s each agent prints")
    parser.add_argument("--drain", type=float, default=300, help="seconds to merge the last")
    parser.add_argument(
        "--postgres",
        nargs="?",
        const=DEFAULT_DSN,
        default=None,
        metavar="DSN",
        help="a fresh database beside DSN instead of SQLite",
    )
    parser.add_argument("--trace", action="store_true", help="tracemalloc inside serve")
    parser.add_argument("--keep", action="store_true", help="keep the checkout")
    asyncio.run(soak(parser.parse_args()))


if __name__ == "__main__":
    main()
