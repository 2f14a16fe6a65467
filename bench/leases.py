"""Lease throughput at a queue's length: T25's claim-and-complete beside pgqueuer and the raw
SKIP LOCKED limit, with the Postgres CPU each job costs.

For each backlog (`--queued`, 1,000 / 5,000 / 20,000 runs by default) and each worker count
(`--workers`), the queue is filled with the backlog plus the runs to time (`--runs`); each
worker, on a connection of its own, then claims and completes its share of the timed runs
and stops, so the queue is never shorter than the backlog while it is timed. Contenders:

- T25's Postgres store: one statement to claim (`FOR UPDATE SKIP LOCKED`, by priority then
  age), one to complete under the fencing token with its RunFinished event row;
- pgqueuer doing the equivalent dequeue and acknowledge at batch size 1;
- the raw limit: a bare table with a partial index, claimed by the same `UPDATE … WHERE id =
  (SELECT … FOR UPDATE SKIP LOCKED LIMIT 1)` and completed by one `UPDATE` — what the
  pattern costs with nothing else done;
- T25's embedded SQLite store, for reference.

Each figure is runs per second and, for the Postgres contenders, the CPU time of the server
processes that served the workers divided by the jobs they did (read from `/proc` of those
backends when the work ends, so only on a server on this machine; otherwise "-"). Every
measurement checks that the work it timed happened: each timed run finished exactly once
under a token of its own, and the backlog is still queued, the length it says; otherwise the
script exits non-zero. Every measurement uses a fresh database, dropped afterwards; each
figure is the median of `--repeat` measurements, taken in turn with the other contenders' so
that a busy moment of the machine does not favour one of them. Figures, not a test: nothing
asserts on time.

pgqueuer is not a T25 dependency. It runs in an environment of its own, in a child
process of this script; make that environment once:

    python3 -m venv /tmp/t25-bench-pgq
    /tmp/t25-bench-pgq/bin/pip install pgqueuer asyncpg==0.32.0

Run:
    .venv/bin/python bench/leases.py [--queued 1000,5000,20000] [--runs 2000]
        [--workers 16] [--dsn postgresql://postgres@127.0.0.1:5432/postgres]
        [--processes 1] [--repeat 3] [--skip sqlite] [--pgqueuer-python PATH]

`--processes` spreads the workers of each count over that many OS processes (same split for
every contender). One is the default: on a 2-CPU machine more processes only compete with
the server for the CPUs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from checked import interpreter

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DSN = os.environ.get("T25_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
DEFAULT_PGQ_PYTHON = os.environ.get("T25_BENCH_PGQUEUER_PYTHON", "/tmp/t25-bench-pgq/bin/python")
TTL_S = 60.0
KINDS = ("t25", "pgqueuer", "raw", "sqlite")
LABEL = {
    "t25": "T25 Postgres",
    "pgqueuer": "pgqueuer (batch 1)",
    "raw": "raw SKIP LOCKED",
    "sqlite": "T25 SQLite",
}

RAW_SCHEMA = """
CREATE TABLE raw_jobs (id bigserial PRIMARY KEY, status text NOT NULL DEFAULT 'queued',
                       worker text, finished_at timestamptz);
CREATE INDEX raw_jobs_queued ON raw_jobs (id) WHERE status = 'queued';
"""
RAW_CLAIM = """
UPDATE raw_jobs SET status = 'running', worker = $1
WHERE id = (SELECT id FROM raw_jobs WHERE status = 'queued' ORDER BY id
            FOR UPDATE SKIP LOCKED LIMIT 1)
