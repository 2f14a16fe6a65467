"""Which tests are `slow`, and the plugins that hold the shared fixtures (tests/support/)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.kinds import KINDS, SLOW_KINDS

# -- kinds, and slow tests -------------------------------------------------------------------
#
# A test's kind is the folder it lives in, and its mark is given here from that folder, so
# that no test module carries one:
#
# - unit: in this process; a small real repository or SQLite file at most;
# - contract: the store on each backend (real SQLite, a Postgres clone per test), the
#   adapters against each CLI's recorded output;
# - integration: programs started within the test: the scripted agent through the pipeline,
#   T25's git on real repositories (worktrees, the fingerprint, the undo, the push), the
#   sandbox, serve's API on a real server (and against its OpenAPI document), a Postgres
#   cluster of its own;
# - e2e: the real `t25` binary (the command line, `t25 serve` and remote workers as
#   programs, a terminal), the real agent CLIs, the cockpit.
#
# `slow` is integration and e2e: `pytest -m "not slow"` is the unit and contract tests, in
# under a minute on two cores; plain `pytest` and .ci/run run everything.

TESTS = Path(__file__).parent

# The fixtures every test may use, by name; their helpers are imported from these modules.
pytest_plugins = [
    "tests.support.repos",  # repo, t25, shop, env
    "tests.support.backends",  # the store on each backend: backend, store, pg_template, ...
    "tests.support.pg_cluster",  # a throwaway Postgres cluster: pg_cluster, cluster
    "tests.support.agent_kit",  # the echo CLI and the scripted agent: echo, scripted, ...
    "tests.support.cockpit",  # seeded
    "tests.support.serve_process",  # the real `t25 serve`: serve
    "tests.support.real_clis",  # the fake model server for the real CLIs: fake
]


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`pytest -n auto` runs twice as many test processes as there are cores, at most eight:
    a test spends most of its time waiting on the programs it starts (a serve, workers, agent
    CLIs, git), so two cores keep four busy: on two cores the whole suite took 30 min in one
    process, 21 in three and 17 in four."""
    return min(8, 2 * (os.cpu_count() or 1))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        where = item.path.relative_to(TESTS).as_posix()
        kind = where.split("/")[0]
        if kind not in KINDS:
            raise pytest.UsageError(f"tests/{where}: a test lives in tests/{{{','.join(KINDS)}}}/")
        item.add_marker(kind)
        if kind in SLOW_KINDS:
            item.add_marker(pytest.mark.slow)
    # Slow tests first, each group in its own order: run side by side (`-n`), the last tests
    # handed out are then quick ones, and no process is left alone with a minute-long test.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
