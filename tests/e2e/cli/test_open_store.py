"""A Postgres store that lets anyone in over TCP without a password (the test server's trust
authentication) is an open door: `t25 doctor` names it, every start that runs agents warns, and
`sandbox: required` refuses to run agents on the host's network beside it. The real binary,
against the real server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from store.open_door import accepts_without_password
from tests.support.backends import PostgresBackend

pytestmark = pytest.mark.postgres
CMD = [sys.executable, "-m", "t25_tui"]
OPEN = "lets a client in over TCP without a password"


@pytest.fixture
async def open_store(pg_template, repo):
    backend = PostgresBackend(pg_template)
    await backend.create()
    try:
        yield backend.url
    finally:
        await backend.drop()


def _t25(repo, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CMD, *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _config(repo, url: str, sandbox: dict) -> None:
    config = {"projects": [{"name": "app"}], "store": {"url": url}, "sandbox": sandbox}
    (repo / "t25.yaml").write_text(yaml.safe_dump(config))


async def test_a_server_that_asks_for_no_password_is_named_one_that_asks_is_not(open_store):
    assert OPEN in (await accepts_without_password(open_store) or "")
    nobody = open_store.replace("postgres@", "no_such_role_9@")  # refused: no such role
    assert await accepts_without_password(nobody) is None
    assert await accepts_without_password("sqlite:///x.db") is None


def test_the_doctor_names_the_open_door(repo, open_store):
    _config(repo, open_store, {"mode": "auto"})
    report = json.loads(_t25(repo, "doctor", "--json").stdout)
    assert any(OPEN in problem for problem in report["problems"]), report["problems"]


def test_required_refuses_agents_on_the_hosts_network_beside_it(repo, open_store):
    _config(repo, open_store, {"mode": "required", "network": "shared"})
    assert _t25(repo, "task", "new", "Add a greeting").returncode == 0
    refused = _t25(repo, "run")
    assert refused.returncode != 0
    assert "network: shared lets agents reach it" in refused.stderr, refused.stderr
    assert "sandbox.network: allowlist" in refused.stderr


def test_the_allowlist_keeps_agents_off_it_and_the_start_warns(repo, open_store):
    _config(repo, open_store, {"mode": "required"})  # network: allowlist, the default
    done = _t25(repo, "run")  # no task: the sweep finds nothing and ends
    assert done.returncode == 0, done.stderr
    assert "t25: warning: the Postgres store at postgres@" in done.stderr