RETURNING id"""
RAW_COMPLETE = "UPDATE raw_jobs SET status = 'done', finished_at = clock_timestamp() WHERE id = $1"


def database_url(dsn: str, name: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))


async def admin(dsn: str, statement: str) -> None:
    import asyncpg

    con = await asyncpg.connect(dsn)
    try:
        await con.execute(statement)
    finally:
        await con.close()


# -- the workers of one process (run in children: `--child KIND …`) ------------------------------


async def until(start_at: float) -> None:
    """Every child connects first, then all start at the agreed instant."""
    await asyncio.sleep(max(0.0, start_at - time.time()))  # not a wait: the agreed start


def shares(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


async def work_shares(url: str, quotas: list[int], start_at: float, opened: list, step) -> dict:
    """Each worker on its own connection (`opened`) runs `step` (jobs done, 0 once the queue
    is empty) until it has done its quota; all start at the agreed instant."""

    async def work(connection, name: str, quota: int) -> int:
        n = 0
        while n < quota and (jobs := await step(connection, name)):
            n += jobs
        return n

    names = [f"w{os.getpid()}-{i}" for i in range(len(quotas))]
    await until(start_at)
    counts = await asyncio.gather(*map(work, opened, names, quotas))
    return await ended(url, sum(counts), [c.close for c in opened])


async def t25_workers(url: str, quotas: list[int], start_at: float) -> dict:
    sys.path.insert(0, str(ROOT))
    from core.domain.models import RunOutcome, RunStatus
    from store import open_store

    done = RunOutcome(status=RunStatus.SUCCEEDED, exit_code=0)

    async def step(store, name: str) -> int:
        if (lease := await store.claim_run(name, TTL_S)) is None:
            return 0
        await store.complete_run(lease, done)
        return 1

    stores = [await open_store(url) for _ in quotas]
    return await work_shares(url, quotas, start_at, stores, step)


async def raw_workers(url: str, quotas: list[int], start_at: float) -> dict:
    import asyncpg

    async def step(con, name: str) -> int:
        if (job := await con.fetchval(RAW_CLAIM, name)) is None:
            return 0
        await con.execute(RAW_COMPLETE, job)
        return 1

    cons = [await asyncpg.connect(url) for _ in quotas]
    return await work_shares(url, quotas, start_at, cons, step)


async def pgqueuer_workers(url: str, quotas: list[int], start_at: float) -> dict:
    from datetime import timedelta

    import asyncpg
    from pgqueuer.queries import EntrypointExecutionParameter, Queries

    entrypoints = {"bench": EntrypointExecutionParameter(concurrency_limit=0)}
    cons = [await asyncpg.connect(url) for _ in quotas]
    queues = {id(con): (Queries.from_asyncpg_connection(con), uuid.uuid4()) for con in cons}

    async def step(con, _name: str) -> int:
        queries, manager = queues[id(con)]
        jobs = await queries.dequeue(
            batch_size=1,
            entrypoints=entrypoints,
            queue_manager_id=manager,
            global_concurrency_limit=None,
            heartbeat_timeout=timedelta(seconds=TTL_S),
        )
        await queries.log_jobs([(job, "successful", None) for job in jobs])
        return len(jobs)

    return await work_shares(url, quotas, start_at, cons, step)


async def backend_cpu_s(url: str) -> dict[int, float] | None:
    """CPU seconds of every other backend of this database, by pid: the workers' while they
    are still connected. None when the server is not on this machine."""
    import asyncpg

    host = urlsplit(url).hostname or "localhost"
    if host not in ("127.0.0.1", "localhost", "::1") and not host.startswith("/"):
        return None
    con = await asyncpg.connect(url)
    try:
        pids = await con.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        )
    finally:
        await con.close()
    tick = os.sysconf("SC_CLK_TCK")
    cpu: dict[int, float] = {}
    for (pid,) in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None  # another machine's pid namespace, or gone
        cpu[pid] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return cpu


async def ended(url: str, done: int, closes: list) -> dict:
    """What a child reports once its workers did their shares: the runs done, when, and the
    CPU of the server's backends read before the workers disconnect (None: unread)."""
    end = time.time()
    cpu = None if url.startswith("sqlite") else await backend_cpu_s(url)
    for close in closes:
        await close()
    return {"done": done, "end": end, "cpu": cpu}


def child(kind: str, url: str, quotas: list[int], start_at: float) -> None:
    run = {
        "t25": t25_workers,
        "sqlite": t25_workers,
        "pgqueuer": pgqueuer_workers,
        "raw": raw_workers,
    }[kind]

    print(json.dumps(asyncio.run(run(url, quotas, start_at))))


# -- setting up a queue, and checking what was done ---------------------------------------------


async def fill_t25(url: str, runs: int) -> None:
    """Queue `runs` runs, each of a task of its own (a stage has one queued or running run),
    as create_task and enqueue_run write them, in two statements to be quick."""
    sys.path.insert(0, str(ROOT))
    from core.domain.models import Project
    from store import open_store

    store = await open_store(url)
    try:
        await store.upsert_project(Project(name="bench", repo_path="/bench", default_branch="main"))
    finally:
        await store.close()
    tasks = (
        "INSERT INTO tasks (project, title, type, description, state, created_at, state_since) "
        "SELECT 'bench', 'bench ' || n, 'feat', '', 'IMPLEMENTING', {now}, {now} FROM {series}"
    )
    runs_sql = (
        "INSERT INTO runs (task_id, stage, role, not_before, enqueued_at, priority) "
        "SELECT id, 'IMPLEMENTING', 'dev', {now}, {now}, priority FROM tasks ORDER BY id"
    )
    if url.startswith("sqlite"):
        series = f"(WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {runs}) SELECT n FROM s)"
        db = sqlite3.connect(urlsplit(url).path)
        try:
            with db:
                db.execute(tasks.format(now="0", series=series))
                db.execute(runs_sql.format(now="0"))
        finally:
            db.close()
        return
    import asyncpg

    con = await asyncpg.connect(url)
    try:
        now, series = "clock_timestamp()", f"generate_series(1, {runs}) AS n"
        await con.execute(tasks.format(now=now, series=series))
        await con.execute(runs_sql.format(now=now))
        await con.execute("ANALYZE runs; ANALYZE tasks")
    finally:
        await con.close()


