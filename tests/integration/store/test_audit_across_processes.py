"""The audit chain across real processes: deciders SIGKILLed at random points leave a chain
that verifies, or names exactly the one decision that did not take effect; and on Postgres,
two `t25 serve`s on two checkouts and a `t25` command line deciding at once extend one chain
that every checkout verifies and either serve shows whole."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import yaml

from core.config.schema import load_config
from core.control.audit import VOID, AuditLog, cross_check
from core.control.service import ControlPlane
from core.domain.events import DecisionRecorded
from core.domain.models import TaskState
from core.ports import Store
from tests.support import CHECKOUT
from tests.support.backends import Backend, PostgresBackend
from tests.support.operators import operator_headers
from tests.support.repos import make_repo
from tests.support.waiting import answers, free_port, wait_until

ROOT = CHECKOUT
KILLS = 100  # decisions killed at random points
SEED = 25  # the points are random, and the same on every run


def _checkout(path: Path, url: str) -> Path:
    repo = make_repo(path, exclude_factory=True)
    (repo / "t25.yaml").write_text(
        yaml.safe_dump(
            {
                "projects": [{"name": "shop", "repo": "."}],
                "store": {"url": url},
                # checkouts sharing a store share T25's key, as serve replicas do
                "audit": {"key_file": str(path.parent / "shared-audit.key")},
            }
        )
    )
    return repo


class Killer:
    """The forking decider (tests/support/forking_decider.py), driven line by line."""

    def __init__(self, config: Path) -> None:
        self.child = subprocess.Popen(
            [sys.executable, "-m", "tests.support.forking_decider", str(config)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def decide(self, task: str, kill_after: float | None) -> tuple[int, float | None]:
        """Cancel `task` in a fresh child, SIGKILLed `kill_after` seconds after it starts
        deciding (None: let it finish); its exit status, and how long its decision took
        when it finished one."""
        assert self.child.stdin is not None and self.child.stdout is not None
        self.child.stdin.write(task + "\n")
        self.child.stdin.flush()
        pid, took = None, None
        for _ in range(5):  # pid, deciding, decided, exit: the child's and the parent's
            said = self.child.stdout.readline().split() or ["ended"]
            if said[0] == "pid":
                pid = int(said[1])
            elif said[0] == "deciding" and kill_after is not None:
                assert pid is not None, "the child spoke before the parent named it"
                time.sleep(kill_after)
                with contextlib.suppress(ProcessLookupError):  # it finished first
                    os.kill(pid, signal.SIGKILL)
            elif said[0] == "decided":
                took = float(said[1])
            elif said[0] == "exit":
                return int(said[1]), took
        raise AssertionError(f"the decider said {said}, not how its child ended")

    def close(self) -> None:
        assert self.child.stdin is not None and self.child.stdout is not None
        self.child.stdin.close()
        self.child.wait(timeout=30)
        self.child.stdout.close()


async def _findings(audit: AuditLog, store: Store) -> tuple[bool, list[str], str]:
    """verify's verdict (ok, message) and the cross-check's problems, as `t25 audit verify`."""
    verdict = await audit.verify()
    if not verdict.ok:
        return False, [], verdict.message
    recorded: list[DecisionRecorded] = []
    after = 0
    for _ in range(1000):  # a read ends at an id a killed transaction took: read on past it
        events = await store.events_after(after)
        if not events:
            break
        recorded += [e for e in events if isinstance(e, DecisionRecorded)]
        after = events[-1].id or after
    return True, cross_check(await audit.page(), recorded), verdict.message


@pytest.fixture
async def killed_on(backend: Backend, tmp_path: Path) -> AsyncIterator[tuple[Path, Store]]:
    repo = _checkout(tmp_path / "repo", backend.url)
    store = await backend.open()
    yield repo, store
    await store.close()


async def test_a_decider_killed_at_random_points_leaves_nothing_or_the_one_decision(killed_on):
    repo, store = killed_on
    control = ControlPlane(load_config(repo / "t25.yaml"), store)
    await control.sync_projects()
    tasks = [(await control.new_task(f"task {n}", actor="ana")).id for n in range(KILLS + 2)]
    killer = Killer(repo / "t25.yaml")
    pick = random.Random(SEED)
    unapplied: set[int] = set()  # the lines verify named as never anchored
    try:
        status, took = await asyncio.to_thread(killer.decide, tasks[0], None)
        assert status == 0 and took is not None
        began = time.monotonic()
        for task in tasks[1 : KILLS + 1]:
            assert time.monotonic() - began < 300, "a hundred kills take minutes at most"
            await asyncio.to_thread(killer.decide, task, pick.uniform(0, 1.5 * took))
            ok, problems, message = await _findings(AuditLog(control.audit.path, store), store)
            if ok:
                assert problems == [], problems  # nothing, or ...
                continue
            # ... exactly one decision that did not take effect: its line, never anchored (this
            # decider's, or an earlier one's that no decider has come to void yet)
            (line,) = [e for e in control.audit.entries() if message == _never_anchored(e.seq)]
            assert line.decision == "cancel" and line.actor == "killer", message
            assert (await control.task(line.task or "")).state is TaskState.RECEIVED
            unapplied.add(line.seq)
        status, _ = await asyncio.to_thread(killer.decide, tasks[-1], None)
        assert status == 0
    finally:
        await asyncio.to_thread(killer.close)

    ok, problems, message = await _findings(AuditLog(control.audit.path, store), store)
    assert ok and problems == [], (message, problems)
    entries = await control.audit.page()
    voided = {e.voids for e in entries if e.decision == VOID}
    took_effect = {e.task for e in entries if e.decision == "cancel" and e.seq not in voided}
    cancelled = {t.id for t in await control.tasks() if t.state is TaskState.CANCELLED}
    assert took_effect == cancelled
    # Every decision verify named is voided now (with any other a killed decider left behind
    # it, which verify names in turn as it reaches them); nothing else is.
    undone = {e.seq for e in entries if e.decision == "cancel" and e.seq in voided}
    assert unapplied <= undone
    assert {e.task for e in entries if e.seq in undone}.isdisjoint(cancelled)
    print(f"{KILLS} kills: {len(cancelled) - 2} applied, {len(undone)} did not take effect")


def _never_anchored(seq: int) -> str:
    return (
        f"line {seq}: was never anchored in the store (appended outside T25, or written by a "
        "process that stopped before acknowledging it); if a T25 process was killed while "
        "deciding, the next decision or the next start of `t25 run` or `t25 serve` voids its line"
    )


# -- two serves and a command line on one Postgres database --------------------------------------

TASKS = 40  # each decided (cancel, then archive) by both serves, in an order of each's own ...
CLI_TASKS = 4  # ... but these, by the command line alone (a process per decision)


def _serve(repo: Path, port: int) -> subprocess.Popen[bytes]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("T25_OPERATOR_TOKEN", "T25_OPERATOR_TOKENS")
    }
    return subprocess.Popen(
        [sys.executable, "-m", "t25_tui", "serve", "--bind", f"127.0.0.1:{port}"],
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _over_rest(url: str, repo: Path, actor: str, tasks: list[str]) -> list[int]:
    """Cancel, then archive, each task through one serve (as its host's operator, who
    claims to be `actor`); the status of every request."""
    statuses = []
    with httpx.Client(base_url=url, timeout=60, headers=operator_headers(repo)) as http:
        for task in tasks:
            for verb in ("cancel", "archive"):
                body = {"actor": actor, "reason": f"{verb} by {actor}"}
                statuses.append(http.post(f"/tasks/{task}/{verb}", json=body).status_code)
    return statuses


def _on_the_command_line(repo: Path, tasks: list[str]) -> list[int]:
    codes = []
    for task in tasks:
        for verb in ("cancel", "archive"):
            done = subprocess.run(
                [sys.executable, "-m", "t25_tui", "--actor", "cli", verb, task],
                cwd=repo,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=120,
            )
            codes.append(done.returncode)
    return codes


def _pages(url: str, repo: Path) -> tuple[list[dict], dict]:
    """Every entry of serve's /audit, read page by page, and the last page."""
    entries: list[dict] = []
    after = 0
    with httpx.Client(base_url=url, timeout=60, headers=operator_headers(repo)) as http:
        for _ in range(1000):
            page = http.get("/audit", params={"after": after, "limit": 7}).json()
            entries += page["entries"]
            if page["next"] is None:
                return entries, page
            after = page["next"]
    raise AssertionError("the pages of /audit did not end")


