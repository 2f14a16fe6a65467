"""Remote workers that die, freeze or are told to stop: nothing is lost, nothing is kept twice.

`t25 serve` and `t25 worker` run as real processes on loopback; workers hold short leases
so a lapse is quick to reach."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from adapters.scripted_agent import SCRIBBLE_FILE
from core.config.schema import DATABASE_URL_ENV
from core.workspace.git import git_sync
from tests.support.operators import operator_headers
from tests.support.pipeline import write_config
from tests.support.runs import agents_under, kill_agents_under
from tests.support.serving import CREDENTIAL
from tests.support.waiting import answers, free_port, wait_until

CMD = [sys.executable, "-m", "t25_tui"]
ENV = {**os.environ, "FACTORY_WORKER_CREDENTIAL": CREDENTIAL}


@contextmanager
def control_plane(
    repo: Path,
    dev_args: list[str],
    sandbox: str = "auto",
    *,
    serve_prefix: tuple[str, ...] = (),
    serve_env=None,
    lease_ttl: float = 4,
):
    """`t25 serve` (run under `serve_prefix`, `faketime` say, with `serve_env` added) and a
    way to start remote workers against it, holding leases of `lease_ttl` seconds: short, so
    a lapse is quick to reach, yet long enough that a heartbeat a few seconds late on two busy
    cores does not lose one (at 2 s, side by side with other tests, one did)."""
    write_config(repo, roles={"dev": [{"adapter": "scripted", "args": dev_args}]}, sandbox=sandbox)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve = subprocess.Popen(
        [*serve_prefix, *CMD, "serve", "--bind", f"127.0.0.1:{port}"],
        cwd=repo,
        env={**ENV, **(serve_env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    started: list[subprocess.Popen] = []

    def worker(*extra: str, prefix: tuple[str, ...] = ()) -> subprocess.Popen:
        p = subprocess.Popen(
            [
                *prefix,
                *CMD,
                "worker",
                "--url",
                url,
                "--lease-ttl",
                str(lease_ttl),
                "--heartbeat",
                str(lease_ttl / 8),
                *extra,
            ],
            cwd=repo,
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group, as a service manager starts it
        )
        started.append(p)
        return p

    try:
        wait_until(lambda: answers(url))
        with httpx.Client(base_url=url, timeout=10, headers=operator_headers(repo)) as client:
            yield client, worker
    finally:
        for p in started:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=30)
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=30)
        kill_agents_under(repo)


def _dev_run(client: httpx.Client) -> dict | None:
    runs = client.get("/tasks/T-1").json()["runs"]
    return next((r for r in runs if r["role"] == "dev"), None)


def _dev_running(client: httpx.Client) -> bool:
    run = _dev_run(client)
    return run is not None and run["status"] == "running"


def _run_events(client: httpx.Client, run_id: str, kind: str = "run_finished") -> int:
    with client.stream("GET", "/events") as response:
        count = 0
        newest = client.get("/health").json()["last_event_id"]
        current: dict = {}
        for line in response.iter_lines():
            if line.startswith("id:"):
                current["id"] = int(line[3:])
            elif line.startswith("data:") and f'"{kind}"' in line and f'"{run_id}"' in line:
                count += 1
            if current.get("id") == newest:
                return count
    return count


@pytest.mark.parametrize("sandbox", ["auto", "none"])
def test_a_worker_killed_mid_run_loses_nothing_another_finishes_it_once(shop, sandbox):
    """A worker's whole process group SIGKILLed, sandboxed or unconfined: its agent dies with
    it; what the lost attempt left in the worktree is kept under a ref and never reaches the
    next attempt's commit."""
    scribbling = ["--misbehave", "scribble", "--misbehave", "slow:4"]
    with control_plane(shop, scribbling, sandbox) as (client, worker):
        first = worker()
        client.post("/tasks", json={"title": "Survive a crash"})
        wait_until(lambda: _dev_running(client), timeout=60)
        worktrees = shop / ".factory" / "worktrees"
        wait_until(lambda: (worktrees / "T-1" / SCRIBBLE_FILE).exists(), timeout=30)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        wait_until(lambda: not agents_under(worktrees), timeout=10)  # it died with its worker
        worker()
        wait_until(lambda: client.get("/tasks/T-1").json()["task"]["state"] == "DONE", 90)
        dev = _dev_run(client)
        assert dev["status"] == "succeeded" and dev["attempts"] == 2
        assert _run_events(client, dev["id"]) == 1
    kept = git_sync("ls-tree", "-r", "--name-only", f"refs/t25/leftovers/{dev['id']}-1", cwd=shop)
    assert SCRIBBLE_FILE in kept.split()
    on_branch = git_sync("ls-tree", "-r", "--name-only", "feat/T-1", cwd=shop)
    assert SCRIBBLE_FILE not in on_branch.split()


def test_a_frozen_worker_past_its_lease_gets_409_and_nothing_it_sends_is_kept(shop):
    with control_plane(shop, ["--misbehave", "slow:3"]) as (client, worker):
        frozen = worker()
        client.post("/tasks", json={"title": "Survive a freeze"})
        wait_until(lambda: _dev_running(client), timeout=60)
        # Frozen with its agent started: the lapse costs the run its attempt (store.reaping).
        dev_id = _dev_run(client)["id"]
        wait_until(lambda: _run_events(client, dev_id, "run_started") > 0, timeout=60)
        claimed_by = _dev_run(client)["worker"]
        frozen.send_signal(signal.SIGSTOP)
        rescuer = worker()
        # The lease lapses, the run is queued again and the rescuer claims it; it waits for
        # the worktree, which the frozen worker still holds.
        wait_until(lambda: _dev_running(client) and _dev_run(client)["worker"] != claimed_by, 60)
        frozen.send_signal(signal.SIGCONT)  # wakes, is refused (409), stops, lets go
        wait_until(lambda: client.get("/tasks/T-1").json()["task"]["state"] == "DONE", 90)
        assert frozen.poll() is None and rescuer.poll() is None  # refused, not crashed
        dev = _dev_run(client)
        # Finished by a later attempt than the frozen one: the rescuer's, or — when a loaded
        # machine made the rescuer's lease lapse too — the woken worker's new claim.
        assert dev["attempts"] >= 2
        assert _run_events(client, dev["id"]) == 1
        task = client.get("/tasks/T-1").json()["task"]
        assert task["state"] == "DONE" and task["error"] is None