async def fill_raw(url: str, runs: int) -> None:
    import asyncpg

    con = await asyncpg.connect(url)
    try:
        await con.execute(RAW_SCHEMA)
        await con.execute(
            f"INSERT INTO raw_jobs (status) SELECT 'queued' FROM generate_series(1, {runs})"
        )
        await con.execute("ANALYZE raw_jobs")
    finally:
        await con.close()


async def fill_pgqueuer(url: str, runs: int) -> None:
    import asyncpg
    from pgqueuer.queries import Queries

    con = await asyncpg.connect(url)
    try:
        queries = Queries.from_asyncpg_connection(con)
        await queries.install()
        await queries.enqueue(["bench"] * runs, [None] * runs, [0] * runs)
    finally:
        await con.close()


async def check_t25(url: str, timed_runs: int, backlog: int, done: int) -> None:
    """The figure counts only if every timed run finished exactly once, under its first lease
    and a token of its own, and the backlog is still queued."""
    from collections import Counter

    from core.domain.events import RunFinished
    from store import open_store

    store = await open_store(url)
    try:
        listed = await store.list_runs()
        finished = Counter(
            e.run_id
            for e in await store.events_after(0, limit=10 * timed_runs)
            if isinstance(e, RunFinished)
        )
    finally:
        await store.close()
    ran = [r for r in listed if r.status.value != "queued"]
    queued = len(listed) - len(ran)
    wrong = [r for r in ran if (r.status.value, r.attempts) != ("succeeded", 1)]
    if len({r.lease_token for r in ran}) != len(ran):
        wrong += ran  # a token names one claim in the whole store
    twice = {run: n for run, n in finished.items() if n != 1}
    if (len(ran), len(finished), done, queued) != (timed_runs, timed_runs, timed_runs, backlog):
        wrong += ran[:1]
    if wrong or twice:
        raise SystemExit(
            f"{url}: {len(ran)} runs ran, {done} completions reported, {len(finished)} finished, "
            f"{queued} still queued (expected {timed_runs} and a backlog of {backlog}); "
            f"not finished once under a token of its own: {wrong[:3]}; finished more than "
            f"once: {list(twice.items())[:3]}"
        )


async def check_counts(url: str, kind: str, timed_runs: int, backlog: int) -> None:
    """For pgqueuer and the raw table: the timed jobs done, the backlog still queued."""
    import asyncpg

    if kind == "raw":
        done_sql = "SELECT count(*) FROM raw_jobs WHERE status = 'done'"
        queued_sql = "SELECT count(*) FROM raw_jobs WHERE status = 'queued'"
    else:
        done_sql = "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'"
        queued_sql = "SELECT count(*) FROM pgqueuer WHERE status = 'queued'"
    con = await asyncpg.connect(url)
    try:
        done, queued = await con.fetchval(done_sql), await con.fetchval(queued_sql)
    finally:
        await con.close()
    if (done, queued) != (timed_runs, backlog):
        raise SystemExit(
            f"{kind}: {done} jobs done and {queued} queued, expected {timed_runs} and {backlog}"
        )


# -- timing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    per_s: float
    cpu_ms_per_job: float | None