@pytest.mark.postgres
def test_two_serves_and_a_command_line_deciding_at_once_extend_one_chain(pg_template, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    backend = PostgresBackend(pg_template)
    asyncio.run(backend.create())
    repos = [_checkout(tmp_path / name, backend.url) for name in ("one", "two")]
    serves: list[subprocess.Popen[bytes]] = []
    try:
        tasks = asyncio.run(_file_tasks(repos[0], TASKS))
        urls = []
        for repo in repos:
            port = free_port()
            serves.append(_serve(repo, port))
            urls.append(f"http://127.0.0.1:{port}")
        for url in urls:
            wait_until(lambda url=url: answers(url), timeout=60, what=f"serve at {url}")

        # The command line starts a process per decision, slower than a request: its tasks are
        # its own, so it decides on them whoever is faster (were they the serves' last ones, a
        # busy machine let the serves take them all). All three extend the one chain at once.
        theirs, mine = tasks[CLI_TASKS:], tasks[:CLI_TASKS]
        orders = [random.Random(SEED + n).sample(theirs, len(theirs)) for n in range(2)]
        with ThreadPoolExecutor(max_workers=3) as pool:
            rest = [
                pool.submit(_over_rest, url, repos[n], f"serve{n}", orders[n])
                for n, url in enumerate(urls)
            ]
            cli = pool.submit(_on_the_command_line, repos[1], mine)
            statuses = [s for done in rest for s in done.result(timeout=600)]
            codes = cli.result(timeout=600)
        assert set(statuses) <= {200, 409}, statuses  # applied, or refused (or stale) cleanly
        assert set(codes) <= {0, 1}, codes
        assert statuses.count(200) + codes.count(0) >= TASKS  # every task was decided on

        for repo in repos:
            verified = subprocess.run(
                [sys.executable, "-m", "t25_tui", "audit", "verify"],
                cwd=repo,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert verified.returncode == 0, verified.stdout + verified.stderr
            assert "store's chain" in verified.stdout
        mirrors = [(repo / ".factory" / "audit.jsonl").read_bytes() for repo in repos]
        assert mirrors[0] == mirrors[1]

        chain = asyncio.run(_chain(backend.url))
        assert [seq for seq, _ in chain] == list(range(1, len(chain) + 1))
        actors = Counter(line["actor"] for _, line in chain)
        claims = {actor.rpartition(" (claimed ")[2].rstrip(")") for actor in actors}
        assert {"serve0", "serve1", "cli"} <= claims  # the command line's --actor, as claimed
        print(f"one chain of {len(chain)} lines: {dict(actors)}")
        for url, repo in zip(urls, repos, strict=True):
            entries, last = _pages(url, repo)
            assert [e["seq"] for e in entries] == [seq for seq, _ in chain]
            assert last["verified"] and last["head"]["seq"] == len(chain), last["verification"]
    finally:
        for serve in serves:
            serve.send_signal(signal.SIGTERM)
        for serve in serves:
            try:
                serve.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(serve.pid, signal.SIGKILL)
                serve.wait(timeout=30)
        asyncio.run(backend.drop())


async def _file_tasks(repo: Path, count: int) -> list[str]:
    from store import open_store

    config = load_config(repo / "t25.yaml")
    store = await open_store(config.store_url)
    try:
        control = ControlPlane(config, store)
        await control.sync_projects()
        return [(await control.new_task(f"task {n}", actor="ana")).id for n in range(count)]
    finally:
        await store.close()


async def _chain(url: str) -> list[tuple[int, dict]]:
    import json

    import asyncpg

    con = await asyncpg.connect(url)
    try:
        rows = await con.fetch("SELECT seq, line FROM audit_chain ORDER BY seq")
    finally:
        await con.close()
    return [(r["seq"], json.loads(r["line"])) for r in rows]
