"""`t25 run` as a child process, the runs it recorded, and the agents left under a directory."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from core.domain.events import RunStarted
from store import open_store
from tests.support.waiting import wait_until

WAIT_S = 120  # every wait below is bounded by this (a lapsed lease takes `t25 run`'s 30 s)

T25 = [sys.executable, "-m", "t25_tui"]


def until(condition, what: str) -> None:
    wait_until(condition, WAIT_S, what)


def freeze(run: subprocess.Popen[bytes], shop: Path) -> None:
    """Stop `run` (SIGSTOP, as Ctrl-Z does) at a moment it holds no write lock on the store:
    stopped inside a write, any SQLite writer holds up every other until it is continued."""
    db = shop / ".factory" / "t25.db"
    for _ in range(20):
        run.send_signal(signal.SIGSTOP)
        until(lambda: _state(run.pid) == "T", "the run process stopped")
        if _write_lock_free(db):
            return
        run.send_signal(signal.SIGCONT)
        until(lambda: _write_lock_free(db), "the run process's write over")
    raise AssertionError("the run process held the store's write lock at every stop")


def _state(pid: int) -> str:
    """A process's state letter in /proc (T: stopped)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def _write_lock_free(db: Path) -> bool:
    con = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        con.execute("BEGIN IMMEDIATE")
        con.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        con.close()


def start_run(shop: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("a") as err:
        return subprocess.Popen(
            [*T25, "run", "--workers", "3"],
            cwd=shop,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )


async def _runs(shop: Path) -> list:
    store = await open_store(f"sqlite:///{shop / '.factory' / 't25.db'}")
    try:
        runs = await store.list_runs()
        started = [
            e for e in await store.events_after(0, limit=10_000) if isinstance(e, RunStarted)
        ]
    finally:
        await store.close()
    return [(r, [e.attempt for e in started if e.run_id == r.id]) for r in runs]


def runs(shop: Path) -> list:
    """Every run, with the attempts under which T25 started its agent."""
    return asyncio.run(_runs(shop))


def kill_agents_under(root: Path) -> None:
    """Whatever a test left running there (nothing, when the agents died as they must)."""
    for pid in agents_under(root):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def agents_under(root: Path) -> list[int]:
    """The processes working under `root`."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if Path(os.readlink(proc / "cwd")).is_relative_to(root):
                    found.append(int(proc.name))
            except (OSError, ValueError):
                continue
    return found