def timed(kind: str, python: str, url: str, runs: int, workers: int, processes: int):
    """Start the workers in `processes` children at one agreed instant, each worker with its
    share of `runs`; runs done, seconds, and the CPU seconds of their backends (None: unread)."""
    per_process = [n for n in shares(workers, processes) if n]
    quotas = shares(runs, workers)
    start_at = time.time() + 1.5  # enough for every child to import and connect first
    children, taken = [], 0
    for n in per_process:
        mine = ",".join(map(str, quotas[taken : taken + n]))
        taken += n
        command = [python, __file__, "--child", kind, url, mine, repr(start_at)]
        children.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT))
    results = []
    for c in children:
        out, _ = c.communicate()
        if c.returncode != 0:
            raise SystemExit(f"a {kind} benchmark child failed (exit {c.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    cpu: dict[str, float] = {}
    for r in results:
        if r["cpu"] is None:
            return sum(r["done"] for r in results), max(r["end"] for r in results) - start_at, None
        for pid, seconds in r["cpu"].items():  # children may see each other's backends
            cpu[pid] = max(cpu.get(pid, 0.0), seconds)
    done = sum(r["done"] for r in results)
    return done, max(r["end"] for r in results) - start_at, sum(cpu.values())


def measure(kind: str, args: argparse.Namespace, backlog: int, workers: int) -> Figure:
    processes = min(args.processes, workers)
    total = backlog + args.runs
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/t25.db"
            asyncio.run(fill_t25(url, total))
            done, seconds, cpu = timed(kind, sys.executable, url, args.runs, workers, processes)
            asyncio.run(check_t25(url, args.runs, backlog, done))
        return Figure(done / seconds, None)
    name = f"t25_bench_{uuid.uuid4().hex[:12]}"
    url = database_url(args.dsn, name)
    python = args.pgqueuer_python if kind == "pgqueuer" else sys.executable
    asyncio.run(admin(args.dsn, f'CREATE DATABASE "{name}"'))
    try:
        if kind == "t25":
            asyncio.run(fill_t25(url, total))
        elif kind == "raw":
            asyncio.run(fill_raw(url, total))
        else:
            fill = [python, __file__, "--fill-pgqueuer", url, str(total)]
            subprocess.run(fill, check=True, cwd=ROOT)
        done, seconds, cpu = timed(kind, python, url, args.runs, workers, processes)
        if kind == "t25":
            asyncio.run(check_t25(url, args.runs, backlog, done))
        else:
            asyncio.run(check_counts(url, kind, args.runs, backlog))
    finally:
        asyncio.run(admin(args.dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    if done != args.runs:
        raise SystemExit(f"{kind} with {workers} workers finished {done} of {args.runs} runs")
    return Figure(done / seconds, None if cpu is None else 1000 * cpu / done)


def median(figures: list[Figure]) -> Figure:
    cpu = [f.cpu_ms_per_job for f in figures if f.cpu_ms_per_job is not None]
    return Figure(
        statistics.median(f.per_s for f in figures),
        statistics.median(cpu) if len(cpu) == len(figures) else None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queued", default="1000,5000,20000", help="backlogs, comma-separated")
    parser.add_argument("--runs", type=int, default=2000, help="runs timed above the backlog")
    parser.add_argument("--workers", default="16")
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--pgqueuer-python", default=DEFAULT_PGQ_PYTHON)
    parser.add_argument("--repeat", type=int, default=3, help="measurements per figure (median)")
    parser.add_argument("--skip", default="", help="comma-separated: " + ", ".join(KINDS))
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--fill-pgqueuer", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, url, quotas, start_at = args.child
        child(kind, url, [int(q) for q in quotas.split(",")], float(start_at))
        return
    if args.fill_pgqueuer:
        asyncio.run(fill_pgqueuer(args.fill_pgqueuer[0], int(args.fill_pgqueuer[1])))
        return

    kinds = [k for k in KINDS if k not in args.skip.split(",")]
    if "pgqueuer" in kinds and not Path(args.pgqueuer_python).exists():
        raise SystemExit(
            f"no pgqueuer environment at {args.pgqueuer_python}; see this script's docstring"
        )
    print(
        f"claim-and-complete of {args.runs} runs above a backlog, median of {args.repeat}, "
        f"workers over {args.processes} process(es), {os.cpu_count()} CPUs; "
        "runs/s (Postgres CPU ms per job)"
    )
    print(f"T25 and the raw limit on {interpreter()}")
    if "pgqueuer" in kinds:
        print(f"pgqueuer on {interpreter(args.pgqueuer_python)}")
    compared = [k for k in ("pgqueuer", "raw") if k in kinds and "t25" in kinds]
    print(
        f"{'queued':>7} {'workers':>7} "
        + " ".join(f"{LABEL[k]:>22}" for k in kinds)
        + "".join(f" {'T25 / ' + LABEL[k].split(' ')[0]:>16}" for k in compared)
    )
    for backlog in [int(q) for q in args.queued.split(",")]:
        for workers in [int(w) for w in args.workers.split(",")]:
            samples: dict[str, list[Figure]] = {k: [] for k in kinds}
            for _ in range(args.repeat):
                for k in kinds:
                    samples[k].append(measure(k, args, backlog, workers))
            figures = {k: median(v) for k, v in samples.items()}
            cells = []
            for k in kinds:
                f = figures[k]
                cpu = "-" if f.cpu_ms_per_job is None else f"{f.cpu_ms_per_job:.2f}"
                cells.append(f"{f'{f.per_s:,.0f} ({cpu})':>22}")
            ratios = [f" {figures['t25'].per_s / figures[k].per_s:>15.2f}x" for k in compared]
            print(f"{backlog:>7} {workers:>7} " + " ".join(cells) + "".join(ratios), flush=True)


if __name__ == "__main__":
    main()