def _changes_on_branch(repo: Path) -> list[str]:
    """The scripted change's lines on the task branch (one per implementation)."""
    text = git_sync("show", "feat/T-1:changes/T-1.md", cwd=repo)
    return [line for line in text.splitlines() if "scripted change" in line]


def _archived(repo: Path) -> str:
    return git_sync("for-each-ref", "--format=%(refname)", "refs/t25/archive/T-1/", cwd=repo)


def test_a_worker_frozen_past_its_lease_while_its_agent_finishes_commits_nothing(shop):
    """Its agent ends while the worker is frozen; the rescuer has the run when it wakes: it
    confirms its lease before committing, finds it gone, and commits nothing (before, it
    committed and the rescuer made the change a second time on top)."""
    with control_plane(shop, []) as (client, worker):
        frozen = worker()
        client.post("/tasks", json={"title": "Freeze", "description": "scripted: wait=go"})
        tree = shop / ".factory" / "worktrees" / "T-1"
        wait_until(lambda: (tree / "go.started").exists(), timeout=60)
        claimed_by = _dev_run(client)["worker"]
        frozen.send_signal(signal.SIGSTOP)
        (tree / "go").write_text("")  # its agent finishes while its worker is frozen
        wait_until(lambda: not (tree / "go").exists(), timeout=30)
        worker()  # the rescuer: claims the lapsed run, waits for the worktree
        wait_until(lambda: _dev_running(client) and _dev_run(client)["worker"] != claimed_by, 60)
        frozen.send_signal(signal.SIGCONT)  # wakes, confirms its lease, commits nothing
        wait_until(lambda: (tree / "go.started").exists(), timeout=60)  # the second attempt
        (tree / "go").write_text("")
        wait_until(lambda: client.get("/tasks/T-1").json()["task"]["state"] == "DONE", 90)
        assert _dev_run(client)["attempts"] == 2
    assert len(_changes_on_branch(shop)) == 1
    assert _archived(shop) == ""  # nothing of the frozen attempt reached the branch


def test_sigterm_hands_the_lease_back_and_ends_the_agent(shop):
    with control_plane(shop, ["--misbehave", "slow:60"]) as (client, worker):
        leaving = worker()
        client.post("/tasks", json={"title": "Hand it back"})
        wait_until(lambda: _dev_running(client), timeout=60)
        leaving.send_signal(signal.SIGTERM)
        assert leaving.wait(timeout=30) == 0
        dev = _dev_run(client)
        assert dev["status"] == "queued" and dev["attempts"] == 0
        agents = [
            p
            for p in Path("/proc").iterdir()
            if p.name.isdigit() and _cwd_under(p, shop / ".factory")
        ]
        assert agents == []


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("serve_skew", "worker_skew"),
    [("+120s", None), (None, "-120s")],
    ids=["serve-ahead", "workers-behind"],
)
def test_a_clock_two_minutes_off_the_database_runs_each_stage_once(
    shop, cluster, serve_skew, worker_skew
):
    """Run times and lease deadlines come from the database's clock; serve's own clock two
    minutes ahead must not make the sweeper take a decision in progress for a stall, nor
    workers' clocks two minutes behind make a lease look longer or shorter than it is.
    The end state: every task DONE, every stage of it run exactly once."""
    database = cluster.new_database(f"t25_{uuid.uuid4().hex[:12]}")
    ahead = ("faketime", "-f", serve_skew) if serve_skew else ()
    behind = ("faketime", "-f", worker_skew) if worker_skew else ()
    # No lease is to lapse here: a lapse under load would run a stage twice for another reason.
    with control_plane(
        shop, [], serve_prefix=ahead, serve_env={DATABASE_URL_ENV: database}, lease_ttl=20
    ) as (client, worker):
        tasks = range(1, 9)
        for n in tasks:
            assert client.post("/tasks", json={"title": f"Add greeting {n}"}).status_code == 201
        for _ in range(3):
            worker(prefix=behind)

        def states() -> list[str]:
            return [client.get(f"/tasks/T-{n}").json()["task"]["state"] for n in tasks]

        wait_until(
            lambda: all(s in ("DONE", "FAILED") for s in states()),
            timeout=240,
            what=lambda: f"every task settled (states: {states()})",
        )
        assert states() == ["DONE"] * len(tasks)
        for n in tasks:
            runs = client.get(f"/tasks/T-{n}").json()["runs"]
            per_stage = Counter(r["stage"] for r in runs)
            assert set(per_stage.values()) == {1}, (n, per_stage)
            assert all(r["status"] == "succeeded" for r in runs), runs
            assert all(_run_events(client, r["id"]) == 1 for r in runs)


def _cwd_under(proc: Path, root: Path) -> bool:
    try:
        return Path(os.readlink(proc / "cwd")).is_relative_to(root)
    except OSError:
        return False


@pytest.fixture(autouse=True)
def _no_stray_agents(shop):
    yield
    kill_agents_under(shop)
