"""Postgres faults for tests: a throwaway cluster to stop and start, and a half-open link.

The shared server on 5432 is never stopped or restarted (other test runs use it at the
same time); an outage test gets a cluster of its own, in a temporary directory on a free
port, made once per session with `initdb`. `HalfOpenLink` is a TCP relay between T25 and
a server that passes the server's last words on at once but its hang-up only a second
later: after `pg_terminate_backend`, T25's idle connection has the termination message
and no end of file yet, which is how asyncpg comes to raise InternalClientError on its
next statement (on a busy machine the same happens without a relay, for a moment).
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.waiting import free_port

REQUIRE_PG = os.environ.get("T25_REQUIRE_PG") == "1"


def _bindir() -> Path | None:
    """Where initdb and pg_ctl are (Debian keeps them out of PATH)."""
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    found = versions[-1] if versions else shutil.which("pg_ctl")
    return Path(found).resolve().parent if found else None


class Cluster:
    """A Postgres cluster of this test session only: stop it, start it, nobody else minds."""

    def __init__(self, bindir: Path, root: Path) -> None:
        self.bindir, self.root = bindir, root
        self.data = root / "data"
        self.port = free_port()
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _as_postgres(self, *argv: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run(
            [*prefix, *argv], check=True, capture_output=True, timeout=120, stdin=subprocess.DEVNULL
        )

    def create(self) -> None:
        self._as_postgres(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        )
        self.start()

    def start(self) -> None:
        options = f"-k {self.root} -p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._as_postgres(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.root / "log"),
            "-o",
            options,
            "-w",
            "start",
        )

    def stop(self) -> None:
        self._as_postgres(
            str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"
        )

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def psql(self, statement: str, database: str = "postgres") -> str:
        psql = shutil.which("psql") or str(self.bindir / "psql")
        done = subprocess.run(
            [
                psql,
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                database,
                "-Atc",
                statement,
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        return done.stdout.strip()

    def new_database(self, name: str) -> str:
        self.psql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def terminate(self, database: str) -> int:
        """End every backend of `database` (and only of it); how many there were."""
        return int(
            self.psql(
                f"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                f"WHERE datname = '{database}' AND pid <> pg_backend_pid()"
            )
        )

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            self._as_postgres(
                str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"
            )
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    bindir = _bindir()
    if bindir is None:
        reason = "no PostgreSQL binaries (initdb, pg_ctl) for a throwaway cluster"
        if REQUIRE_PG:
            pytest.fail(f"T25_REQUIRE_PG=1 but {reason}")
        pytest.skip(reason)
    root = Path(
        tempfile.mkdtemp(prefix="t25-pg-")
    )  # not under pytest's 0700 tmp: postgres reads it
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    cluster = Cluster(bindir, root)
    try:
        cluster.create()
    except subprocess.CalledProcessError as exc:
        cluster.destroy()
        pytest.fail(f"cannot start a throwaway Postgres cluster: {exc.stderr!r}")
    yield cluster
    cluster.destroy()


@pytest.fixture
def cluster(pg_cluster: Cluster) -> Iterator[Cluster]:
    """The session's throwaway cluster, running again after the test whatever it did."""
    yield pg_cluster
    with contextlib.suppress(subprocess.CalledProcessError):
        pg_cluster.start()  # fails harmlessly when it is running


class HalfOpenLink:
    """A loopback TCP relay to `port` that passes the server's hang-up on late."""

    def __init__(self, port: int, *, hang_up_after_s: float = 1.0) -> None:
        self.target = port
        self.hang_up_after_s = hang_up_after_s
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._pipes: set[asyncio.Task] = set()

    async def __aenter__(self) -> HalfOpenLink:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for w in self._writers:
            w.close()
        for t in tuple(self._pipes):
            t.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        await self._server.wait_closed()

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    async def _relay(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target)
        self._writers += [client_w, server_w]
        for pipe in (
            self._pipe(client_r, server_w, 0.0),
            self._pipe(server_r, client_w, self.hang_up_after_s),
        ):
            task = asyncio.create_task(pipe)
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    @staticmethod
    async def _pipe(
        r: asyncio.StreamReader, w: asyncio.StreamWriter, hang_up_after_s: float
    ) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await r.read(65536):
                w.write(data)
                await w.drain()
        # not a wait: the link holds the hang-up back this long (the fault itself)
        await asyncio.sleep(hang_up_after_s)
        w.close()
