"""A full disk fails what it stopped, in one line, and T25 goes on: on a real full disk (a
small tmpfs, filled), for the SQLite store's file and for a run's log spool under `t25 run`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.config.schema import DATABASE_URL_ENV
from core.domain.models import ArtifactKind, ArtifactMeta, NewTask, Project
from core.errors import StoreUnavailable
from store import open_store
from tests.support.full_disk import FullDisk
from tests.support.pipeline import write_config
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

WAIT_S = 120  # every wait below is bounded by this


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[FullDisk]:
    """A tmpfs of `size` mounted at `path` for the block, and its filler."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield FullDisk(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


async def test_a_full_disk_under_the_sqlite_store_is_a_store_unavailable_saying_where(tmp_path):
    """The write is refused in one line naming the disk to free; once freed, it goes through."""
    where = tmp_path / "db"
    with tmpfs(where, "1m") as disk:
        store = await open_store(f"sqlite:///{where / 't25.db'}")
        try:
            await store.upsert_project(
                Project(name="shop", repo_path=str(tmp_path), default_branch="main")
            )
            task, _ = await store.create_task(NewTask(project="shop", title="t"), actor="ana")
            meta = ArtifactMeta(kind=ArtifactKind.LOG, task_id=task.id)
            disk.fill()
            content = os.urandom(512 * 1024)  # pages the file does not have
            with pytest.raises(StoreUnavailable) as refused:
                await store.put_artifact(content, meta)
            assert refused.value.message == (
                f"disk full: the store {where / 't25.db'} could not be written "
                f"(free space on {where})"
            )
            disk.free()
            assert (await store.put_artifact(content, meta)).size == len(content)
        finally:
            await store.close()


@pytest.mark.postgres
def test_a_run_whose_log_finds_the_disk_full_fails_alone_and_t25_run_goes_on(shop, cluster):
    """Two runs in flight under one `t25 run`; the disk of the run logs fills; the first to
    end fails with one line, and the other goes on to DONE once the disk has room."""
    write_config(shop)
    env = {**os.environ, DATABASE_URL_ENV: cluster.new_database(f"t25_{uuid.uuid4().hex[:12]}")}
    t25 = [sys.executable, "-m", "t25_tui"]
    for gate in ("a", "b"):
        subprocess.run(
            [*t25, "task", "new", f"Held {gate}", "--description", f"scripted: wait={gate}"],
            cwd=shop,
            env=env,
            check=True,
            capture_output=True,
            timeout=60,
        )
    trees = {gate: shop / ".factory" / "worktrees" / f"T-{n}" for n, gate in ((1, "a"), (2, "b"))}
    err = shop.parent / "run.err"
    with tmpfs(shop / ".factory" / "run-logs", "256k") as disk, err.open("w") as stderr:
        running = subprocess.Popen(
            [*t25, "run", "--workers", "2"],
            cwd=shop,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            wait_until(
                lambda: all((t / f"{g}.started").exists() for g, t in trees.items()),
                WAIT_S,
                "gates",
            )
            disk.fill()
            (trees["a"] / "a").write_text("go\n")
            wait_until(
                lambda: running.poll() is not None or asyncio.run(_errors(env, "T-1")),
                WAIT_S,
                "the first run to fail",
            )
            assert running.poll() is None, err.read_text()  # T25 goes on
            disk.free()
            (trees["b"] / "b").write_text("go\n")
            running.wait(timeout=WAIT_S)  # nothing left that can move without a human
        finally:
            if running.poll() is None:
                os.killpg(running.pid, 9)
                running.wait(timeout=10)
    printed = err.read_text()
    assert "Traceback" not in printed and "unexpected error" not in printed, printed
    [error] = asyncio.run(_errors(env, "T-1"))
    assert error.startswith("disk full: could not write the run's log to "), error
    assert error.endswith(f"(free space on {shop / '.factory' / 'run-logs'})"), error
    assert asyncio.run(_state(env, "T-2")) == "DONE", printed


async def _errors(env: dict[str, str], ref: str) -> list[str]:
    store = await open_store(env[DATABASE_URL_ENV])
    try:
        return [r.error for r in await store.list_runs(task_id=ref) if r.error]
    finally:
        await store.close()


async def _state(env: dict[str, str], ref: str) -> str:
    store = await open_store(env[DATABASE_URL_ENV])
    try:
        task = await store.get_task(ref)
        return task.state.value if task else "absent"
    finally:
        await store.close()
